"""Which NaN an op returns, bit for bit, on every target_cpu and in every code shape
(scalar loop, vectors, fused chains, reductions, pooling): docs/numerics.md, "NaN bits"."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest
from targets_support import TARGETS as SUPPORTED_TARGETS
from targets_support import target_options

import xlamlir as xm

BF16 = np.dtype(ml_dtypes.bfloat16)
QUIET = {np.dtype(np.float64): 1 << 51, np.dtype(np.float32): 1 << 22,
         np.dtype(np.float16): 1 << 9, BF16: 1 << 6,
         # f8e5m2 is IEEE-like; FN has one NaN per sign (all ones), FNUZ one NaN (0x80).
         np.dtype(ml_dtypes.float8_e5m2): 1 << 1, np.dtype(ml_dtypes.float8_e4m3fn): 0,
         np.dtype(ml_dtypes.float8_e4m3fnuz): 0}
# NaNs that differ in payload, sign and quietness (7f800003: signaling), among numbers.
F32_PATTERNS = [0x7FC00001, 0x7FC00000, 0xFFC00002, 0x7F800003, 0xFF800004, 0x7FFFFFFF,
                0x3F800000, 0xBF800000, 0x00000000, 0x80000000, 0x7F800000, 0xFF800000]


# x86-64-v4's instructions run only on an AVX-512 machine; elsewhere its code shapes run
# with the host's (targets_support.py).
TARGETS = ["host", *SUPPORTED_TARGETS]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _patterns(dtype: np.dtype) -> np.ndarray:
    """F32_PATTERNS in `dtype`: the f32 bit patterns' sign, exponent and leading mantissa bits
    (so f64/f16/bf16 NaNs with different payloads and signs, signaling ones too)."""
    f32 = np.array(F32_PATTERNS, np.uint32)
    if dtype == np.float32:
        return f32.view(np.float32)
    if dtype == np.float64:
        sign, rest = f32 >> 31, f32 & 0x7FFFFFFF
        exp, man = rest >> 23, rest & 0x7FFFFF
        wide_exp = np.where(exp == 0xFF, 0x7FF, np.where(exp == 0, 0, exp.astype(np.uint64) + 1023 - 127))
        u64 = np.uint64
        bits = (sign.astype(u64) << 63) | (wide_exp.astype(u64) << 52) | (man.astype(u64) << 29)
        return bits.view(np.float64)
    if dtype == BF16:
        return (f32 >> 16).astype(np.uint16).view(BF16)
    # f16: sign, exponent all ones for inf/NaN, the mantissa's top 10 bits.
    sign, exp, man = f32 >> 31, (f32 >> 23) & 0xFF, f32 & 0x7FFFFF
    exp16 = np.where(exp == 0xFF, 0x1F, np.where(exp == 0, 0, exp.astype(np.int64) - 127 + 15))
    return ((sign << 15) | (exp16.astype(np.uint32) << 10) | (man >> 13)).astype(np.uint16).view(np.float16)


def _draw(dtype: np.dtype, shape: tuple[int, ...], seed: int) -> np.ndarray:
    patterns = _patterns(dtype)
    rng = np.random.default_rng(seed)
    return patterns[rng.integers(0, patterns.size, shape)]


# -- the rule, in numpy ----------------------------------------------------------------------

def _is_nan(bits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.isnan(bits.view(dtype).astype(np.float64))


def rule_extremum(x: np.ndarray, y: np.ndarray, *, maximum: bool) -> np.ndarray:
    """max/min: the first NaN operand (x if NaN, else y) with its quiet bit set; else the
    larger (smaller) value with -0 < +0."""
    dtype = x.dtype
    xb, yb = _bits(x), _bits(y)
    with np.errstate(invalid="ignore"):  # signaling NaNs
        xf, yf = x.astype(np.float64), y.astype(np.float64)
    x_nan, y_nan = np.isnan(xf), np.isnan(yf)
    first = np.where(x_nan, xb, yb) | np.array(QUIET[dtype], xb.dtype)
    wins = xf > yf if maximum else xf < yf
    equal = (xb & yb) if maximum else (xb | yb)  # equal values: only +-0 differ in bits
    ordered = np.where(wins, xb, np.where(xf == yf, equal, yb))
    return np.where(x_nan | y_nan, first, ordered).astype(xb.dtype).view(dtype)


def rule_max(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return rule_extremum(x, y, maximum=True)


def rule_min(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return rule_extremum(x, y, maximum=False)


def _fold(fn, init: np.ndarray, xs: np.ndarray, axis: int) -> np.ndarray:
    """f(...f(f(init, x0), x1)..., xn) along `axis`, the accumulator first."""
    moved = np.moveaxis(xs, axis, 0)
    return functools.reduce(fn, list(moved), np.broadcast_to(init, moved.shape[1:]).copy())


def _lane_fold(fn, init: np.ndarray, xs: np.ndarray, lanes: int = 16,
               identity: float | None = None) -> np.ndarray:
    """A reduction of the last axis split into `lanes` interleaved lanes, each folded from
    the identity in order, then init, lane 0, lane 1... (lowering/ops/reduce.py)."""
    n = xs.shape[-1]
    split = xs.reshape(xs.shape[:-1] + (n // lanes, lanes))
    if identity is None:
        identity = -np.inf if fn is rule_max else np.inf
    per_lane = _fold(fn, np.full(split.shape[:-2] + (lanes,), identity, xs.dtype), split, split.ndim - 2)
    return _fold(fn, init, per_lane, per_lane.ndim - 1)


# -- programs ---------------------------------------------------------------------------------

def _same_bits_everywhere(comp: xm.XlaComputation, args: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs, checked bit-identical on every target; returns the host's."""
    results = {}
    for target in TARGETS:
        out = xm.compile(comp, **target_options(target))(*args)
        results[target] = out if isinstance(out, (list, tuple)) else [out]
    host = results["host"]
    for target, outs in results.items():
        for i, (got, want) in enumerate(zip(outs, host)):
            np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"output {i} on {target}")
    return list(host)


