"""Data-movement and whole-array workloads of issue #17: sort, top_k, scatter-add, gather,
transpose, fft/rfft, cumsum (XLA's reduce_window idiom) and a value with its sum.

Each is a `Case` (bench/harness.py): ours built with the XlaBuilder API, numpy's usual
way of doing the same, and the JAX function a user would write.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from harness import Case, measure
from peers import jax, jax_compile, jnp
from timing import Measurement, Workload, median_time

import xlamlir as xm

F32 = xm.F32


def _params(name: str, *shapes: tuple[Any, tuple[int, ...]]) -> tuple[xm.XlaBuilder, list[Any]]:
    b = xm.XlaBuilder(name)
    return b, [b.parameter(i, xm.Shape.array(t, dims)) for i, (t, dims) in enumerate(shapes)]


def _normal(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _exact(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_array_equal(actual, expected)


def sort(n: int = 1 << 20) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x,) = _params("sort", (F32, (n,)))
        return b.build(b.sort(x))

    return measure(Case(build, lambda: (_normal(0, n),), np.sort, jnp and jnp.sort,
                        work=4 * n, unit="GB/s", repeats=9, check=_exact))


def sort_rows(rows: int = 1024, n: int = 1024) -> Measurement:
    """Every row of a matrix sorted (lowering/ops/sort_network.py: a bitonic network with
    a vector lane per row, the groups of rows on the cores)."""
    def build() -> xm.XlaComputation:
        b, (x,) = _params("sort_rows", (F32, (rows, n)))
        return b.build(b.sort(x))

    return measure(Case(build, lambda: (_normal(10, rows, n),), lambda x: np.sort(x, axis=-1),
                        jnp and (lambda x: jnp.sort(x, axis=-1)), work=4 * rows * n, unit="GB/s",
                        repeats=9, check=_exact))


def numpy_top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest of each row, largest first: argpartition, then sort only those k."""
    part = np.argpartition(-x, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(x, part, 1), axis=1, kind="stable")
    idx = np.take_along_axis(part, order, 1)
    return np.take_along_axis(x, idx, 1), idx.astype(np.int32)


def top_k(rows: int = 1024, cols: int = 4096, k: int = 8) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x,) = _params("top_k", (F32, (rows, cols)))
        return b.build(b.top_k(x, k))

    return measure(Case(build, lambda: (_normal(1, rows, cols),), lambda x: numpy_top_k(x, k),
                        jax and (lambda x: tuple(jax.lax.top_k(x, k))),
                        work=4 * rows * cols, unit="GB/s", repeats=15, check=_exact))


def scatter_add(updates: int = 1 << 20, bins: int = 1 << 16) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (operand, idx, upd) = _params("scatter_add", (F32, (bins,)), (xm.S32, (updates, 1)),
                                         (F32, (updates,)))
        dn = xm.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
        return b.build(b.scatter(operand, idx, upd, lambda a, v: a + v, dn))

    def args() -> tuple[Any, ...]:
        idx = np.random.default_rng(2).integers(0, bins, (updates, 1), dtype=np.int32)
        return np.zeros(bins, np.float32), idx, _normal(3, updates)

    def numpy_fn(operand: Any, idx: Any, upd: Any) -> Any:
        return operand + np.bincount(idx[:, 0], weights=upd, minlength=bins).astype(np.float32)

    def jax_fn(operand: Any, idx: Any, upd: Any) -> Any:
        return operand.at[idx[:, 0]].add(upd)

    # ~16 updates per bin, summed in different orders: f32 rounding differs.
    return measure(Case(build, args, numpy_fn, jax and jax_fn, work=8 * updates, unit="GB/s",
                        repeats=9, rtol=1e-5, atol=2e-5))


def gather(rows: int = 100_000, width: int = 64, n: int = 1 << 17) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (table, idx) = _params("gather", (F32, (rows, width)), (xm.S32, (n, 1)))
        dn = xm.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                       start_index_map=(0,), index_vector_dim=1)
        return b.build(b.gather(table, idx, dn, (1, width)))

    def args() -> tuple[Any, ...]:
        return _normal(4, rows, width), np.random.default_rng(5).integers(0, rows, (n, 1), dtype=np.int32)

    return measure(Case(build, args, lambda t, i: t[i[:, 0]], jax and (lambda t, i: t[i[:, 0]]),
                        work=2 * 4 * n * width, unit="GB/s", repeats=15, check=_exact))


def transpose(n: int = 4096) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x,) = _params("transpose", (F32, (n, n)))
        return b.build(b.transpose(x, (1, 0)))

    return measure(Case(build, lambda: (_normal(6, n, n),), lambda x: np.ascontiguousarray(x.T),
                        jax and (lambda x: x.T), work=2 * 4 * n * n, unit="GB/s", repeats=9,
                        check=_exact))


def _close_to_fft(actual: np.ndarray, expected: np.ndarray) -> None:
    error = np.abs(actual - expected).max() / np.abs(expected).max()
    assert actual.dtype == np.complex64, actual.dtype
    assert error < 1e-5, f"fft: max error {error:.2e} of the largest magnitude"


