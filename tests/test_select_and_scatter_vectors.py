"""select_and_scatter as vector loops along the minor dimension
(lowering/ops/select_scatter_vectors.py): a max-pool's gradient.

Channels-last windows (odd sizes, masked last vectors, 1x1 windows, windows larger
than the input, strides larger than the window, padding, windows over the batch),
each comparator in both argument orders, every type the path takes. The results must
be a plain numpy reference's (the window in lexicographic order, a cell taken where
nothing is found yet or where select(best, cell) is false, padding never taken, the
sources added in row-major order) and the general lowering's (lowering/ops/reduce.py,
forced by switching the vector path off), bit for bit: the sign of zero included, ties
and NaN included (but for which NaN an add of two NaNs returns). Then every target CPU,
the IR, and what stays on the general lowering.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from targets_support import TARGETS, target_options

import xlamlir as xm
from xlamlir.lowering.ops import select_scatter_vectors

FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
SELECTS = {
    "ge": lambda a, e: a.builder.ge(a, e),
    "gt": lambda a, e: a.builder.gt(a, e),
    "le": lambda a, e: a.builder.le(a, e),
    "lt": lambda a, e: a.builder.lt(a, e),
    "le(e, a)": lambda a, e: a.builder.le(e, a),  # ge with the arguments swapped
}
PREDICATES = {"ge": np.greater_equal, "gt": np.greater, "le": np.less_equal, "lt": np.less,
              "le(e, a)": lambda a, e: np.less_equal(e, a)}
# (operand shape, window, strides, padding)
CASES = [
    ((2, 9, 11, 20), (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (0, 1), (0, 1), (0, 0))),  # ResNet's
    ((3, 8, 6, 17), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0), (0, 0), (0, 0), (0, 0))),  # 2x2/2
    ((2, 5, 7, 16), (1, 3, 3, 1), (1, 1, 1, 1), ((0, 0), (1, 1), (1, 1), (0, 0))),  # 3x3/1 SAME
    ((2, 4, 5, 9), (1, 1, 1, 1), (1, 1, 1, 1), ((0, 0), (0, 0), (0, 0), (0, 0))),  # 1x1
    ((2, 3, 2, 16), (1, 5, 4, 1), (1, 1, 1, 1), ((0, 0), (1, 1), (1, 2), (0, 0))),  # wider than x
    ((2, 8, 9, 16), (1, 2, 2, 1), (1, 3, 4, 1), ((0, 0), (0, 1), (2, 0), (0, 0))),  # stride > window
    ((2, 4, 5, 16), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 0), (0, 0))),  # 2x2/2 padded
    ((3, 4, 5, 16), (2, 2, 1, 1), (1, 1, 2, 1), ((1, 0), (0, 0), (0, 0), (0, 0))),  # over the batch
    ((7, 5, 24), (3, 1, 1), (2, 1, 1), ((1, 1), (0, 0), (0, 0))),  # cores split the second dim
    ((1, 9, 7, 64), (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (0, 1), (0, 0))),  # ... the channels
    ((7, 6, 96), (3, 2, 1), (2, 2, 1), ((0, 1), (1, 0), (0, 0))),  # ... channels, 6 blocks (f32)
]


def reference(x: np.ndarray, source: np.ndarray, init, select, window, strides, padding) -> np.ndarray:
    """XLA's select_and_scatter with an add scatter, one source position at a time."""
    out = np.full(x.shape, init, x.dtype)
    with np.errstate(all="ignore"):
        for p in itertools.product(*map(range, source.shape)):
            best = pick = None
            for cell in itertools.product(*map(range, window)):
                q = tuple(o * s + c - lo for o, s, c, (lo, _) in zip(p, strides, cell, padding))
                if any(not 0 <= i < n for i, n in zip(q, x.shape)):
                    continue  # padding is never selected
                if pick is None or not select(best, x[q]):
                    best, pick = x[q], q
            if pick is not None:
                out[pick] = out[pick] + source[p]
    return out