def _assert_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    bad = _bits(got) != _bits(want)
    assert not bad.any(), (f"{what}: {int(bad.sum())} differ, e.g. got {_bits(got)[bad][:4]} "
                           f"want {_bits(want)[bad][:4]}")


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16],
                         ids=["f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("n", [1, 7, 64, 1000])
def test_elementwise_max_min_first_nan_quieted(dtype: np.dtype, n: int) -> None:
    x, y, z = _draw(dtype, (n,), 1), _draw(dtype, (n,), 2), _draw(dtype, (n,), 3)
    b = xm.XlaBuilder("maxmin")
    px, py, pz = (b.parameter(i, xm.Shape.array(dtype, (n,))) for i in range(3))
    comp = b.build([b.max(px, py), b.min(px, py), b.max(py, px),
                    b.min(b.max(px, py), pz),                       # a fused chain
                    b.max(b.min(pz, px), b.max(py, pz))])
    got = _same_bits_everywhere(comp, [x, y, z])
    wants = [rule_max(x, y), rule_min(x, y), rule_max(y, x),
             rule_min(rule_max(x, y), z), rule_max(rule_min(z, x), rule_max(y, z))]
    for i, (g, w) in enumerate(zip(got, wants)):
        _assert_bits(g, w, f"output {i}")


@pytest.mark.parametrize("n", [7, 64])
def test_clamp_is_min_of_max_operand_first(n: int) -> None:
    """clamp(lo, x, hi) = min(max(x, lo), hi): a NaN x wins over a NaN bound, lo over hi."""
    lo, x, hi = (_draw(np.dtype(np.float32), (n,), seed) for seed in (13, 14, 15))
    b = xm.XlaBuilder("clamp")
    plo, px, phi = (b.parameter(i, xm.Shape.array(xm.F32, (n,))) for i in range(3))
    (got,) = _same_bits_everywhere(b.build([b.clamp(plo, px, phi)]), [lo, x, hi])
    _assert_bits(got, rule_min(rule_max(x, lo), hi), "clamp")


@pytest.mark.parametrize("name", ["float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz"])
def test_narrow_float_max_min_every_pair(name: str) -> None:
    """Every pair of bit patterns: the first NaN, quieted where the type has a quiet bit."""
    dtype = np.dtype(getattr(ml_dtypes, name))
    every = np.arange(256, dtype=np.uint8)
    x, y = np.repeat(every, 256).view(dtype), np.tile(every, 256).view(dtype)
    b = xm.XlaBuilder("narrow")
    px, py = (b.parameter(i, xm.Shape.array(dtype, x.shape)) for i in range(2))
    got = _same_bits_everywhere(b.build([b.max(px, py), b.min(px, py)]), [x, y])
    _assert_bits(got[0], rule_max(x, y), "max")
    _assert_bits(got[1], rule_min(x, y), "min")


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=["f32", "f64"])
@pytest.mark.parametrize("cols", [7, 16, 256])
def test_reduce_max_min_nan_follows_the_order(dtype: np.dtype, cols: int) -> None:
    """Each row has several NaNs; the result is the first NaN of the library's fold order,
    quieted: sequential for short rows, the 16-lane split for long ones."""
    rows = 24
    x = _draw(dtype, (rows, cols), 4)
    x[0] = np.array(1.0, dtype)  # a row without NaN
    b = xm.XlaBuilder("reduce")
    p = b.parameter(0, xm.Shape.array(dtype, x.shape))
    neg_inf, pos_inf = b.constant(np.array(-np.inf, dtype)), b.constant(np.array(np.inf, dtype))
    comp = b.build([b.reduce(p, neg_inf, lambda acc, v: acc.builder.max(acc, v), [1]),
                    b.reduce(p, pos_inf, lambda acc, v: acc.builder.min(acc, v), [1])])
    got = _same_bits_everywhere(comp, [x])
    for g, fn, init in ((got[0], rule_max, -np.inf), (got[1], rule_min, np.inf)):
        init_ = np.array(init, dtype)
        options = [_fold(fn, init_, x, 1)]
        if cols % 16 == 0:
            options.append(_lane_fold(fn, init_, x))
        assert any((_bits(g) == _bits(o)).all() for o in options), (fn.__name__, _bits(g), _bits(options[0]))


