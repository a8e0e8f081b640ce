"""Replicas and collectives, in one process: execute_replicated against numpy references.

Each collective runs with 1, 2 and 4 replicas, with and without replica groups, on
several element types; the seeds' worked examples are checked as given. The
references fold each group's values in group order, as the compiled code does.
"""

from __future__ import annotations

import functools
import threading
import time

import ml_dtypes
import numpy as np
import pytest

import xlamlir as xm
from xlamlir.runtime.replicas import CollectiveError

F32 = xm.Shape.array(xm.F32, (2,))


def _groups_or_all(groups: list[list[int]] | None, n: int) -> list[list[int]]:
    return groups if groups else [list(range(n))]


def _group_of(groups: list[list[int]], r: int) -> tuple[list[int], int] | None:
    for g in groups:
        if r in g:
            return g, g.index(r)
    return None


def run(comp: xm.XlaComputation, n: int, per_replica: list[list[np.ndarray]], **kw) -> list:
    exe = xm.compile(comp, num_replicas=n)
    return exe.execute_replicated(per_replica, **kw)


def data(dtype: np.dtype, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def shape_of(x: np.ndarray) -> xm.Shape:
    return xm.Shape.array(xm.type_of(x.dtype), x.shape)


# -- seeds' worked examples --------------------------------------------------------------------

def test_all_reduce_seed_example():
    b = xm.XlaBuilder("all_reduce")
    x = b.parameter(0, F32)
    comp = b.build(b.all_reduce(x, lambda a, c: a + c))
    out = run(comp, 2, [[np.array([1.0, 2.5], np.float32)], [np.array([3.0, 5.25], np.float32)]])
    for o in out:
        np.testing.assert_array_equal(o, [4.0, 7.75])


def test_cross_replica_sum_seed_003_example():
    b = xm.XlaBuilder("crs")
    x = b.parameter(0, F32)
    comp = b.build(b.cross_replica_sum(x))
    out = run(comp, 2, [[np.array([1.0, 2.5], np.float32)], [np.array([3.0, 5.1], np.float32)]])
    for o in out:
        np.testing.assert_allclose(o, np.float32([1.0, 2.5]) + np.float32([3.0, 5.1]))


def test_all_gather_seed_example():
    b = xm.XlaBuilder("all_gather")
    x = b.parameter(0, F32)
    comp = b.build(b.all_gather(x, 0, 2))
    out = run(comp, 2, [[np.array([1.0, 2.5], np.float32)], [np.array([3.0, 5.25], np.float32)]])
    for o in out:
        np.testing.assert_array_equal(o, [1.0, 2.5, 3.0, 5.25])


def test_reduce_scatter_seed_example():
    b = xm.XlaBuilder("reduce_scatter")
    x = b.parameter(0, F32)
    comp = b.build(b.reduce_scatter(x, lambda a, c: a + c, 0, 2))
    out = run(comp, 2, [[np.array([1.0, 2.25], np.float32)], [np.array([3.0, 5.25], np.float32)]])
    np.testing.assert_array_equal(out[0], [4.0])
    np.testing.assert_array_equal(out[1], [7.5])


def test_all_to_all_seed_example():
    b = xm.XlaBuilder("alltoall")
    x = b.parameter(0, xm.Shape.array(xm.F32, (4, 16)))
    comp = b.build(b.all_to_all(x, 1, 0, 4))
    assert comp.program_shape()[1] == xm.Shape.array(xm.F32, (16, 4))
    xs = [data(np.float32, (4, 16), r) for r in range(4)]
    out = run(comp, 4, [[x] for x in xs])
    for r in range(4):
        np.testing.assert_array_equal(out[r], np.concatenate([xs[q][:, 4 * r:4 * r + 4] for q in range(4)]))


def test_all_to_all_groups_concatenate_in_group_order():
    """Seed: replica_groups {{1,2,3},{4,5,0}}: blocks concatenated in the order 1,2,3 / 4,5,0."""
    groups = [[1, 2, 3], [4, 5, 0]]
    b = xm.XlaBuilder("alltoall_groups")
    x = b.parameter(0, xm.Shape.array(xm.S32, (3, 2)))
    comp = b.build(b.all_to_all(x, 0, 1, 3, groups))
    xs = [np.arange(6, dtype=np.int32).reshape(3, 2) + 100 * r for r in range(6)]
    out = run(comp, 6, [[x] for x in xs])
    for r in range(6):
        group, pos = _group_of(groups, r)
        np.testing.assert_array_equal(out[r], np.concatenate([xs[q][pos:pos + 1] for q in group], axis=1))


# -- every collective against its reference, 1/2/4 replicas, with groups -------------------------

CASES = [(1, None), (2, None), (2, [[1, 0]]), (4, None), (4, [[0, 2], [1, 3]]), (4, [[3, 2, 1, 0]]),
         (4, [[0], [1], [2], [3]])]


def _fold(fn, values):
    return functools.reduce(fn, values)


@pytest.mark.parametrize("n,groups", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float64, np.complex64,
                                   ml_dtypes.bfloat16, np.bool_])
