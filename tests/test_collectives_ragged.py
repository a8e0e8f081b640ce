"""ragged_all_to_all (seed: RaggedAllToAll) on 1, 2 and 4 replica threads, against a numpy
emulation of the seed's rule: replica r sends input[input_offsets[j]:+send_sizes[j]] to member
j of its group, which writes it at output_offsets[j] (the sender's array) into its output."""

from __future__ import annotations

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.runtime.replicas import CollectiveError


def shape_of(x: np.ndarray) -> xm.Shape:
    return xm.Shape.array(xm.type_of(x.dtype), x.shape)


def build(like: list[np.ndarray], replica_groups=None, channel_id=None) -> xm.XlaComputation:
    """Parameters in the builder's argument order: input, input_offsets, send_sizes, output,
    output_offsets, recv_sizes."""
    b = xm.XlaBuilder("ragged")
    ps = [b.parameter(i, shape_of(x)) for i, x in enumerate(like)]
    return b.build(b.ragged_all_to_all(*ps, replica_groups=replica_groups, channel_id=channel_id))


def emulate(per_replica: list[list[np.ndarray]], groups: list[list[int]]) -> list[np.ndarray]:
    """The seed's loop, replica by replica: for each member j of my group (and each update u),
    SEND input[input_offsets[j][u]:+send_sizes[j][u]] to output[output_offsets[j][u]] of j."""
    results = [np.array(args[3]) for args in per_replica]
    for group in groups:
        for r in group:
            data, in_off, sizes, _, out_off, _ = per_replica[r]
            in_off, sizes, out_off = (a.reshape(len(group), -1) for a in (in_off, sizes, out_off))
            for j, target in enumerate(group):
                for u in range(sizes.shape[1]):
                    n = sizes[j, u]
                    results[target][out_off[j, u]:out_off[j, u] + n] = data[in_off[j, u]:in_off[j, u] + n]
    return results


def run(per_replica, groups=None, n=None, **kw):
    n = n or len(per_replica)
    exe = xm.compile(build(per_replica[0], groups), num_replicas=n)
    return exe.execute_replicated(per_replica, **kw)


def test_seed_example():
    i32 = np.int32
    replicas = [
        [np.float32([1, 2, 2]), i32([0, 1]), i32([1, 2]), np.float32([0, 0, 0, 0]), i32([0, 0]),
         i32([1, 1])],
        [np.float32([3, 4, 0]), i32([0, 1]), i32([1, 1]), np.float32([0, 0, 0, 0]), i32([1, 2]),
         i32([2, 1])],
    ]
    out = run(replicas)
    np.testing.assert_array_equal(out[0], [1, 3, 0, 0])  # the seed's results
    np.testing.assert_array_equal(out[1], [2, 2, 4, 0])
    for got, want in zip(out, emulate(replicas, [[0, 1]])):
        np.testing.assert_array_equal(got, want)


def _random_case(n: int, groups: list[list[int]], updates: int | None, dtype, index_dtype,
                 seed: int, rows_in: int = 6, rows_out: int = 9, row=(2, 3)):
    """Each member j of a group gets disjoint slices of every receiver's output: receiver t
    splits its rows among the senders' updates, some rows left untouched."""
    rng = np.random.default_rng(seed)
    g = len(groups[0])
    u_count = updates or 1
    plan = {}  # (sender, target position, update) -> (in_off, size, out_off)
    for group in groups:
        for t_pos in range(len(group)):
            cursor = int(rng.integers(0, 2))  # rows before the first write stay output's
            for s in group:
                for u in range(u_count):
                    size = int(rng.integers(0, 3))
                    size = min(size, rows_out - cursor)
                    start = int(rng.integers(0, rows_in - size + 1))
                    plan[(s, t_pos, u)] = (start, size, cursor)
                    cursor += size + int(rng.integers(0, 2))
                    cursor = min(cursor, rows_out)
    per_replica = []
    for r in range(n):
        group = next(gr for gr in groups if r in gr)
        arrays = {k: np.zeros((g, u_count), np.int64) for k in ("in", "size", "out", "recv")}
        for t_pos in range(g):
            for u in range(u_count):
                arrays["in"][t_pos, u], arrays["size"][t_pos, u], arrays["out"][t_pos, u] = \
                    plan[(r, t_pos, u)]
                # recv_sizes[j][u]: what member j sends me in its update u.
                arrays["recv"][t_pos, u] = plan[(group[t_pos], group.index(r), u)][1]
        shape = (g,) if updates is None else (g, u_count)
        meta = {k: v.reshape(shape).astype(index_dtype) for k, v in arrays.items()}
        data = (rng.integers(-100, 100, (rows_in, *row)) if np.dtype(dtype).kind in "iu"
                else rng.standard_normal((rows_in, *row))).astype(dtype)
        output = np.full((rows_out, *row), 7, dtype)  # rows nobody writes keep these
        per_replica.append([data, meta["in"], meta["size"], output, meta["out"], meta["recv"]])
    return per_replica