@pytest.mark.parametrize("cols", [7, 256])
def test_reduce_element_first_gives_the_last_nan(cols: int) -> None:
    """max(x, acc) instead of max(acc, x): the element wins each step, so the NaN returned
    is the last of the fold order."""
    x = _draw(np.dtype(np.float32), (24, cols), 16)
    b = xm.XlaBuilder("reduce_element_first")
    p = b.parameter(0, xm.Shape.array(xm.F32, x.shape))
    neg_inf = b.constant(np.float32(-np.inf))
    comp = b.build([b.reduce(p, neg_inf, lambda acc, v: acc.builder.max(v, acc), [1])])
    (got,) = _same_bits_everywhere(comp, [x])

    def element_first(acc: np.ndarray, v: np.ndarray) -> np.ndarray:
        return rule_max(v, acc)

    init = np.array(-np.inf, np.float32)
    options = [_fold(element_first, init, x, 1)]
    if cols % 16 == 0:
        options.append(_lane_fold(element_first, init, x, identity=-np.inf))
    assert any((_bits(got) == _bits(o)).all() for o in options), (_bits(got), _bits(options[0]))
    assert not (_bits(got) == _bits(_fold(rule_max, init, x, 1))).all()  # the order matters here


def test_reduce_nan_init_comes_first() -> None:
    """The init value is the accumulator's first value in every fold order."""
    x = _draw(np.dtype(np.float32), (3, 64), 5)
    init = np.array(0x7F800005, np.uint32).view(np.float32)  # signaling, payload 5
    b = xm.XlaBuilder("reduce_init")
    p = b.parameter(0, xm.Shape.array(xm.F32, x.shape))
    q = b.parameter(1, xm.Shape.array(xm.F32, ()))
    comp = b.build([b.reduce(p, q, lambda acc, v: acc.builder.max(acc, v), [1])])
    (got,) = _same_bits_everywhere(comp, [x, init])
    assert (_bits(got) == 0x7FC00005).all(), _bits(got)


