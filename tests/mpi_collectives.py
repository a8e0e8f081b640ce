"""Run under `mpiexec -n 4` by tests/test_mpi.py: every collective across MPI ranks.

Each rank is one replica; every rank checks its own results against numpy and
rank 0 prints "MPI OK <n> checks" when all ranks passed.
"""

from __future__ import annotations

import sys

import numpy as np

import xlamlir as xm


def mismatch() -> int:
    """Rank 0 runs an all_reduce no other rank reaches: it must fail, not hang."""
    context = xm.distributed.initialize(timeout=2)
    b = xm.XlaBuilder("mismatch")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2,)))
    is_zero = b.eq(b.replica_id(), b.constant(np.uint32(0)))
    comp = b.build(b.conditional(is_zero, [lambda v: v.builder.cross_replica_sum(v), lambda v: v],
                                 [x, x]))
    exe = xm.compile(comp, num_replicas=context.num_replicas)
    try:
        exe(np.float32([1, 2]))
    except xm.CollectiveError as e:
        print(f"rank {context.replica_id}: MPI TIMEOUT OK: {e}", flush=True)
        return 3
    return 0


def ragged() -> int:
    """ragged_all_to_all on 4 ranks (one group of all, then groups {0,2},{1,3} with two updates
    per member): rank q sends to member j rows [j, j + 1 + (q + j) % 2) of its input, written at
    row 2 * (its position) + 1 of j's output; rows nobody writes keep output's -1."""
    context = xm.distributed.initialize()
    n, r = context.num_replicas, context.replica_id
    checks = 0
    for groups, updates in ((None, None), ([[0, 2], [1, 3]], 2)):
        resolved = groups or [list(range(n))]
        g = len(resolved[0])
        shape = (g,) if updates is None else (g, updates)

        def args(q: int) -> list[np.ndarray]:
            group = next(gr for gr in resolved if q in gr)
            me = group.index(q)
            sizes = np.array([[1 + (q + j + u) % 2 for u in range(updates or 1)] for j in range(g)])
            starts = np.array([[j for _ in range(updates or 1)] for j in range(g)])
            out_at = np.array([[2 * me + 4 * g * u + 1 for u in range(updates or 1)]
                               for j in range(g)])
            recv = np.array([[1 + (group[j] + me + u) % 2 for u in range(updates or 1)]
                             for j in range(g)])
            data = np.arange(6 * 2, dtype=np.float32).reshape(6, 2) + 100 * q
            output = np.full((8 * g + 2, 2), -1, np.float32)
            return [data, starts.reshape(shape).astype(np.int32), sizes.reshape(shape).astype(np.int32),
                    output, out_at.reshape(shape).astype(np.int32), recv.reshape(shape).astype(np.int32)]

        b = xm.XlaBuilder("ragged")
        ps = [b.parameter(i, xm.Shape.array(xm.type_of(a.dtype), a.shape))
              for i, a in enumerate(args(r))]
        exe = xm.compile(b.build(b.ragged_all_to_all(*ps, replica_groups=groups)), num_replicas=n)
        got = exe(*args(r))
        want = args(r)[3].copy()
        group = next(gr for gr in resolved if r in gr)
        for q in group:
            data, starts, sizes, _, out_at, _ = (a.reshape(g, -1) for a in args(q))
            me = group.index(r)
            for u in range(updates or 1):
                k, s, o = sizes[me, u], starts[me, u], out_at[me, u]
                want[o:o + k] = data.reshape(6, 2)[s:s + k]
        np.testing.assert_array_equal(got, want, err_msg=f"rank {r}, groups {groups}")
        checks += 1
    if r == 0:
        print(f"MPI RAGGED OK {checks} checks")
    return 0


def main() -> int:
    if sys.argv[1:] == ["mismatch"]:
        return mismatch()
    if sys.argv[1:] == ["ragged"]:
        return ragged()
    context = xm.distributed.initialize()
    n, r = context.num_replicas, context.replica_id
    assert n == 4, f"run with 4 ranks, got {n}"
    xs = [np.arange(8, dtype=np.float32).reshape(2, 4) * (q + 1) + q for q in range(n)]
    ints = [np.arange(4, dtype=np.int64) * 10 + q for q in range(n)]
    groups = [[0, 2], [1, 3]]
    mine = next(g for g in groups if r in g)
    pos = mine.index(r)

    b = xm.XlaBuilder("mpi")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 4)))
    i = b.parameter(1, xm.Shape.array(xm.S64, (4,)))
    results = [
        b.replica_id(),
        b.cross_replica_sum(x),
        b.all_reduce(i, lambda a, c: a.builder.max(a, c), groups),
        b.all_gather(x, 0, 2, groups),
        b.all_to_all(x, 1, 0, 4),
        b.reduce_scatter(x, lambda a, c: a + c, 1, 2, groups),
        b.collective_permute(i, [(0, 1), (1, 2), (2, 3)]),
        b.collective_broadcast(x, [[3, 1]]),
    ]
    exe = xm.compile(b.build(b.tuple(results)), num_replicas=n)
    got = exe(xs[r], ints[r])
    expected = [
        np.uint32(r),
        np.sum(xs, axis=0),
        np.max([ints[q] for q in mine], axis=0),
        np.concatenate([xs[q] for q in mine], axis=0),
        np.concatenate([xs[q][:, r:r + 1] for q in range(n)], axis=0),
        np.sum([xs[q] for q in mine], axis=0)[:, 2 * pos:2 * pos + 2],
        ints[r - 1] if r in (1, 2, 3) else np.zeros(4, np.int64),  # replica 0 receives nothing
        xs[3] if r in (3, 1) else np.zeros((2, 4), np.float32),    # outside every group: zeros
    ]
    for k, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(g, e, err_msg=f"rank {r}, result {k}")
    # Every rank passed its checks: agree on it with one more collective.
    b = xm.XlaBuilder("agree")
    ok = b.parameter(0, xm.Shape.array(xm.S32, ()))
    total = xm.compile(b.build(b.cross_replica_sum(ok)), num_replicas=n)(np.int32(1))
    if r == 0:
        print(f"MPI OK {len(expected)} checks on {int(total)} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