def test_all_reduce_sum(n, groups, dtype):
    b = xm.XlaBuilder("ar")
    shape = (3, 5)
    x = b.parameter(0, xm.Shape.array(xm.type_of(np.dtype(dtype)), shape))
    comp = b.build(b.cross_replica_sum(x, groups))
    xs = [data(dtype, shape, r) for r in range(n)]
    out = run(comp, n, [[x] for x in xs])
    for r in range(n):
        group, _ = _group_of(_groups_or_all(groups, n), r)
        if np.dtype(dtype) == np.bool_:
            expected = _fold(np.logical_or, [xs[q] for q in group])
        else:
            expected = _fold(lambda a, c: (a + c).astype(a.dtype), [xs[q] for q in group])
        assert out[r].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out[r], expected)


@pytest.mark.parametrize("n,groups", [(2, None), (4, [[0, 2], [1, 3]])])
@pytest.mark.parametrize("op,ref", [("max", np.fmax), ("min", np.fmin), ("mul", np.multiply)])
def test_all_reduce_other_computations(n, groups, op, ref):
    b = xm.XlaBuilder("ar_" + op)
    x = b.parameter(0, xm.Shape.array(xm.F32, (6,)))
    fn = {"max": lambda a, c: a.builder.max(a, c), "min": lambda a, c: a.builder.min(a, c),
          "mul": lambda a, c: a * c}[op]
    comp = b.build(b.all_reduce(x, fn, groups))
    xs = [data(np.float32, (6,), r) for r in range(n)]
    out = run(comp, n, [[x] for x in xs])
    for r in range(n):
        group, _ = _group_of(_groups_or_all(groups, n), r)
        np.testing.assert_allclose(out[r], _fold(ref, [xs[q] for q in group]), rtol=1e-6)


def test_all_reduce_nan_and_integer_wraparound():
    b = xm.XlaBuilder("ar_edges")
    x = b.parameter(0, xm.Shape.array(xm.F32, (3,)))
    i = b.parameter(1, xm.Shape.array(xm.S32, (2,)))
    comp = b.build(b.tuple([b.cross_replica_sum(x), b.cross_replica_sum(i)]))
    big = np.iinfo(np.int32).max
    out = run(comp, 2, [[np.float32([np.nan, np.inf, -0.0]), np.int32([big, -5])],
                        [np.float32([1.0, np.inf, -0.0]), np.int32([1, 5])]])
    for f, s in out:
        assert np.isnan(f[0]) and f[1] == np.inf
        assert f[2] == 0 and np.signbit(f[2])  # -0.0 + -0.0 stays -0.0
        np.testing.assert_array_equal(s, [np.iinfo(np.int32).min, 0])


def test_all_reduce_tuple_with_a_binary_computation_reduces_each_element():
    """XLA's form: a binary computation applied to each array of the tuple on its own."""
    b = xm.XlaBuilder("ar_binary")
    x = b.parameter(0, xm.Shape.array(xm.F32, (4,)))
    y = b.parameter(1, xm.Shape.array(xm.F32, (2, 3)))
    i = b.parameter(2, xm.Shape.array(xm.S32, (3,)))
    t = b.all_reduce(b.tuple([x, y]), lambda a, c: a.builder.max(a, c))
    s = b.cross_replica_sum([x, i])  # mixed types: summed each on its own
    comp = b.build(b.tuple([t, s]))
    xs = [data(np.float32, (4,), r) for r in range(2)]
    ys = [data(np.float32, (2, 3), 5 + r) for r in range(2)]
    is_ = [data(np.int32, (3,), 9 + r) for r in range(2)]
    out = run(comp, 2, [[xs[r], ys[r], is_[r]] for r in range(2)])
    for (mx, my), (sx, si) in out:
        np.testing.assert_array_equal(mx, np.maximum(*xs))
        np.testing.assert_array_equal(my, np.maximum(*ys))
        np.testing.assert_array_equal(sx, xs[0] + xs[1])
        np.testing.assert_array_equal(si, is_[0] + is_[1])
    with pytest.raises(xm.ShapeError, match="accumulator 0 is f32"):
        b.all_reduce(b.tuple([x, i]), lambda a, c: a + c)  # binary: one element type