@pytest.mark.parametrize("n, groups", [(1, None), (2, None), (4, None), (4, [[0, 2], [1, 3]]),
                                       (4, [[3, 1, 0, 2]])])
@pytest.mark.parametrize("updates", [None, 2])
def test_against_the_emulation(n, groups, updates):
    resolved = groups or [list(range(n))]
    per_replica = _random_case(n, resolved, updates, np.float32, np.int32, seed=n + (updates or 0))
    out = run(per_replica, groups, n)
    want = emulate(per_replica, resolved)
    for got, w, args in zip(out, want, per_replica):
        assert got.shape == args[3].shape and got.dtype == np.float32
        np.testing.assert_array_equal(got, w)
        assert (got == 7).any()  # some rows kept output's values


@pytest.mark.parametrize("dtype", [np.int8, np.uint64, np.float64, np.complex64, np.bool_])
def test_element_types_and_s64_offsets(dtype):
    per_replica = _random_case(2, [[0, 1]], 3, dtype, np.int64, seed=11, row=(3,))
    out = run(per_replica)
    for got, want in zip(out, emulate(per_replica, [[0, 1]])):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)


def test_channel_id_and_hlo_text():
    per_replica = _random_case(2, [[0, 1]], None, np.float32, np.int32, seed=5)
    comp = build(per_replica[0], [[0, 1]], channel_id=3)
    hlo = comp.as_hlo_text()
    assert "ragged-all-to-all(" in hlo and "channel_id=3" in hlo and "replica_groups={{0,1}}" in hlo
    # XLA's operand order: input, output, then the offsets and sizes.
    args = hlo[hlo.index("ragged-all-to-all("):].split(")")[0]
    assert args.index("f32[6,2,3]") < args.index("f32[9,2,3]") < args.index("s32[2]")
    exe = xm.compile(comp, num_replicas=2)
    assert "xlamlir.collective.ragged_all_to_all" in exe.stages["linalg"]
    for got, want in zip(exe.execute_replicated(per_replica), emulate(per_replica, [[0, 1]])):
        np.testing.assert_array_equal(got, want)


def _seed_replicas():
    i32 = np.int32
    return [
        [np.float32([1, 2, 2]), i32([0, 1]), i32([1, 2]), np.float32([0, 0, 0, 0]), i32([0, 0]),
         i32([1, 1])],
        [np.float32([3, 4, 0]), i32([0, 1]), i32([1, 1]), np.float32([0, 0, 0, 0]), i32([1, 2]),
         i32([2, 1])],
    ]


@pytest.mark.parametrize("replica, index, value, message", [
    (0, 2, [1, 3], "select rows outside the input's 3 rows"),          # send_sizes too large
    (0, 1, [0, -1], "select rows outside the input's 3 rows"),         # negative input offset
    (1, 4, [1, 4], "select rows outside the output's 4 rows"),         # writes past the output
    (0, 5, [1, 2], r"expects recv_sizes\[1\] = 2 rows from replica 1, which sends 1"),
])
def test_bad_offsets_and_sizes_raise_a_clear_error(replica, index, value, message):
    replicas = _seed_replicas()
    replicas[replica][index] = np.int32(value)
    with pytest.raises(CollectiveError, match=message):
        run(replicas, timeout=30)