def _pool(b: xm.XlaBuilder, p, init: np.ndarray, window, strides, padding, maximum: bool):
    def combine(a, v):
        return a.builder.max(a, v) if maximum else a.builder.min(a, v)
    return b.reduce_window(p, b.constant(init), combine, window, strides, padding=padding)


def _pool_reference(x: np.ndarray, init: np.ndarray, window, strides, padding, fn) -> np.ndarray:
    padded = np.pad(x, padding, constant_values=init)
    views = np.lib.stride_tricks.sliding_window_view(padded, window)
    views = views[tuple(slice(None, None, s) for s in strides)]
    cells = views.reshape(views.shape[:x.ndim] + (-1,))  # window cells in lexicographic order
    return _fold(fn, init, cells, cells.ndim - 1)


@pytest.mark.parametrize("maximum", [True, False], ids=["max", "min"])
def test_reduce_window_nan_is_the_first_cell(maximum: bool) -> None:
    """NHWC pooling (vector loops along the channels, lowering/ops/window_vectors.py) and a
    window along the minor dimension (the generic loop): the first NaN cell, quieted."""
    dtype = np.dtype(np.float32)
    x = _draw(dtype, (2, 9, 11, 40), 6)
    init = np.array(-np.inf if maximum else np.inf, dtype)
    fn = rule_max if maximum else rule_min
    pools = [([1, 3, 3, 1], [1, 2, 2, 1], [(0, 0), (1, 1), (0, 1), (0, 0)]),
             ([1, 1, 2, 5], [1, 1, 1, 3], [(0, 0), (0, 0), (0, 0), (2, 2)])]
    b = xm.XlaBuilder("pool")
    p = b.parameter(0, xm.Shape.array(dtype, x.shape))
    comp = b.build([_pool(b, p, init, *pool, maximum) for pool in pools])
    got = _same_bits_everywhere(comp, [x])
    for g, pool in zip(got, pools):
        _assert_bits(g, _pool_reference(x, init, *pool, fn), f"pool {pool}")


# -- the other ops: what is and is not guaranteed ------------------------------------------

ARITH = {"add": lambda x, y: x + y, "subtract": lambda x, y: x - y,
         "multiply": lambda x, y: x * y, "divide": lambda x, y: x / y}


def _arith_program(dtype: np.dtype, n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("arith")
    px, py = (b.parameter(i, xm.Shape.array(dtype, (n,))) for i in range(2))
    return b.build([fn(px, py) for fn in ARITH.values()])


def _quiet(a: np.ndarray) -> np.ndarray:
    return _bits(a) | np.array(QUIET[a.dtype], _bits(a).dtype)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=["f32", "f64"])
@pytest.mark.parametrize("n", [7, 1000])
def test_one_nan_operand_is_the_result_quieted(dtype: np.dtype, n: int) -> None:
    """x op y with exactly one NaN operand (the other a number, 0 or inf): that NaN with its
    quiet bit set, sign and payload kept, on every target."""
    patterns = _patterns(dtype)
    is_nan = np.isnan(patterns.astype(np.float64))
    nans, numbers = patterns[is_nan], patterns[~is_nan]
    rng = np.random.default_rng(8)
    nan, number = nans[rng.integers(0, nans.size, n)], numbers[rng.integers(0, numbers.size, n)]
    swap = rng.integers(0, 2, n).astype(bool)
    x, y = np.where(swap, number, nan), np.where(swap, nan, number)
    got = _same_bits_everywhere(_arith_program(dtype, n), [x, y])
    for name, g in zip(ARITH, got):
        _assert_bits(g, _quiet(nan).view(dtype), name)