def test_all_reduce_tuple_operand_and_list():
    """A tuple operand reduces element-wise with a variadic computation (acc..., x...)."""
    b = xm.XlaBuilder("ar_tuple")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 2)))
    i = b.parameter(1, xm.Shape.array(xm.S32, (2, 2)))

    def argmax_like(acc_x, acc_i, x_, i_):
        return [acc_x.builder.max(acc_x, x_), acc_i + i_]

    t = b.all_reduce(b.tuple([x, i]), argmax_like)
    lst = b.all_reduce([x, i], argmax_like)
    comp = b.build(b.tuple([t, lst]))
    xs = [data(np.float32, (2, 2), r) for r in range(4)]
    is_ = [data(np.int32, (2, 2), 10 + r) for r in range(4)]
    out = run(comp, 4, [[xs[r], is_[r]] for r in range(4)])
    for r in range(4):
        for fx, fi in out[r]:
            np.testing.assert_array_equal(fx, np.max(xs, axis=0))
            np.testing.assert_array_equal(fi, np.sum(is_, axis=0))


@pytest.mark.parametrize("n,groups", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.complex128, np.bool_])
def test_all_gather(n, groups, dtype):
    size = len(_groups_or_all(groups, n)[0])
    b = xm.XlaBuilder("ag")
    x = b.parameter(0, xm.Shape.array(xm.type_of(np.dtype(dtype)), (2, 3)))
    comp = b.build(b.all_gather(x, 1, size, groups))
    xs = [data(dtype, (2, 3), r) for r in range(n)]
    out = run(comp, n, [[x] for x in xs])
    for r in range(n):
        group, _ = _group_of(_groups_or_all(groups, n), r)
        np.testing.assert_array_equal(out[r], np.concatenate([xs[q] for q in group], axis=1))


@pytest.mark.parametrize("n,groups", CASES)
def test_reduce_scatter(n, groups):
    size = len(_groups_or_all(groups, n)[0])
    b = xm.XlaBuilder("rs")
    x = b.parameter(0, xm.Shape.array(xm.S32, (3, 4 * size)))
    comp = b.build(b.reduce_scatter(x, lambda a, c: a + c, 1, size, groups))
    xs = [data(np.int32, (3, 4 * size), r) for r in range(n)]
    out = run(comp, n, [[x] for x in xs])
    for r in range(n):
        group, pos = _group_of(_groups_or_all(groups, n), r)
        total = np.sum([xs[q] for q in group], axis=0).astype(np.int32)
        np.testing.assert_array_equal(out[r], total[:, 4 * pos:4 * pos + 4])


def test_reduce_scatter_tuple():
    b = xm.XlaBuilder("rs_tuple")
    x = b.parameter(0, xm.Shape.array(xm.F32, (4,)))
    y = b.parameter(1, xm.Shape.array(xm.F64, (4,)))
    comp = b.build(b.reduce_scatter(b.tuple([x, y]), lambda a, c, d, e: [a + d, c * e], 0, 2))
    xs = [np.float32([1, 2, 3, 4]) * (r + 1) for r in range(2)]
    ys = [np.float64([1, 2, 3, 4]) + r for r in range(2)]
    out = run(comp, 2, [[xs[r], ys[r]] for r in range(2)])
    for r in range(2):
        np.testing.assert_array_equal(out[r][0], (xs[0] + xs[1])[2 * r:2 * r + 2])
        np.testing.assert_array_equal(out[r][1], (ys[0] * ys[1])[2 * r:2 * r + 2])


@pytest.mark.parametrize("n,groups", CASES)
def test_all_to_all(n, groups):
    size = len(_groups_or_all(groups, n)[0])
    b = xm.XlaBuilder("a2a")
    x = b.parameter(0, xm.Shape.array(xm.U16, (2 * size, 3)))
    comp = b.build(b.all_to_all(x, 0, 1, size, groups))
    xs = [data(np.uint16, (2 * size, 3), r) for r in range(n)]
    out = run(comp, n, [[x] for x in xs])
    for r in range(n):
        group, pos = _group_of(_groups_or_all(groups, n), r)
        np.testing.assert_array_equal(
            out[r], np.concatenate([xs[q][2 * pos:2 * pos + 2] for q in group], axis=1))