def test_offsets_rows_must_match_the_group_size():
    # Empty groups: every replica; 2 offset rows for 4 replicas is refused at compile time.
    with pytest.raises(xm.CompileError, match="2 rows, one per replica of the group, but the "
                                              "group has 4"):
        xm.compile(build(_seed_replicas()[0]), num_replicas=4)


def _errors():
    f32 = xm.Shape.array(xm.F32, (4, 2))
    off = xm.Shape.array(xm.S32, (2,))

    def op(b, input_=f32, output=f32, offs=(off, off, off, off), **kw):
        ps = [b.parameter(i, s) for i, s in enumerate([input_, offs[0], offs[1], output,
                                                       offs[2], offs[3]])]
        return b.ragged_all_to_all(*ps, **kw)

    s64 = xm.Shape.array(xm.S64, (2,))
    return [
        (lambda b: op(b, output=xm.Shape.array(xm.F32, (4,))), "same rank"),
        (lambda b: op(b, input_=xm.Shape.array(xm.F32, ())), "same rank, at least 1"),
        (lambda b: op(b, output=xm.Shape.array(xm.F64, (4, 2))), "one element type"),
        (lambda b: op(b, output=xm.Shape.array(xm.F32, (4, 3))), "rows must have one shape"),
        (lambda b: op(b, offs=(off, off, off, xm.Shape.array(xm.S32, (2, 1, 1)))), "rank 1"),
        (lambda b: op(b, offs=(off, off, off, xm.Shape.array(xm.F32, (2,)))), "s32 or s64"),
        (lambda b: op(b, offs=(off, s64, off, off)), "must all have one shape"),
        (lambda b: op(b, offs=(off, off, xm.Shape.array(xm.S32, (3,)), off)), "one shape"),
        (lambda b: op(b, replica_groups=[[0, 1, 2]]), "2 rows for groups of 3"),
        (lambda b: op(b, replica_groups=[[0, 0]]), "appears twice"),
        (lambda b: op(b, channel_id=0), "channel_id"),
        (lambda b: b.ragged_all_to_all(*[b.tuple([])] * 6), "arrays"),
    ]


@pytest.mark.parametrize("make, message", _errors())
def test_shape_errors(make, message):
    with pytest.raises(xm.ShapeError, match=message):
        make(xm.XlaBuilder("bad"))


def test_group_ids_are_checked_against_the_replica_count():
    comp = build(_seed_replicas()[0], [[0, 5]])
    with pytest.raises(xm.ShapeError, match="names replica 5"):
        xm.compile(comp, num_replicas=2)


def test_mpi_ranks_run_it_with_the_same_communicator_calls():
    """4 MPI ranks (tests/mpi_collectives.py ragged): the exchanges move same-shape arrays only,
    which is what MpiCommunicator can carry."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("mpi4py", reason="the mpi extra is not installed")
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent))
    if mpiexec is None:
        pytest.skip("no mpiexec beside the interpreter")
    flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([mpiexec, *flags, "-n", "4", sys.executable, "tests/mpi_collectives.py",
                           "ragged"], cwd=root, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MPI RAGGED OK 2 checks" in proc.stdout


def test_reference_interpreter_on_one_replica():
    import reference

    i32 = np.int32
    args = [np.float32([[1, 2], [3, 4], [5, 6]]), i32([[0, 2]]), i32([[2, 1]]),
            np.full((5, 2), -1, np.float32), i32([[3, 0]]), i32([[2, 1]])]
    comp = build(args)
    want = np.float32([[5, 6], [-1, -1], [-1, -1], [1, 2], [3, 4]])
    np.testing.assert_array_equal(reference.evaluate(comp, args), want)
    np.testing.assert_array_equal(xm.compile(comp)(*args), want)