@pytest.mark.parametrize("n", [7, 1000])
def test_two_nan_operands_give_either_quieted(n: int) -> None:
    """Both operands NaN: one of them, quieted, but which is not guaranteed: x86 returns the
    first, and LLVM commutes add/multiply where it saves a register move (x86-64-v2 does)."""
    x, y = _draw(np.dtype(np.float32), (n,), 9), _draw(np.dtype(np.float32), (n,), 10)
    both = np.isnan(x) & np.isnan(y)
    assert both.sum() > 0
    comp = _arith_program(np.dtype(np.float32), n)
    for target in TARGETS:
        for name, g in zip(ARITH, xm.compile(comp, **target_options(target))(x, y)):
            got = _bits(g)[both]
            ok = (got == _quiet(x)[both]) | (got == _quiet(y)[both])
            assert ok.all(), (name, target, got[~ok][:4])


@pytest.mark.parametrize("dtype, default", [(np.dtype(np.float32), 0xFFC00000),
                                            (np.dtype(np.float64), 0xFFF8000000000000)], ids=["f32", "f64"])
def test_invalid_operations_give_x86_default_nan(dtype: np.dtype, default: int) -> None:
    """inf - inf, 0 * inf, 0 / 0, inf / inf, sqrt(-1): x86's default NaN (negative, quiet)
    on every target (a constant-folded one may differ: docs/numerics.md)."""
    x = np.array([np.inf, 0.0, 0.0, np.inf, -1.0], dtype)
    y = np.array([np.inf, np.inf, 0.0, np.inf, 1.0], dtype)
    b = xm.XlaBuilder("invalid")
    px, py = (b.parameter(i, xm.Shape.array(dtype, (5,))) for i in range(2))
    comp = b.build([px - py, px * py, px / py, b.sqrt(px)])
    sub, mul, div, sqrt = _same_bits_everywhere(comp, [x, y])
    assert _bits(sub)[0] == default and _bits(mul)[1] == default
    assert _bits(div)[2] == default and _bits(div)[3] == default and _bits(sqrt)[4] == default


def test_sqrt_of_nan_is_it_quieted() -> None:
    x = _draw(np.dtype(np.float32), (64,), 11)
    b = xm.XlaBuilder("sqrt")
    b.sqrt(b.parameter(0, xm.Shape.array(xm.F32, x.shape)))
    (got,) = _same_bits_everywhere(b.build(), [x])
    nan = np.isnan(x)
    np.testing.assert_array_equal(_bits(got)[nan], _quiet(x)[nan])


@pytest.mark.parametrize("m, k, n", [(37, 70, 45), (1, 200, 33), (64, 96, 1)])
def test_dot_with_one_nan_per_product_gives_it_quieted(m: int, k: int, n: int) -> None:
    """A dot whose every output sums exactly one NaN product: that NaN, quieted, on every
    target (the fma chains and x86-64-v2's libm fma propagate a lone NaN); inf * 0 gives the
    default NaN. With several NaNs in one sum, which one is not guaranteed."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((k, n), dtype=np.float32)
    payload = (0x7F800000 | rng.integers(1, 1 << 22, m)).astype(np.uint32)
    payload |= rng.integers(0, 2, m).astype(np.uint32) << 31
    a[np.arange(m), rng.integers(1, k, m)] = payload.view(np.float32)
    b = xm.XlaBuilder("dot")
    px = b.parameter(0, xm.Shape.array(xm.F32, a.shape))
    py = b.parameter(1, xm.Shape.array(xm.F32, w.shape))
    comp = b.build([b.dot(px, py)])
    (got,) = _same_bits_everywhere(comp, [a, w])
    np.testing.assert_array_equal(_bits(got), (payload | 0x400000)[:, None].repeat(n, 1))
    a[:, 0], w[0] = np.inf, 0.0  # inf * 0 in every sum (besides the NaN)
    a[np.arange(m), :] = np.where(np.isnan(a), 1.0, a)
    (got,) = _same_bits_everywhere(comp, [a, w])
    assert (_bits(got) == 0xFFC00000).all()