@pytest.mark.parametrize("n,pairs", [(1, [(0, 0)]), (1, []), (2, [(0, 1), (1, 0)]), (2, [(0, 1)]),
                                     (4, [(0, 1), (1, 2), (2, 3), (3, 0)]), (4, [(3, 0), (0, 2)])])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, ml_dtypes.bfloat16])
def test_collective_permute(n, pairs, dtype):
    b = xm.XlaBuilder("permute")
    x = b.parameter(0, xm.Shape.array(xm.type_of(np.dtype(dtype)), (5,)))
    comp = b.build(b.collective_permute(x, pairs))
    xs = [data(dtype, (5,), r) + 1 for r in range(n)]
    out = run(comp, n, [[x] for x in xs])
    for r in range(n):
        sources = [s for s, t in pairs if t == r]
        expected = xs[sources[0]] if sources else np.zeros(5, dtype)  # no source: zeros
        np.testing.assert_array_equal(out[r], expected)


@pytest.mark.parametrize("n,groups", [(1, None), (2, None), (4, [[2, 0], [3, 1]]), (4, [[1, 3]])])
def test_collective_broadcast(n, groups):
    b = xm.XlaBuilder("bcast")
    x = b.parameter(0, xm.Shape.array(xm.F64, (2, 2)))
    comp = b.build(b.collective_broadcast(x, groups))
    xs = [data(np.float64, (2, 2), r) for r in range(n)]
    out = run(comp, n, [[x] for x in xs])
    for r in range(n):
        mine = _group_of(_groups_or_all(groups, n), r)
        expected = xs[mine[0][0]] if mine else np.zeros((2, 2))  # outside every group: zeros
        np.testing.assert_array_equal(out[r], expected)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_replica_id_and_partition_id(n):
    b = xm.XlaBuilder("ids")
    comp = b.build(b.tuple([b.replica_id(), b.partition_id()]))
    out = run(comp, n, [[] for _ in range(n)])
    for r, (rid, pid) in enumerate(out):
        assert rid.dtype == np.uint32 and rid == r
        assert pid.dtype == np.uint32 and pid == 0


def test_zero_size_operands():
    b = xm.XlaBuilder("empty")
    x = b.parameter(0, xm.Shape.array(xm.F32, (0, 3)))
    comp = b.build(b.tuple([b.cross_replica_sum(x), b.all_gather(x, 1, 2),
                            b.collective_permute(x, [(0, 1)])]))
    out = run(comp, 2, [[np.zeros((0, 3), np.float32)]] * 2)
    for s, g, p in out:
        assert s.shape == (0, 3) and g.shape == (0, 6) and p.shape == (0, 3)


def test_single_replica_program_runs_without_execute_replicated():
    b = xm.XlaBuilder("one")
    x = b.parameter(0, F32)
    comp = b.build(b.tuple([b.cross_replica_sum(x), b.replica_id(), b.all_gather(x, 0, 1),
                            b.collective_permute(x, [(0, 0)])]))
    s, rid, g, p = xm.compile(comp)(np.float32([1, 2]))
    np.testing.assert_array_equal(s, [1, 2])
    assert rid == 0
    np.testing.assert_array_equal(g, [1, 2])
    np.testing.assert_array_equal(p, [1, 2])


# -- collectives in control flow: the k-th execution meets the k-th -----------------------------

def test_all_reduce_in_a_while_loop_with_replica_dependent_data():
    b = xm.XlaBuilder("loop")
    x = b.parameter(0, xm.Shape.array(xm.F32, (3,)))
    i0 = b.constant(np.int32(0))

    def cond(state):
        return state.builder.lt(state.builder.get_tuple_element(state, 0),
                                state.builder.constant(np.int32(5)))

    def body(state):
        sb = state.builder
        i, v = sb.get_tuple_element(state, 0), sb.get_tuple_element(state, 1)
        return sb.tuple([i + np.int32(1), sb.cross_replica_sum(v) * np.float32(0.5)])

    out = b.get_tuple_element(b.while_(cond, body, b.tuple([i0, x])), 1)
    comp = b.build(out)
    xs = [np.float32([1, 2, 3]) * (r + 1) for r in range(4)]
    got = run(comp, 4, [[x] for x in xs])
    values = xs
    for _ in range(5):
        total = functools.reduce(lambda a, c: a + c, values)
        values = [total * np.float32(0.5)] * 4
    expected = values[0]
    for g in got:
        np.testing.assert_allclose(g, expected, rtol=1e-6)