def fft(n: int = 1 << 20) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x,) = _params("fft", (xm.C64, (n,)))
        return b.build(b.fft(x, "FFT", (n,)))

    def args() -> tuple[Any, ...]:
        return ((_normal(7, n) + 1j * _normal(8, n)).astype(np.complex64),)

    return measure(Case(build, args, np.fft.fft, jnp and jnp.fft.fft,
                        reference=lambda x: np.fft.fft(x.astype(np.complex128)),
                        work=5 * n * np.log2(n), unit="GFLOP/s", repeats=9, check=_close_to_fft))


def rfft(n: int = 1 << 20) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x,) = _params("rfft", (F32, (n,)))
        return b.build(b.fft(x, "RFFT", (n,)))

    return measure(Case(build, lambda: (_normal(9, n),), np.fft.rfft, jnp and jnp.fft.rfft,
                        reference=lambda x: np.fft.rfft(x.astype(np.float64)),
                        work=2.5 * n * np.log2(n), unit="GFLOP/s", repeats=9, check=_close_to_fft))


def cumsum(n: int) -> Measurement:
    """XLA's cumulative-sum idiom (what jax.lax.cumsum lowers to on CPU): a window as long
    as the array, padded by n-1 on the low side. numpy and JAX: their cumsum."""
    def build() -> xm.XlaComputation:
        b, (x,) = _params("cumsum", (F32, (n,)))
        return b.build(b.reduce_window(x, b.constant(np.float32(0)), lambda a, v: a + v, [n], [1],
                                       padding=[(n - 1, 0)]))

    x = _normal(10, n)
    reference = np.cumsum(x.astype(np.float64))
    # A float32 running sum's rounding grows with n: no worse than twice numpy's own
    # float32 cumsum (sequential; its error at 1M is ~1e-2 on sums of ~1e3).
    bound = 2 * np.abs(np.cumsum(x) - reference).max() + 1e-6

    def check(actual: np.ndarray, expected: np.ndarray) -> None:
        error = np.abs(actual - expected).max()
        assert actual.dtype == np.float32 and error <= bound, f"cumsum: max error {error:.3g} > {bound:.3g}"

    return measure(Case(build, lambda: (x,), np.cumsum, jnp and jnp.cumsum,
                        reference=lambda _: reference, work=2 * 4 * n, unit="GB/s", repeats=9,
                        check=check))


def _sum_all(b: xm.XlaBuilder, z: Any) -> Any:
    return b.reduce(z, b.constant(np.float32(0)), lambda a, v: a + v, [0])


def value_and_sum(n: int = 20_000_000, separate: bool = False) -> Measurement:
    """(z, sum(z)) for z = x*2 as one program, or (`separate`) z alone, then sum alone."""
    def build() -> Any:
        b, (x,) = _params("value_and_sum", (F32, (n,)))
        z = x * 2.0
        if not separate:
            return b.build([z, _sum_all(b, z)])
        s, (zp,) = _params("sum", (F32, (n,)))
        return [b.build(z), s.build(_sum_all(s, zp))]

    def numpy_fn(x: Any) -> Any:
        z = x * np.float32(2)
        return z, z.sum()

    def reference(x: Any) -> Any:
        return x * np.float32(2), np.float32((x.astype(np.float64) * 2).sum())

    inputs: list[np.ndarray] = []  # made once, by measure (not before our compile)

    def args() -> tuple[Any, ...]:
        if not inputs:
            inputs.append(_normal(11, n))
        return (inputs[0],)

    # JAX's two programs cannot be one jit (it would fuse them): timed below, outside measure.
    case = Case(build, args, numpy_fn, None if separate else (jax and numpy_fn),
                work=2 * 4 * n, unit="GB/s", repeats=9, reference=reference, rtol=1e-5, atol=0,
                chained=separate)
    m = measure(case)
    if separate and jax is not None:
        z_numpy, _, z_compile = jax_compile(lambda x: x * np.float32(2), args())
        z = z_numpy()
        s_numpy, _, s_compile = jax_compile(jnp.sum, (z,))
        np.testing.assert_allclose(s_numpy(), reference(*args())[1], rtol=1e-5)
        m.jax_compile_s = z_compile + s_compile
        double, total = jax.jit(lambda x: x * np.float32(2)), jax.jit(jnp.sum)
        xd = jnp.asarray(args()[0])
        m.jax_s = median_time(lambda: jax.block_until_ready(total(double(xd))), case.repeats)
    return m


def workloads() -> list[Workload]:
    """The issue-#17 rows of this module, for bench/suite.py."""
    return [
        Workload("sort f32[1M]", sort, None),
        Workload("sort rows f32[1024,1024] last axis", sort_rows, None),
        Workload("top_k k=8 of f32[1024,4096]", top_k, None),
        Workload("scatter-add 1M updates -> f32[64K]", scatter_add, None),
        Workload("gather 128K rows of f32[100K,64]", gather, None),
        Workload("transpose f32[4096,4096] (1,0)", transpose, None),
        Workload("fft c64[1M]", fft, None),
        Workload("rfft f32[1M]", rfft, None),
        Workload("cumsum (reduce_window) f32[1M]", lambda: cumsum(1 << 20), None),
        Workload("(z, sum(z)), z=x*2 f32[20M] one program", value_and_sum, None),
        Workload("z=x*2, then sum(z) f32[20M] two programs",
                 lambda: value_and_sum(separate=True), None),
    ]