def _computation(x: np.ndarray, source: np.ndarray, init, select, window, strides,
                 padding, scatter=lambda a, e: a + e) -> xm.XlaComputation:
    b = xm.XlaBuilder("grad")
    t = xm.type_of(x.dtype)
    p = b.parameter(0, xm.Shape.array(t, x.shape))
    s = b.parameter(1, xm.Shape.array(t, source.shape))
    b.select_and_scatter(p, select, list(window), list(strides), [tuple(q) for q in padding], s,
                         b.constant(np.asarray(init, x.dtype)), scatter)
    return b.build()


def _source_shape(shape, window, strides, padding) -> tuple[int, ...]:
    return tuple((n + lo + hi - w) // s + 1 for n, w, s, (lo, hi) in zip(shape, window, strides, padding))


def _values(shape: tuple[int, ...], dtype, seed: int, ties: bool) -> np.ndarray:
    """Few distinct values (ties everywhere) or normal ones; for floats NaNs of several
    payloads and signs, +-0 and +-inf sprinkled in."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        if ties:
            return rng.integers(0, 3, shape).astype(dtype)
        x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        x.reshape(-1)[:4] = [info.min, info.max, 0, 1]  # sums wrap
        return x
    if np.dtype(dtype).itemsize == 2:  # the f32 specials rounded: signs, infinities, NaN payloads
        return _values(shape, np.float32, seed, ties).astype(dtype)
    x = (rng.integers(-1, 2, shape) if ties else rng.standard_normal(shape)).astype(dtype)
    bits = x.view(f"u{x.itemsize}").reshape(-1)
    sign = 1 << (8 * x.itemsize - 1)
    quiet, inf = (0x7FC00000, 0x7F800000) if x.itemsize == 4 else (0x7FF8000000000000, 0x7FF0000000000000)
    specials = np.array([quiet | 1, quiet | 5 | sign, quiet, 0, sign, inf, inf | sign], dtype=bits.dtype)
    where = rng.choice(bits.size, min(bits.size // 4, 40), replace=False)
    bits[where] = specials[np.arange(where.size) % specials.size]
    bits[:8] = np.array([0, sign] * 4, dtype=bits.dtype)  # equal neighbours: +-0 runs
    return x


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.itemsize}")


def _assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bit for bit, but any NaN for a NaN (which one x86 returns for NaN + NaN depends on
    the operand order LLVM picks)."""
    assert got.dtype == want.dtype and got.shape == want.shape, what
    g, w = _bits(got), _bits(want)
    if np.issubdtype(got.dtype, np.floating):
        both = np.isnan(got) & np.isnan(want)
        g, w = g[~both], w[~both]
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, f"{what}: {bad.size} elements differ, first at {bad[:5]}"


def _compile(comp: xm.XlaComputation, vectors: bool, monkeypatch: pytest.MonkeyPatch,
             force: bool = True, **options) -> xm.Executable:
    """Compiled by the vector path or by the general lowering (forced unless not `force`)."""
    xm.runtime.clear_cache()
    with monkeypatch.context() as m:
        if not vectors and force:
            m.setattr(select_scatter_vectors, "MAX_UNROLLED_CELLS", -1)  # the general lowering
        exe = xm.compile(comp, **options)
    xm.runtime.clear_cache()
    assert ("vector.transfer_read" in str(exe.stages["linalg"])) == vectors, "wrong path taken"
    return exe


def _check(x, source, init, select_name, window, strides, padding, monkeypatch, what) -> None:
    comp = _computation(x, source, init, SELECTS[select_name], window, strides, padding)
    got = _compile(comp, True, monkeypatch)(x, source)
    _assert_same(got, reference(x, source, x.dtype.type(init), PREDICATES[select_name], window,
                                strides, padding), f"{what}: numpy")
    _assert_same(got, _compile(comp, False, monkeypatch)(x, source), f"{what}: general lowering")


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("ties", [True, False])
def test_windows_f32(case: int, ties: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    shape, window, strides, padding = CASES[case]
    source_shape = _source_shape(shape, window, strides, padding)
    x = _values(shape, np.float32, case, ties)
    source = _values(source_shape, np.float32, 100 + case, False)
    _check(x, source, 0.0, "ge", window, strides, padding, monkeypatch, f"case {case}")


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_windows_16_bit_floats(case: int, dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compared and added as the type (f32 arithmetic rounded once, soft_float's
    integer conversions), selected and stored as bits."""
    shape, window, strides, padding = CASES[case]
    shape = shape[:-1] + (max(shape[-1], 33),)  # 32 lanes: at least half a vector, a masked one
    x = _values(shape, dtype, case, True)
    source = _values(_source_shape(shape, window, strides, padding), dtype, 200 + case, False)
    _check(x, source, 0.0, "ge", window, strides, padding, monkeypatch, f"case {case}")


@pytest.mark.parametrize("select_name", list(SELECTS))
@pytest.mark.parametrize("dtype", FLOATS)
def test_comparators_floats(select_name: str, dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    shape, window, strides, padding = CASES[0]
    x = _values(shape, dtype, 1, True)
    source = _values(_source_shape(shape, window, strides, padding), dtype, 2, False)
    _check(x, source, -0.0, select_name, window, strides, padding, monkeypatch, select_name)


@pytest.mark.parametrize("dtype", INTS)
def test_integers(dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """Overlapping windows (read, add, write) with ties, disjoint padded ones (written)
    with wrapping sums; a masked last vector."""
    for case, ties, select_name in [(2, True, "ge"), (6, False, "lt")]:
        shape, window, strides, padding = CASES[case]
        source_shape = _source_shape(shape, window, strides, padding)
        minor = max(shape[-1], 64 // np.dtype(dtype).itemsize // 2 + 3)
        shape, source_shape = shape[:-1] + (minor,), source_shape[:-1] + (minor,)
        x = _values(shape, dtype, 3, ties)
        source = _values(source_shape, dtype, 4, False)
        _check(x, source, 7, select_name, window, strides, padding, monkeypatch, f"case {case}")


def test_sources_added_in_row_major_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overlapping windows that all pick one element: f32 sums whose bits depend on the
    order (1e8 + 1 - 1e8 is 0, 1 - 1e8 + 1e8 is 0 too, but 1e8 - 1e8 + 1 is 1)."""
    x = np.zeros((1, 5, 1, 16), np.float32)
    x[0, 2] = 1.0  # the maximum of the three windows covering row 2
    window, strides, padding = (1, 3, 1, 1), (1, 1, 1, 1), ((0, 0), (0, 0), (0, 0), (0, 0))
    source = np.zeros((1, 3, 1, 16), np.float32)
    source[0, :, 0, 0] = [1e8, -1e8, 1.0]
    source[0, :, 0, 1] = [1.0, 1e8, -1e8]
    source[0, :, 0, 2] = [-1e8, 1.0, 1e8]
    comp = _computation(x, source, 0.0, SELECTS["ge"], window, strides, padding)
    got = _compile(comp, True, monkeypatch)(x, source)
    np.testing.assert_array_equal(got[0, 2, 0, :3], [1.0, 0.0, 0.0])
    _assert_same(got, reference(x, source, np.float32(0), np.greater_equal, window, strides, padding),
                 "numpy")


def test_scatter_with_source_first(monkeypatch: pytest.MonkeyPatch) -> None:
    shape, window, strides, padding = CASES[0]
    x = _values(shape, np.float32, 5, True)
    source = _values(_source_shape(shape, window, strides, padding), np.float32, 6, False)
    comp = _computation(x, source, 0.0, SELECTS["ge"], window, strides, padding, lambda a, e: e + a)
    got = _compile(comp, True, monkeypatch)(x, source)
    _assert_same(got, _compile(comp, False, monkeypatch)(x, source), "add(source, current)")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_every_target_same_bits(target: str, dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    shape, window, strides, padding = CASES[0]
    shape = shape[:-1] + (33,)
    x = _values(shape, dtype, 7, True)
    source = _values(_source_shape(shape, window, strides, padding), dtype, 8, False)
    comp = _computation(x, source, 0.0, SELECTS["ge"], window, strides, padding)
    got = _compile(comp, True, monkeypatch, **target_options(target))(x, source)
    _assert_same(got, reference(x, source, x.dtype.type(0), np.greater_equal, window, strides, padding),
                 target)


def test_ir_vector_loops_in_parallel_no_temporaries() -> None:
    x = np.zeros((8, 16, 16, 64), np.float32)
    window, strides, padding = (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (0, 1), (0, 1), (0, 0))
    source = np.zeros(_source_shape(x.shape, window, strides, padding), np.float32)
    exe = xm.compile(_computation(x, source, 0.0, SELECTS["ge"], window, strides, padding))
    bufferized = str(exe.stages["bufferized"])
    assert "vector<16xf32>" in str(exe.stages["vectorized"]) and "scf.forall" in bufferized
    assert "memref.alloc" not in bufferized  # no window temporaries
    assert "memref.copy" not in bufferized


def test_ir_channels_split_across_cores_without_a_batch() -> None:
    x = np.zeros((1, 16, 16, 64), np.float32)
    window, strides, padding = (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (0, 1), (0, 1), (0, 0))
    source = np.zeros(_source_shape(x.shape, window, strides, padding), np.float32)
    bufferized = str(xm.compile(_computation(x, source, 0.0, SELECTS["ge"], window, strides,
                                             padding)).stages["bufferized"])
    assert "scf.forall (%arg3) in (4)" in bufferized, bufferized  # 4 blocks of 16 channels
    assert "memref.alloc" not in bufferized and "memref.copy" not in bufferized


@pytest.mark.parametrize("what", ["f8e4m3fn", "nchw", "gt totalorder", "mul scatter", "narrow minor",
                                  "81 cells"])
def test_others_stay_on_the_general_lowering(what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shape, window, strides, padding = CASES[0]
    dtype = ml_dtypes.float8_e4m3fn if what == "f8e4m3fn" else np.float32
    select, scatter, predicate = SELECTS["ge"], (lambda a, e: a + e), np.greater_equal
    if what == "nchw":  # the window over the minor dimension
        shape, window, strides, padding = (2, 16, 9, 11), (1, 1, 3, 3), (1, 1, 2, 2), CASES[0][3][::2] * 2
    elif what == "narrow minor":
        shape = shape[:-1] + (5,)
    elif what == "81 cells":  # more than MAX_UNROLLED_CELLS: not unrolled
        window, strides, padding = (1, 9, 9, 1), (1, 1, 1, 1), ((0, 0), (4, 4), (4, 4), (0, 0))
    x = _values(shape, np.float32, 9, True).astype(dtype)
    source = _values(_source_shape(shape, window, strides, padding), np.float32, 10, False).astype(dtype)
    if what == "gt totalorder":
        select = lambda a, e: a.builder.compare(a, e, "GT", comparison_type="TOTALORDER")  # noqa: E731
        predicate = None
    elif what == "mul scatter":
        scatter = lambda a, e: a * e  # noqa: E731
    comp = _computation(x, source, 0.0, select, window, strides, padding, scatter)
    got = _compile(comp, False, monkeypatch, force=False)(x, source)  # asserts the general lowering
    if predicate is not None and what != "mul scatter":
        _assert_same(got, reference(x, source, dtype(0), predicate, window, strides, padding), what)


def test_jax_max_pool_gradient_same_bits_as_jax(monkeypatch: pytest.MonkeyPatch) -> None:
    """jax.vjp of a max-pool (XLA's select_and_scatter GE/add), imported from StableHLO,
    takes the vector path and gives XLA:CPU's bits."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_platforms", "cpu")
    dims, strides, pad = (1, 3, 3, 1), (1, 2, 2, 1), [(0, 0), (0, 1), (0, 1), (0, 0)]

    def grad(x, s):
        pool = lambda x: jax.lax.reduce_window(x, -np.inf, jax.lax.max, dims, strides, pad)  # noqa: E731
        return jax.vjp(pool, x)[1](s)[0]

    x = _values((2, 9, 11, 32), np.float32, 11, True)
    source = _values((2, 4, 5, 32), np.float32, 12, False)
    exe = _compile(xm.import_stablehlo(jax.jit(grad).lower(x, source)), True, monkeypatch)
    _assert_same(exe(x, source), np.asarray(jax.jit(grad)(x, source)), "jax")
