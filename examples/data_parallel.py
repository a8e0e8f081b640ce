"""Data-parallel linear regression: each replica holds a shard of the data, and the
gradients are summed across replicas (`cross_replica_sum`) at every step of a
`while_` loop that runs inside the compiled program.

In one process (4 replicas on 4 threads):
    .venv/bin/python examples/data_parallel.py
Across processes, one replica per MPI rank (Open MPI as root needs the two flags):
    .venv/bin/mpiexec --allow-run-as-root --oversubscribe -n 4 .venv/bin/python examples/data_parallel.py

Either way the weights equal those of one replica trained on the whole data set.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import xlamlir as xm

FEATURES, SAMPLES, STEPS, LEARNING_RATE = 8, 1024, 20, 0.05


def training_program(shard: int, total: int) -> xm.XlaComputation:
    """`STEPS` steps of gradient descent on the mean squared error of `total` samples, of
    which this replica holds `shard`."""
    b = xm.XlaBuilder("linear_regression")
    w0 = b.parameter(0, xm.Shape.array(xm.F32, (FEATURES,)), "w")
    x = b.parameter(1, xm.Shape.array(xm.F32, (shard, FEATURES)), "x")
    y = b.parameter(2, xm.Shape.array(xm.F32, (shard,)), "y")

    def cond(state: xm.XlaOp) -> xm.XlaOp:
        sb = state.builder
        return sb.lt(sb.get_tuple_element(state, 0), sb.constant(np.int32(STEPS)))

    def body(state: xm.XlaOp) -> xm.XlaOp:
        sb = state.builder
        step, w = sb.get_tuple_element(state, 0), sb.get_tuple_element(state, 1)
        xs, ys = sb.get_tuple_element(state, 2), sb.get_tuple_element(state, 3)
        residual = sb.sub(sb.dot(xs, w), ys)                     # f32[shard]
        local = sb.dot(sb.transpose(xs, (1, 0)), residual)      # f32[FEATURES]
        gradient = sb.cross_replica_sum(local)                  # summed over every replica
        scale = sb.constant(np.float32(2 * LEARNING_RATE / total))
        return sb.tuple([sb.add(step, sb.constant(np.int32(1))), sb.sub(w, sb.mul(scale, gradient)),
                         xs, ys])

    state = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), w0, x, y]))
    return b.build(b.get_tuple_element(state, 1))


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32)
    true_w = np.linspace(-1, 1, FEATURES, dtype=np.float32)
    y = (x @ true_w + 0.01 * rng.standard_normal(SAMPLES)).astype(np.float32)
    return x, y


def single_replica_weights(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    exe = xm.compile(training_program(SAMPLES, SAMPLES))
    return exe(np.zeros(FEATURES, np.float32), x, y)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=4, help="in-process replicas")
    options = parser.parse_args()
    x, y = data()
    expected = single_replica_weights(x, y)
    w0 = np.zeros(FEATURES, np.float32)
    if xm.distributed.under_mpiexec():
        context = xm.distributed.initialize()
        n, rank = context.num_replicas, context.replica_id
        shard = SAMPLES // n
        exe = xm.compile(training_program(shard, SAMPLES), num_replicas=n)
        mine = slice(rank * shard, (rank + 1) * shard)
        weights = [exe(w0, x[mine], y[mine])]
        where = f"MPI rank {rank} of {n}"
    else:
        n = options.replicas
        shard = SAMPLES // n
        exe = xm.compile(training_program(shard, SAMPLES), num_replicas=n)
        weights = exe.execute_replicated(
            [[w0, x[r * shard:(r + 1) * shard], y[r * shard:(r + 1) * shard]] for r in range(n)])
        rank, where = 0, f"{n} replicas on threads"
    for w in weights:
        np.testing.assert_allclose(w, expected, rtol=1e-5, atol=1e-6)
    if rank == 0:
        print(f"{where}: weights after {STEPS} steps {np.round(weights[0], 4)}")
        print(f"single replica on all {SAMPLES} samples gives the same weights "
              f"(max difference {np.max(np.abs(weights[0] - expected)):.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