def test_channel_id_matches_collectives_in_different_branches():
    """Two call sites with one channel id meet, as XLA's channel ids make them."""
    b = xm.XlaBuilder("branches")
    x = b.parameter(0, F32)
    even = b.eq(b.rem(b.replica_id(), b.constant(np.uint32(2))), b.constant(np.uint32(0)))

    def branch(scale):
        def fn(v):
            return v.builder.all_reduce(v * np.float32(scale), lambda a, c: a + c, channel_id=3)
        return fn

    comp = b.build(b.conditional(even, [branch(1.0), branch(10.0)], [x, x]))
    xs = [np.float32([1, 2]) * (r + 1) for r in range(2)]
    out = run(comp, 2, [[x] for x in xs])
    for o in out:
        np.testing.assert_array_equal(o, xs[0] + 10 * xs[1])


# -- failures: clear errors, no hang ---------------------------------------------------------------

def test_execute_replicated_argument_errors():
    b = xm.XlaBuilder("args")
    x = b.parameter(0, F32)
    exe = xm.compile(b.build(b.cross_replica_sum(x)), num_replicas=2)
    with pytest.raises(xm.ArgumentError, match="expected 2 argument list"):
        exe.execute_replicated([[np.float32([1, 2])]])
    with pytest.raises(xm.ArgumentError, match="replica 1"):
        exe.execute_replicated([[np.float32([1, 2])], [np.float64([1, 2, 3])]])
    with pytest.raises(xm.ArgumentError, match="list of 2"):
        exe.execute_replicated(np.zeros(2))
    with pytest.raises(xm.ArgumentError, match="replica 0"):
        exe.execute_replicated([np.float32([1, 2]), np.float32([1, 2])])


def test_calling_a_replicated_program_directly_is_an_error():
    b = xm.XlaBuilder("direct")
    x = b.parameter(0, F32)
    exe = xm.compile(b.build(b.cross_replica_sum(x)), num_replicas=2)
    with pytest.raises(CollectiveError, match="execute_replicated"):
        exe(np.float32([1, 2]))


def test_mismatched_collectives_fail_every_replica_instead_of_hanging():
    """Replica 0 runs an all_reduce that replica 1 never reaches (a data-dependent branch)."""
    b = xm.XlaBuilder("mismatch")
    x = b.parameter(0, F32)
    is_zero = b.eq(b.replica_id(), b.constant(np.uint32(0)))
    comp = b.build(b.conditional(is_zero, [lambda v: v.builder.cross_replica_sum(v), lambda v: v],
                                 [x, x]))
    exe = xm.compile(comp, num_replicas=2)
    start = time.perf_counter()
    with pytest.raises(CollectiveError, match="never came") as info:
        exe.execute_replicated([[np.float32([1, 2])], [np.float32([3, 4])]], timeout=0.5)
    assert time.perf_counter() - start < 30
    assert "replica 0" in str(info.value)


def test_a_replica_that_raises_stops_the_others():
    calls = threading.Lock()

    def boom(v):
        with calls:
            pass
        raise ValueError("replica-specific failure")

    xm.register_custom_call("test_collectives.boom", boom)
    b = xm.XlaBuilder("raises")
    x = b.parameter(0, F32)
    is_one = b.eq(b.replica_id(), b.constant(np.uint32(1)))
    bad = b.conditional(is_one, [lambda v: v.builder.custom_call("test_collectives.boom", [v], F32),
                                 lambda v: v], [x, x])
    comp = b.build(b.cross_replica_sum(bad))
    exe = xm.compile(comp, num_replicas=2)
    start = time.perf_counter()
    with pytest.raises(xm.CustomCallError, match="replica-specific failure"):
        # A generous timeout: the other replica must be released by the abort, not by it.
        exe.execute_replicated([[np.float32([1, 2])], [np.float32([3, 4])]], timeout=60)
    assert time.perf_counter() - start < 30


@pytest.mark.parametrize("build,message", [
    (lambda b, x: b.all_reduce(x, lambda a, c: a + c, [[0, 1], [1, 2]]), "appears twice"),
    (lambda b, x: b.all_reduce(x, lambda a, c: a + c, [[0, 1], [2]]), "same size"),
    (lambda b, x: b.all_reduce(x, lambda a, c: a + c, [[]]), "empty"),
    (lambda b, x: b.all_reduce(x, lambda a, c: a + c, [[0, -1]]), "non-negative"),
    (lambda b, x: b.all_reduce(x, lambda a: a), "2 parameters"),
    (lambda b, x: b.all_reduce(x, lambda a, c: a.builder.convert_element_type(a + c, xm.F64)),
     "differs"),
    (lambda b, x: b.all_reduce(x, lambda a, c: a + c, channel_id=0), "channel_id"),
    (lambda b, x: b.all_gather(x, 1, 2), "out of range"),
    (lambda b, x: b.all_gather(x, 0, 0), "shard_count"),
    (lambda b, x: b.all_gather(x, 0, 2, [[0, 1, 2]]), "shard_count = 2"),
    (lambda b, x: b.all_to_all(x, 0, 0, 3), "divisible"),
    (lambda b, x: b.all_to_all(x, 0, 1, 2), "concat_dimension 1 is out of range"),
    (lambda b, x: b.reduce_scatter(x, lambda a, c: a + c, 0, 4), "divisible"),
    (lambda b, x: b.collective_permute(x, [(0, 1), (1, 1)]), "target of two pairs"),
    (lambda b, x: b.collective_permute(x, [(0, 1), (0, 2)]), "source of two pairs"),
    (lambda b, x: b.collective_permute(x, [(0,)]), "pairs"),
    (lambda b, x: b.collective_broadcast(x, "0,1"), "list of lists"),
    (lambda b, x: b.all_reduce(b.tuple([x, b.tuple([x])]), lambda *a: a[:2]), "arrays"),
    (lambda b, x: b.all_reduce([x, b.reshape(x, (1, 2))], lambda a, c, d, e: [a + d, c + e]),
     "same dimensions"),
])
def test_shape_errors(build, message):
    b = xm.XlaBuilder("bad")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2,)))
    with pytest.raises(xm.ShapeError, match=message):
        build(b, x)


@pytest.mark.parametrize("build,n,message", [
    (lambda b, x: b.cross_replica_sum(x, [[0, 1], [2, 3]]), 2, "names replica 2"),
    (lambda b, x: b.cross_replica_sum(x, [[0, 1]]), 4, "every one of the 4"),
    (lambda b, x: b.all_gather(x, 0, 2), 4, "must be the number of replicas"),
    (lambda b, x: b.collective_permute(x, [(0, 5)]), 2, "names replica 5"),
])
def test_group_errors_against_the_replica_count(build, n, message):
    b = xm.XlaBuilder("bad_groups")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2,)))
    comp = b.build(build(b, x))
    with pytest.raises(xm.ShapeError, match=message):
        xm.compile(comp, num_replicas=n)


def test_hlo_stage_shows_the_collective_and_its_groups():
    b = xm.XlaBuilder("ir")
    x = b.parameter(0, xm.Shape.array(xm.F32, (4,)))
    comp = b.build(b.reduce_scatter(x, lambda a, c: a + c, 0, 2, [[0, 2], [1, 3]]))
    text = comp.as_mlir_text()
    assert '"xhlo.reduce_scatter"' in text and 'replica_groups = "{{0,2},{1,3}}"' in text
    exe = xm.compile(comp, num_replicas=4)
    assert "xlamlir.collective.scatter_blocks" in exe.stages["linalg"]
    assert "linalg.reduce" in exe.stages["linalg"]
    # The module text round-trips through compile_mlir.
    again = xm.compile_mlir(text, num_replicas=4)
    out = again.execute_replicated([[np.float32([1, 2, 3, 4]) * r] for r in range(4)])
    np.testing.assert_array_equal(out[2], (np.float32([1, 2, 3, 4]) * 2)[2:])


def test_send_and_recv_pass_values_between_replicas():
    """Channels are process-wide: replica 0's send reaches replica 1's recv."""
    b = xm.XlaBuilder("send_recv")
    x = b.parameter(0, xm.Shape.array(xm.F32, (3,)))
    is_zero = b.eq(b.replica_id(), b.constant(np.uint32(0)))

    def sender(v):
        v.builder.send(v, "test_collectives.replica_channel")
        return v

    def receiver(v):
        return v.builder.recv(xm.Shape.array(xm.F32, (3,)), "test_collectives.replica_channel")

    exe = xm.compile(b.build(b.conditional(is_zero, [sender, receiver], [x, x])), num_replicas=2)
    out = exe.execute_replicated([[np.float32([1, 2, 3])], [np.float32([0, 0, 0])]])
    for o in out:
        np.testing.assert_array_equal(o, [1, 2, 3])
