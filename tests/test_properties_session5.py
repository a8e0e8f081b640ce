"""Property tests of the fast paths that landed in session 5 (issue #17), against
independent oracles (numpy, tests/reference.py), written by a checker, not the authors:

- elementwise results written over the temporary they last read (lowering/passes/in_place.py)
  and the second round of producer duplication: the overwritten value must never be a
  parameter, an output or a value read later, whatever the program's shape of sharing;
- 1x1 convolutions as matmuls (convolution._pointwise) in every channels-last layout and
  kernel order, and results reached through reshapes written into the output buffer
  (schedules._write_into_outputs);
- the parallel radix sort of one long row (lowering/ops/sort_parallel.py) at its threshold,
  with several operands and a key that is not operand 0;
- the C call path (runtime/fastcall.py): results never alias arguments, threads, fork, and
  agreement with the ctypes path on every argument it defers;
- background disk-cache writes (runtime/cache_writer.py): concurrent compiles, hits in a
  fresh process, one entry per target CPU;
- runner utils loaded only when needed (runtime/jit_symbols.py): 16-bit floats and strided
  copies in a fresh process;
- unrolled row sums (lowering/passes/loop_hints.py) at trip counts around the threshold.

Every fast path is also compiled for x86-64-v2/v3/v4, which must give the same bits.
Inputs are small integers where sums are involved, so float results are exact.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from reference import evaluate
from targets_support import TARGETS, compile_for
from test_properties_session4 import HWIO, NCHW, NHWC, OIHW, _dn, direct_conv

import xlamlir as xm
from xlamlir.runtime import fastcall

ROOT = Path(__file__).resolve().parents[1]
BF16 = np.dtype(ml_dtypes.bfloat16)


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(np.uint8) if x.dtype.itemsize else x


def assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype,
                                                                  want.shape)
    if not np.array_equal(_bits(got), _bits(want)):
        bad = np.argwhere(_bits(got).reshape(got.shape + (-1,)) != _bits(want).reshape(
            want.shape + (-1,)))[:5]
        raise AssertionError(f"bits differ at {bad.tolist()}:\n{got!r}\nvs\n{want!r}")


def on_every_target(comp: xm.XlaComputation, *args: object) -> object:
    """The result on x86-64-v2, after checking v3 and v4 give the same bits (and that the
    arguments are left as they were)."""
    before = [np.array(a, copy=True) if not isinstance(a, tuple) else a for a in args]
    results = [compile_for(comp, t)(*args) for t in TARGETS]
    for a, b in zip(args, before):
        if not isinstance(a, tuple):
            assert_same_bits(np.asarray(a), b)  # an argument was written over
    for r in results[1:]:
        if isinstance(r, tuple):
            for x, y in zip(r, results[0]):
                assert_same_bits(x, y)
        else:
            assert_same_bits(r, results[0])
    return results[0]


def shape(dtype: object, dims: tuple[int, ...], layout: tuple[int, ...] | None = None) -> xm.Shape:
    return xm.Shape.array(xm.type_of(np.dtype(dtype)), dims, layout)


# ---- elementwise in place -----------------------------------------------------------------


def _softmax(b: xm.XlaBuilder, s: xm.XlaOp, dtype: object) -> xm.XlaOp:
    nt = np.dtype(dtype).type
    dims = s.shape.dimensions
    last = len(dims) - 1
    keep = list(range(last))
    m = b.reduce(s, b.constant(nt(-np.inf)), lambda a, e: a.builder.max(a, e), [last])
    e = b.exp(b.sub(s, b.broadcast_in_dim(m, dims, keep)))
    total = b.reduce(e, b.constant(nt(0)), lambda a, x: a + x, [last])
    return b.div(e, b.broadcast_in_dim(total, dims, keep))


def _np_softmax(s: np.ndarray) -> np.ndarray:
    s = s.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def _scores(rng: np.random.Generator, dims: tuple[int, ...], dtype: object) -> np.ndarray:
    s = rng.standard_normal(dims) * 3
    flat = s.reshape(-1, dims[-1])
    flat[0, 0] = np.inf  # a row with +inf: NaN where inf - inf
    flat[-1, :] = -np.inf  # a row of -inf: every probability NaN
    if flat.shape[0] > 2:
        flat[1, 1] = np.nan
        flat[2, :] = -0.0
    return s.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_softmax_read_after_its_probabilities(dtype: object) -> None:
    """The scores are returned and read again after the probabilities (which the pass would
    like to write over them): s * 2 computed inside, then p, p + s and s all outputs."""
    dims = (3, 5, 37)
    b = xm.XlaBuilder("softmax_shared")
    x = b.parameter(0, shape(dtype, dims))
    s = b.mul(x, b.constant(np.dtype(dtype).type(2)))
    p = _softmax(b, s, dtype)
    comp = b.build(b.tuple([p, b.add(p, s), s]))
    xv = _scores(np.random.default_rng(1), dims, dtype)
    p_got, sum_got, s_got = on_every_target(comp, xv)
    s_want = (xv.astype(np.float64) * 2).astype(dtype)
    assert_same_bits(s_got, s_want)
    tol = 2e-2 if dtype == BF16 else 1e-5
    want = _np_softmax(s_want)
    np.testing.assert_allclose(p_got.astype(np.float64), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(sum_got.astype(np.float64), (p_got.astype(np.float64) + s_want
                                                            .astype(np.float64)),
                               rtol=tol, atol=tol)


def test_softmax_of_a_parameter_leaves_it_alone() -> None:
    """The scores are the parameter itself, read by two softmaxes and a later multiply."""
    dims = (4, 33)
    b = xm.XlaBuilder("softmax_param")
    x = b.parameter(0, shape(np.float32, dims))
    p1 = _softmax(b, x, np.float32)
    p2 = _softmax(b, b.neg(x), np.float32)
    comp = b.build(b.tuple([b.mul(p1, x), p2, b.exp(x)]))
    xv = _scores(np.random.default_rng(2), dims, np.float32)
    a, c, e = on_every_target(comp, xv)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(a, _np_softmax(xv) * xv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, _np_softmax(-xv), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(e, np.exp(xv), rtol=1e-6)


def test_in_place_chain_reading_one_value_twice() -> None:
    """t = exp(x) read twice by one multiply (only one operand may be in place), then
    t read again after u; w = u - t reads both."""
    dims = (7, 9)
    b = xm.XlaBuilder("chain")
    x = b.parameter(0, shape(np.float64, dims))
    t = b.exp(x)
    u = b.mul(t, t)
    v = b.add(u, b.constant(np.float64(1)))
    w = b.sub(v, t)
    comp = b.build(b.tuple([w, b.sqrt(u)]))
    xv = np.linspace(-3, 3, 63).reshape(dims)
    got = on_every_target(comp, xv)
    want = evaluate(comp, [xv])
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-14)


def test_softmax_in_a_loop_body() -> None:
    """A softmax inside a while body over the loop's own state, three rounds."""
    dims = (2, 19)
    state = xm.Shape.tuple([shape(np.int32, ()), shape(np.float32, dims)])

    def cond(st: xm.XlaOp) -> xm.XlaOp:
        bb = st.builder
        return bb.lt(bb.get_tuple_element(st, 0), bb.constant(np.int32(3)))

    def body(st: xm.XlaOp) -> xm.XlaOp:
        bb = st.builder
        i, s = bb.get_tuple_element(st, 0), bb.get_tuple_element(st, 1)
        p = _softmax(bb, bb.mul(s, bb.constant(np.float32(4))), np.float32)
        return bb.tuple([i + np.int32(1), bb.add(p, s)])

    b = xm.XlaBuilder("loop")
    x = b.parameter(0, shape(np.float32, dims))
    out = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), x]))
    del state
    comp = b.build(b.get_tuple_element(out, 1))
    xv = np.random.default_rng(3).standard_normal(dims).astype(np.float32)
    got = on_every_target(comp, xv)
    want = xv.astype(np.float64)
    for _ in range(3):
        want = _np_softmax(want * 4) + want
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- 1x1 convolutions as matmuls ----------------------------------------------------------

def _conv1x1(lhs_layout: str, rhs_layout: str, out_layout: str, n: int, c: int, o: int,
             spatial: tuple[int, ...], lhs_minor_to_major: tuple[int, ...] | None = None,
             root: object = None) -> tuple[xm.XlaComputation, np.ndarray, np.ndarray, np.ndarray]:
    """A 1x1 convolution in the given layouts (letters N C, O I and H W D for the spatial
    dimensions), its integer operands and its result by einsum in float64."""
    letters = "HWD"[:len(spatial)]
    lsizes = {"N": n, "C": c, **dict(zip(letters, spatial))}
    ksizes = {"O": o, "I": c, **dict.fromkeys(letters, 1)}
    dn = xm.ConvDimensionNumbers(
        input_batch_dimension=lhs_layout.index("N"), input_feature_dimension=lhs_layout.index("C"),
        input_spatial_dimensions=tuple(lhs_layout.index(s) for s in letters),
        kernel_output_feature_dimension=rhs_layout.index("O"),
        kernel_input_feature_dimension=rhs_layout.index("I"),
        kernel_spatial_dimensions=tuple(rhs_layout.index(s) for s in letters),
        output_batch_dimension=out_layout.index("N"), output_feature_dimension=out_layout.index("C"),
        output_spatial_dimensions=tuple(out_layout.index(s) for s in letters))
    ld = tuple(lsizes[ch] for ch in lhs_layout)
    kd = tuple(ksizes[ch] for ch in rhs_layout)
    b = xm.XlaBuilder("conv1x1")
    x = b.parameter(0, shape(np.float32, ld, lhs_minor_to_major))
    w = b.parameter(1, shape(np.float32, kd))
    y = b.conv_general_dilated(x, w, [1] * len(spatial), [(0, 0)] * len(spatial),
                               dimension_numbers=dn)
    comp = b.build(root(b, y) if root else y)
    rng = np.random.default_rng(len(ld) * 1000 + n * 100 + c + o)
    xv = rng.integers(-3, 4, ld).astype(np.float32)
    wv = rng.integers(-3, 4, kd).astype(np.float32)
    sp = letters.lower()
    xs = np.einsum(f"{lhs_layout.lower()}->n{sp}c", xv.astype(np.float64))
    ks = np.einsum(f"{rhs_layout.lower()}->io", wv.astype(np.float64))
    ys = np.einsum(f"n{sp}c,co->n{sp}o", xs, ks)
    want = np.einsum(f"n{sp}o->{out_layout.lower().replace('c', 'o')}", ys).astype(np.float32)
    return comp, xv, wv, want


@pytest.mark.parametrize(("lhs", "rhs", "out"), [
    ("NHWC", "HWIO", "NHWC"), ("NWHC", "WHOI", "NWHC"), ("NHWC", "OIHW", "NHWC"),
    ("NHWC", "IOHW", "NHWC"), ("NHWC", "HIWO", "NHWC"), ("NHWC", "HWIO", "NCHW")])
def test_pointwise_convolution_layouts(lhs: str, rhs: str, out: str) -> None:
    comp, xv, wv, want = _conv1x1(lhs, rhs, out, 2, 33, 65, (9, 7))
    assert_same_bits(xm.compile(comp)(xv, wv), want)


def test_pointwise_convolution_edges_on_every_target() -> None:
    """NaN and infinities in both operands, a column-major lhs parameter, 1-D and 3-D. At
    most one NaN enters each sum but x86's default one (which of several NaNs a dot returns
    is not guaranteed: docs/numerics.md)."""
    comp, xv, wv, want = _conv1x1("NHWC", "HWIO", "NHWC", 1, 40, 48, (8, 9), (0, 1, 2, 3))
    xv[..., 5] = np.where(xv[..., 5] == 0, 1, xv[..., 5])  # no 0 * inf beside the NaN
    xv[0, 1, 2, 3] = np.nan
    xv[0, 3, 3, :] = np.inf
    wv[0, 0, 5, 7] = -np.inf
    with np.errstate(invalid="ignore"):
        xs, ws = xv.astype(np.float64), wv.astype(np.float64)
        want = np.einsum("nhwc,co->nhwo", xs, ws[0, 0]).astype(np.float32)
    got = on_every_target(comp, xv, wv)
    np.testing.assert_array_equal(got, want)  # NaN where numpy has one
    for dims in [("NHC", "HIO", "NHC", 3, 40, 50, (70,)),
                 ("NHWDC", "HWDIO", "NHWDC", 1, 20, 30, (5, 6, 7))]:
        comp, xv, wv, want = _conv1x1(*dims)
        assert_same_bits(xm.compile(comp)(xv, wv), want)


def test_pointwise_convolution_result_reshaped_and_shared() -> None:
    """The result reaches the outputs through reshapes (written in the output buffer) and
    as itself: a reshaped output, the plain output and a sum read after both."""
    n, c, o, sp = 2, 33, 65, (9, 7)
    total = n * o * sp[0] * sp[1]

    def root(b: xm.XlaBuilder, y: xm.XlaOp) -> xm.XlaOp:
        return b.tuple([b.reshape(y, (n * sp[0], sp[1] * o)), y, b.reshape(b.add(y, y), (total,))])

    comp, xv, wv, want = _conv1x1("NHWC", "HWIO", "NHWC", n, c, o, sp, root=root)
    flat, plain, doubled = on_every_target(comp, xv, wv)
    assert_same_bits(flat, want.reshape(n * sp[0], sp[1] * o))
    assert_same_bits(plain, want)
    assert_same_bits(doubled, (want * 2).reshape(-1))


# ---- parallel radix sort of one long row --------------------------------------------------

LONG_ROW = (1 << 17) + 1  # the parallel path's threshold, plus a last chunk of one element


def _total_key(x: np.ndarray) -> np.ndarray:
    """Unsigned keys in XLA's total order of floats (-NaN < -inf < ... < -0 < +0 < ... < NaN)."""
    unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
    bits = x.view(unsigned).astype(np.uint64)
    width = 8 * x.dtype.itemsize
    sign, mask = np.uint64(1 << (width - 1)), np.uint64((1 << width) - 1)
    return np.where(bits & sign, ~bits & mask, bits | sign)


def _float_row(rng: np.random.Generator, n: int, dtype: object) -> np.ndarray:
    x = rng.integers(-100, 100, n).astype(np.float64)
    x[rng.random(n) < 0.02] = np.nan
    x[rng.random(n) < 0.01] = -0.0
    x = x.astype(dtype)
    if np.dtype(dtype) == np.float32:  # NaNs with a sign and a payload, kept as they are
        nans = np.flatnonzero(np.isnan(x))
        x[nans[::2]] = np.array([0xFFC00001], np.uint32).view(np.float32)[0]
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_long_row_default_order(dtype: object) -> None:
    """No comparator: the total order with every NaN one largest key, stable; the row is
    also read after the sort (x + x)."""
    x = _float_row(np.random.default_rng(4), LONG_ROW, dtype)
    b = xm.XlaBuilder("sort_long")
    p = b.parameter(0, shape(dtype, x.shape))
    comp = b.build(b.tuple([b.sort(p), b.add(p, p)]))
    got, doubled = xm.compile(comp)(x)
    canonical = np.where(np.isnan(x.astype(np.float64)), np.nan, x.astype(np.float64)).astype(dtype)
    assert_same_bits(got, x[np.argsort(_total_key(canonical), kind="stable")])
    assert_same_bits(doubled, (x.astype(np.float64) * 2).astype(dtype))


@pytest.mark.parametrize(("direction", "compare_type", "key_dtype"), [
    ("GT", "TOTALORDER", np.float32), ("LT", None, np.int32), ("GT", None, np.uint8)])
def test_long_row_keyed_by_the_second_operand(direction: str, compare_type: str | None,
                                              key_dtype: object) -> None:
    """Two operands sorted by operand 1 (keys of <= 32 bits, f64 values carried along)."""
    n = LONG_ROW + 6
    rng = np.random.default_rng(5)
    if np.dtype(key_dtype).kind == "f":
        keys = rng.integers(-50, 50, n).astype(key_dtype)
        keys[rng.random(n) < 0.01] = -0.0
        keys[rng.random(n) < 0.01] = np.inf
    else:
        keys = rng.integers(0, 200, n).astype(key_dtype)
    values = rng.standard_normal(n)
    b = xm.XlaBuilder("sort_keyed")
    v = b.parameter(0, shape(np.float64, (n,)))
    k = b.parameter(1, shape(key_dtype, (n,)))
    b.sort([v, k], lambda v0, v1, k0, k1: k0.builder.compare(k0, k1, direction, compare_type),
           0, True)
    comp = b.build()
    got_v, got_k = on_every_target(comp, values, keys) if key_dtype == np.float32 else \
        xm.compile(comp)(values, keys)
    if np.dtype(key_dtype).kind == "f":
        order_key = _total_key(keys).astype(np.float64)  # exact: < 2**53 distinct needed
    else:
        order_key = keys.astype(np.float64)
    order = np.argsort(-order_key if direction == "GT" else order_key, kind="stable")
    assert_same_bits(got_k, keys[order])
    assert_same_bits(got_v, values[order])


# ---- runner utils, disk cache and C calls in fresh processes ------------------------------

_FRESH_PROCESS = """
    import sys
    import ml_dtypes
    import numpy as np
    import xlamlir as xm
    from xlamlir.runtime import disk_cache

    bf16 = np.dtype(ml_dtypes.bfloat16)
    b = xm.XlaBuilder("narrow")
    x = b.parameter(0, xm.Shape.array(xm.F64, (33,)))
    h = b.parameter(1, xm.Shape.array(xm.F16, (33,)))
    b.tuple([b.convert_element_type(x, xm.BF16), b.convert_element_type(x, xm.F16),
             b.convert_element_type(h, xm.F64)])
    narrow = b.build()
    b = xm.XlaBuilder("layouts")  # a column-major parameter returned: a strided copy
    p = b.parameter(0, xm.Shape.array(xm.F32, (3, 5), (0, 1)))
    b.tuple([p, b.add(p, p)])
    layouts = b.build()
    b = xm.XlaBuilder("math")  # libm calls, pow and rem among them
    u, v = (b.parameter(i, xm.Shape.array(xm.F32, (37,))) for i in range(2))
    b.tuple([b.pow(u, v), b.rem(u, v), b.cbrt(u), b.erf(u), b.atan2(u, v), b.round_nearest_even(u)])
    maths = b.build()

    xv = np.array([1 / 3, -0.0, np.inf, np.nan, 1e-40, 65504.0, 65520.0, 1e300, -2.5e-8] * 3
                  + [3.0] * 6)
    hv = np.linspace(-70000, 70000, 33).astype(np.float16)
    data = np.asfortranarray(np.arange(15, dtype=np.float32).reshape(3, 5))
    uv, vv = np.linspace(-3, 3, 37, dtype=np.float32), np.linspace(-2.5, 2.7, 37, dtype=np.float32)
    results = []
    for comp, args in [(narrow, (xv, hv)), (layouts, (data,)), (maths, (uv, vv))]:
        exe = xm.compile(comp, target_cpu=sys.argv[1])
        calls = [exe(*args) for _ in range(3)]  # the third takes the C path
        stats = exe.compile_stats
        results.append((stats["disk_cache"], calls, repr({k: v for k, v in stats.items()
                                                          if k.startswith("disk_cache")})))
    disk_cache.flush()
    results.append(("sources", disk_cache._SOURCES, ""))  # the library's own files, keyed
    np.save(sys.argv[2], np.array(results, dtype=object), allow_pickle=True)
"""


def _fresh_process(target: str, out: Path, cache: Path) -> list:
    env = {**os.environ, "XLAMLIR_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT.parent)}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_FRESH_PROCESS), target, str(out)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    *results, (_, sources, _) = list(np.load(out, allow_pickle=True))
    return results, sources


def test_fresh_processes_compile_then_load_from_the_cache(tmp_path: Path) -> None:
    """A process compiles 16-bit float conversions, a strided copy and libm calls (the JIT
    without the runner utils unless they are needed) into a disk cache; a second process
    loads them (hits), another target compiles its own entries (misses). Every call, the
    C path's too, gives the same bits as numpy / the first process."""
    cache = tmp_path / "cache"
    first, sources = _fresh_process("x86-64-v3", tmp_path / "a.npy", cache)
    second, sources_later = _fresh_process("x86-64-v3", tmp_path / "b.npy", cache)
    other, _ = _fresh_process("x86-64-v2", tmp_path / "c.npy", cache)
    assert [r[0] for r in first] == ["miss"] * 3, [r[2] for r in first]
    if sources_later == sources:  # else a source file changed in between: a new key, rightly
        assert [r[0] for r in second] == ["hit"] * 3, [r[2] for r in first + second]
    assert [r[0] for r in other] == ["miss"] * 3, [r[2] for r in other]
    for a, b, c in zip(first, second, other):
        for calls in (a[1], b[1], c[1]):
            for call in calls:
                for got, want in zip(call, a[1][0]):
                    assert_same_bits(got, want)
    xv = np.array([1 / 3, -0.0, np.inf, np.nan, 1e-40, 65504.0, 65520.0, 1e300, -2.5e-8] * 3
                  + [3.0] * 6)
    with np.errstate(over="ignore"):
        hv = np.linspace(-70000, 70000, 33).astype(np.float16)
    to_bf16, to_f16, from_f16 = first[0][1][0]
    with np.errstate(over="ignore"):
        assert_same_bits(to_bf16, xv.astype(BF16))
        assert_same_bits(to_f16, xv.astype(np.float16))
    assert_same_bits(from_f16, hv.astype(np.float64))
    data = np.asfortranarray(np.arange(15, dtype=np.float32).reshape(3, 5))
    same, doubled = first[1][1][0]
    assert_same_bits(same, data)
    assert_same_bits(doubled, data * 2)


# ---- the C call path --------------------------------------------------------------------

def _fast_program() -> xm.XlaComputation:
    b = xm.XlaBuilder("fast")
    x = b.parameter(0, shape(np.float32, (6, 7)))
    s = b.parameter(1, shape(np.int32, ()))
    b.tuple([x, b.add(x, b.convert_element_type(s, xm.F32)), b.mul(s, s)])
    return b.build()


def test_c_path_results_never_alias_arguments() -> None:
    """A returned parameter is a copy on every call (the C path from the third), and a
    result written by the caller changes neither the argument nor a later result."""
    exe = xm.compile(_fast_program())
    x = np.arange(42, dtype=np.float32).reshape(6, 7)
    keep = x.copy()
    results = [exe(x, np.int32(3)) for _ in range(4)]
    for same, shifted, _square in results:
        assert not np.shares_memory(same, x) and not np.shares_memory(shifted, same)
        same[...] = -1
        shifted[...] = -1
    assert_same_bits(x, keep)
    same, shifted, square = exe(x, 3)
    assert_same_bits(same, keep)
    assert_same_bits(shifted, keep + 3)
    assert_same_bits(square, np.array(9, np.int32))


def test_c_path_defers_what_it_cannot_take() -> None:
    """From the C path's calls on, the ctypes path still takes (and rejects) the rest:
    views, Fortran order, unaligned data, wrong dtypes and inexact scalars."""
    exe = xm.compile(_fast_program())
    x = np.arange(42, dtype=np.float32).reshape(6, 7)
    for _ in range(3):
        exe(x, np.int32(1))
    unaligned = np.frombuffer(b"\0" + x.tobytes(), np.float32, offset=1).reshape(6, 7)
    for arg in [np.asfortranarray(x), np.arange(84, dtype=np.float32).reshape(6, 14)[:, ::2],
                unaligned, x[::-1][::-1]]:
        same, shifted, _ = exe(arg, 2)
        assert_same_bits(same, np.ascontiguousarray(arg))
        assert_same_bits(shifted, np.ascontiguousarray(arg) + 2)
    for bad in [(x.astype(np.float64), 1), (x, 1.5), (x, 2 ** 40), (x[:5], 1), (x.astype(">f4"), 1)]:
        with pytest.raises(xm.ArgumentError):
            exe(*bad)


def test_c_path_from_many_threads() -> None:
    """Eight threads call one executable at once, each on its own data."""
    exe = xm.compile(_fast_program())
    exe(np.zeros((6, 7), np.float32), 0)
    errors: list[str] = []

    def work(k: int) -> None:
        x = np.full((6, 7), k, np.float32) + np.arange(7, dtype=np.float32)
        for i in range(300):
            same, shifted, square = exe(x, np.int32(i))
            if not (np.array_equal(same, x) and np.array_equal(shifted, x + i) and square == i * i):
                errors.append(f"thread {k} call {i}")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_random_stream_the_same_on_both_call_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """rng_uniform's per-executable state advances the same whichever path runs a call."""
    b = xm.XlaBuilder("rng")
    lo = b.parameter(0, shape(np.float32, ()))
    b.rng_uniform(lo, b.constant(np.float32(1)), (17,))
    comp = b.build()
    fast = xm.compile(comp)
    if not fast._use_fastcall():
        pytest.skip(f"no C path here: {fastcall.unavailable_reason()}")
    monkeypatch.setenv("XLAMLIR_FASTCALL", "off")
    slow = xm.compile(comp, target_cpu="x86-64-v2")
    for _ in range(5):
        assert_same_bits(fast(np.float32(0)), slow(np.float32(0)))
    assert slow._fast_run is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_c_path_in_a_forked_child() -> None:
    """A child forked after the C path was set up calls the executable and gets right
    results; so does the parent afterwards."""
    exe = xm.compile(_fast_program())
    x = np.arange(42, dtype=np.float32).reshape(6, 7)
    for _ in range(3):
        exe(x, 1)
    script = textwrap.dedent("""
        import os, sys
        import numpy as np
        import xlamlir as xm
        sys.path.insert(0, sys.argv[1])
        from test_properties_session5 import _fast_program
        exe = xm.compile(_fast_program())
        x = np.arange(42, dtype=np.float32).reshape(6, 7)
        for _ in range(3):
            exe(x, 1)
        pid = os.fork()
        if pid == 0:
            ok = all(np.array_equal(exe(x, i)[1], x + i) for i in range(50))
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0, status
        assert np.array_equal(exe(x, 5)[1], x + 5)
    """)
    env = {**os.environ, "XLAMLIR_CACHE_DIR": "off", "PYTHONPATH": str(ROOT.parent)}
    proc = subprocess.run([sys.executable, "-c", script, str(ROOT / "tests")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_same_bits(exe(x, 5)[1], x + 5)


# ---- softmax as one loop over rows ------------------------------------------------------

def _without_row_softmax() -> xm.Pipeline:
    from xlamlir.lowering.passes.row_softmax import rows_softmax

    pipeline = xm.Pipeline.default()
    return pipeline.replace("fused", [p for p in pipeline.passes("fused") if p is not rows_softmax])


def _softmax_variant(dims: tuple[int, ...], variant: str,
                     combiner: object = None) -> xm.XlaComputation:
    """A last-axis softmax with the variations a structural match may get wrong: the
    scores a temporary (written over in place), a max init that is not -inf, a sum init
    that is not 0, a scaled f, the division as a reciprocal multiply or of e * e, and the
    max, the log-sum-exp, e or x also read by other outputs."""
    b = xm.XlaBuilder("softmax_variant")
    x0 = b.parameter(0, shape(np.float32, dims))
    last = len(dims) - 1
    keep = list(range(last))
    x = b.mul(x0, b.constant(np.float32(1.5))) if "temp" in variant else x0
    m = b.reduce(x, b.constant(np.float32(0.25 if "maxinit" in variant else -np.inf)),
                 combiner or (lambda a, v: a.builder.max(a, v)), [last])
    mb = b.broadcast_in_dim(m, dims, keep)
    scaled = b.mul(x, b.constant(np.float32(0.7))) if "scale" in variant else x
    e = b.exp(b.sub(scaled, mb))
    s = b.reduce(e, b.constant(np.float32(1 if "suminit" in variant else 0)), lambda a, v: a + v,
                 [last])
    sb = b.broadcast_in_dim(s, dims, keep)
    if "recip" in variant:
        p = b.mul(e, b.div(b.constant(np.float32(1)), sb))
    elif "square" in variant:
        p = b.div(b.mul(e, e), sb)
    else:
        p = b.div(e, sb)
    outs = [p]
    outs += [m] if "max" in variant.split() else []
    outs += [b.add(b.log(s), m)] if "logsumexp" in variant else []
    outs += [e] if "exp" in variant.split() else []
    outs += [x, b.add(x, p)] if "x" in variant.split() else []
    return b.build(outs)


@pytest.mark.parametrize(("dims", "variant"), [
    ((5, 48), "temp maxinit suminit scale"), ((3, 128), "recip max logsumexp"),
    ((2, 16), "square exp"), ((4, 3, 32), "temp x"), ((300, 128), "temp max logsumexp"),
    ((2, 70, 256), "scale")])
def test_row_softmax_same_bits_as_the_generics(dims: tuple[int, ...], variant: str) -> None:
    """Whatever else reads its parts, the row loop gives the generics' bits (inf, -inf rows,
    a NaN, a -0.0 row), and numpy's values."""
    x = (np.random.default_rng(sum(dims)).standard_normal(dims) * 4).astype(np.float32)
    flat = x.reshape(-1, dims[-1])
    flat[0, 3], flat[1, :] = np.inf, -np.inf
    if flat.shape[0] > 3:
        flat[2, 5], flat[3, :] = np.nan, -0.0
    comp = _softmax_variant(dims, variant)
    got = xm.compile(comp)(x)
    for g, w in zip(got, xm.compile(comp, pipeline=_without_row_softmax())(x)):
        assert_same_bits(g, w)
    xs = x.astype(np.float64) * (1.5 if "temp" in variant else 1)
    m = np.maximum(xs.max(-1, keepdims=True), 0.25 if "maxinit" in variant else -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(xs * (0.7 if "scale" in variant else 1) - m)
        s = e.sum(-1, keepdims=True) + (1 if "suminit" in variant else 0)
        want = e * e / s if "square" in variant else e / s
    np.testing.assert_allclose(got[0], want, rtol=2e-5, atol=1e-6)


def _nan(bits: int) -> np.float32:
    return np.array([bits], np.uint32).view(np.float32)[0]


def test_row_softmax_nan_payload_follows_the_reduce_order() -> None:
    """Row 0 holds NaN A at column 16 (chunk 1: max chain 1) then NaN B at column 64 (chunk
    4: chain 0). The reduce max(acc, x) returns A (the first of the fold order), so every
    probability of the row is A; the row loop combines its chain 0 first and gives B."""
    x = np.random.default_rng(0).standard_normal((3, 128)).astype(np.float32)
    x[0, 16], x[0, 64] = _nan(0x7FC0000A), _nan(0x7FC0000B)
    comp = _softmax_variant((3, 128), "")
    got = xm.compile(comp)(x)[0]
    want = xm.compile(comp, pipeline=_without_row_softmax())(x)[0]
    assert hex(want.view(np.uint32)[0, 0]) == "0x7fc0000a"
    assert_same_bits(got, want)


def test_long_row_of_a_higher_rank_array() -> None:
    """[1, n, 1] sorted along its middle dimension with a second operand, and [n, 1] along
    dimension 0: the row viewed as 1-D, the results viewed back."""
    n = LONG_ROW + 2
    rng = np.random.default_rng(6)
    keys = rng.integers(-1000, 1000, n).astype(np.int32)
    values = rng.standard_normal(n).astype(np.float32)
    b = xm.XlaBuilder("sort_rank3")
    k = b.parameter(0, shape(np.int32, (1, n, 1)))
    v = b.parameter(1, shape(np.float32, (1, n, 1)))
    c = b.parameter(2, shape(np.float32, (n, 1)))
    both = b.sort([k, v], None, 1, True)
    comp = b.build(b.tuple([b.get_tuple_element(both, 0), b.get_tuple_element(both, 1),
                            b.sort(c, None, 0)]))
    got_k, got_v, got_c = xm.compile(comp)(keys.reshape(1, n, 1), values.reshape(1, n, 1),
                                           values.reshape(n, 1))
    order = np.argsort(keys, kind="stable")
    assert_same_bits(got_k, keys[order].reshape(1, n, 1))
    assert_same_bits(got_v, values[order].reshape(1, n, 1))
    assert_same_bits(got_c, np.sort(values).reshape(n, 1))


# ---- matmul tiles starting from zero in registers ------------------------------------------

@pytest.mark.parametrize(("m", "k", "n", "batch"), [
    (64, 0, 64, None), (128, 1, 96, None), (97, 255, 131, None), (33, 512, 17, None),
    (300, 64, 300, None), (1, 1024, 1024, None), (65, 130, 67, 3), (128, 0, 64, 2)])
def test_scheduled_matmul_exact(m: int, k: int, n: int, batch: int | None) -> None:
    """Exact integer products at odd and empty depths, a -0.0 row (sums of -0 and +0
    products are +0), with and without a bias epilogue, batched or not."""
    lead = (batch,) if batch else ()
    rng = np.random.default_rng(m + k + n)
    a = rng.integers(-3, 4, (*lead, m, k)).astype(np.float32)
    w = rng.integers(-3, 4, (*lead, k, n)).astype(np.float32)
    if k and m > 1:
        a[..., 1, :] = -0.0
    b = xm.XlaBuilder("matmul")
    x = b.parameter(0, shape(np.float32, a.shape))
    y = b.parameter(1, shape(np.float32, w.shape))
    dims = xm.DotDimensionNumbers((len(lead) + 1,), (len(lead),), tuple(range(len(lead))),
                                  tuple(range(len(lead))))
    product = b.dot_general(x, y, dims)
    comp = b.build(b.tuple([product, b.add(product, b.constant(np.float32(0.5)))]))
    plain, biased = xm.compile(comp)(a, w)
    want = (a.astype(np.float64) @ w.astype(np.float64)).astype(np.float32)
    assert_same_bits(plain, want)
    assert_same_bits(biased, want + np.float32(0.5))


# ---- FFT radix-4 passes as one loop -------------------------------------------------------

@pytest.mark.parametrize(("dims", "kind", "lengths", "targets"), [
    ((4096,), "FFT", (4096,), True), ((512, 32), "FFT", (512, 32), False),
    ((3, 4096), "RFFT", (4096,), False)])
def test_looped_fft_passes(dims: tuple[int, ...], kind: str, lengths: tuple[int, ...],
                           targets: bool) -> None:
    """Four-step transforms whose radix-4 passes run as one loop (64 x 64, 64 x 128 with a
    radix-2 pass, a 2-D transform along the non-last axis too), of a temporary that is also
    an output and of the parameter itself; numpy's values, the same bits on every target."""
    rng = np.random.default_rng(sum(dims))
    real = kind == "RFFT"
    x = rng.standard_normal(dims).astype(np.float32)
    if not real:
        x = (x + 1j * rng.standard_normal(dims)).astype(np.complex64)
    b = xm.XlaBuilder("fft")
    p = b.parameter(0, shape(x.dtype, dims))
    t = b.add(p, b.constant(x.dtype.type(1)))
    comp = b.build(b.tuple([b.fft(t, kind, list(lengths)), t, b.fft(p, kind, list(lengths))]))
    exe = xm.compile(comp)
    assert "restrict writable : memref" in exe.stages["linalg"]  # the looped passes
    f_t, t_got, f_p = on_every_target(comp, x) if targets else exe(x)
    fn = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn}[kind]
    axes = tuple(range(len(dims) - len(lengths), len(dims)))
    size = int(np.prod(lengths))
    tolerance = 1e-5 * np.sqrt(size) * (1 / size if kind == "IFFT" else 1) * 8
    xs = x.astype(np.float64 if real else np.complex128)
    np.testing.assert_allclose(f_t, fn(xs + 1, axes=axes), atol=tolerance)
    np.testing.assert_allclose(f_p, fn(xs, axes=axes), atol=tolerance)
    assert_same_bits(t_got, x + x.dtype.type(1))


# ---- unrolled row loops -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_sums_around_the_unroll_threshold(dtype: object) -> None:
    """Row sums and layer-norm-like statistics of rows whose vector loop has 31, 32, 33 and
    65 trips (and a tail): rounding sums of normal values must have the same bits on every
    target (the order is the library's, not the vector width's), exact sums numpy's."""
    comps, inputs = [], []
    widths = (16 * 31, 16 * 32, 16 * 33 + 5, 16 * 65) if dtype == np.float32 else (16 * 32, 16 * 65)
    for cols in widths:
        b = xm.XlaBuilder("rows")
        x = b.parameter(0, shape(dtype, (3, cols)))
        total = b.reduce(x, b.constant(np.dtype(dtype).type(0)), lambda a, v: a + v, [1])
        mean = b.div(total, b.constant(np.dtype(dtype).type(cols)))
        centered = b.sub(x, b.broadcast_in_dim(mean, (3, cols), [0]))
        var = b.reduce(b.mul(centered, centered), b.constant(np.dtype(dtype).type(0)),
                       lambda a, v: a + v, [1])
        comps.append(b.build(b.tuple([total, var])))
        inputs.append(np.random.default_rng(cols).standard_normal((3, cols)).astype(dtype))
    for comp, x in zip(comps, inputs):
        total, var = on_every_target(comp, x)
        np.testing.assert_allclose(total, x.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
        exact = np.round(x * 4)
        exact[1, 7] = -0.0
        total, _ = xm.compile(comp)(exact)
        assert_same_bits(total, exact.astype(np.float64).sum(1).astype(dtype))


# ---- background cache writes --------------------------------------------------------------

def test_concurrent_compiles_through_the_disk_cache(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Four threads compile the same three programs at once with the cache on (the writes
    queued behind each other, some keys written twice); then the in-memory cache is
    dropped and every program is a hit with the same bits, also on the C path."""
    from xlamlir.runtime import disk_cache
    from xlamlir.runtime.cached_library import linker
    from xlamlir.runtime.compiler import clear_cache

    if linker() is None:
        pytest.skip("no linker on PATH")
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("XLAMLIR_CACHE_MAX_MB", "XLAMLIR_DUMP_PASSES", "XLAMLIR_PASS_TIMING",
                 "XLAMLIR_STAGE_LOCATIONS", "XLAMLIR_KEEP_OBJECT", "XLAMLIR_TARGET_CPU"):
        monkeypatch.delenv(name, raising=False)
    clear_cache()
    programs = []
    for k in range(3):
        b = xm.XlaBuilder(f"cached{k}")
        x = b.parameter(0, shape(np.float32, (40 + k,)))
        b.tuple([b.exp(x) * np.float32(k + 1), b.reduce(x, b.constant(np.float32(0)),
                                                         lambda a, v: a + v, [0])])
        programs.append(b.build())
    args = [np.linspace(-2, 2, 40 + k, dtype=np.float32) for k in range(3)]
    results: dict[tuple[int, int], object] = {}
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for k in range(3):
                results[t, k] = xm.compile(programs[(k + t) % 3])(args[(k + t) % 3])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        disk_cache.flush()
        clear_cache()
        for k, (comp, arg) in enumerate(zip(programs, args)):
            exe = xm.compile(comp)
            assert exe.compile_stats["disk_cache"] == "hit"
            for _ in range(3):
                got = exe(arg)
                for (t, j), want in results.items():
                    if (j + t) % 3 == k:
                        for g, w in zip(got, want):
                            assert_same_bits(g, w)
            np.testing.assert_allclose(got[0], np.exp(arg) * (k + 1), rtol=1e-6)
    finally:
        disk_cache.flush()
        clear_cache()


# ---- while loops: hoisted temporaries, state updated in place ------------------------------

def _loop(name: str, step: object, state: list[np.ndarray], trips: int) -> xm.XlaComputation:
    """A while loop running `step` (new state from the old one) `trips` times."""
    b = xm.XlaBuilder(name)
    params = [b.parameter(i, shape(a.dtype, a.shape)) for i, a in enumerate(state)]

    def cond(st: xm.XlaOp) -> xm.XlaOp:
        bb = st.builder
        return bb.lt(bb.get_tuple_element(st, 0), bb.constant(np.int32(trips)))

    def body(st: xm.XlaOp) -> xm.XlaOp:
        bb = st.builder
        values = [bb.get_tuple_element(st, i) for i in range(len(state) + 1)]
        return bb.tuple([values[0] + np.int32(1), *step(bb, values[1:])])

    out = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), *params]))
    return b.build(b.tuple([b.get_tuple_element(out, i + 1) for i in range(len(state))]))


def _rnn_step(w: np.ndarray) -> object:
    def step(bb: xm.XlaBuilder, s: list[xm.XlaOp]) -> list[xm.XlaOp]:
        h = bb.tanh(bb.add(bb.dot(bb.constant(w), s[0]), s[1]))
        return [s[1], h]  # the new state swapped with the old: no buffer may be shared
    return step


def _softmax_step(bb: xm.XlaBuilder, s: list[xm.XlaOp]) -> list[xm.XlaOp]:
    return [bb.add(_softmax(bb, s[0], np.float32), s[1]), s[0]]


@pytest.mark.parametrize("case", ["swap_add", "rotate3", "rnn_swap", "softmax_swap"])
def test_loop_states_that_trade_places(case: str) -> None:
    """Each step's new values take the places of older ones (a <- b, b <- f(a, b)): a
    temporary allocated once before the loop or an update written in the state's buffer
    must never overwrite a value a later step still reads. Against the reference."""
    a = np.linspace(0, 1, 1000, dtype=np.float32)
    c = np.linspace(1, 2, 1000, dtype=np.float32)
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32) * 0.1
    h = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    big = np.linspace(-1, 1, 300 * 256, dtype=np.float32).reshape(300, 256)
    comp, state = {
        "swap_add": lambda: (_loop(case, lambda bb, s: [s[1], bb.add(s[0], s[1])], [a, c], 6),
                             [a, c]),
        "rotate3": lambda: (_loop(case, lambda bb, s: [s[1], s[2], bb.add(
            bb.exp(s[0]) * np.float32(0.1), s[2])], [a, c, a * 2], 5), [a, c, a * 2]),
        "rnn_swap": lambda: (_loop(case, _rnn_step(w), [h, h * 2], 7), [h, h * 2]),
        "softmax_swap": lambda: (_loop(case, _softmax_step, [big, big * 0.5], 4), [big, big * 0.5]),
    }[case]()
    got = on_every_target(comp, *state) if case == "rnn_swap" else xm.compile(comp)(*state)
    for g, r in zip(got, evaluate(comp, state)):
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=2e-6)


# ---- select_and_scatter as vector loops ---------------------------------------------------

def _select_and_scatter(dtype: object, direction: str, dims: tuple[int, ...], window: tuple[int, ...],
                        strides: tuple[int, ...], padding: tuple[tuple[int, int], ...]
                        ) -> tuple[xm.XlaComputation, tuple[int, ...]]:
    b = xm.XlaBuilder("select_and_scatter")
    x = b.parameter(0, shape(dtype, dims))
    out = tuple((d + lo + hi - w) // s + 1 for d, w, s, (lo, hi) in zip(dims, window, strides, padding))
    source = b.parameter(1, shape(dtype, out))
    b.select_and_scatter(x, lambda p, q: p.builder.compare(p, q, direction), window, strides,
                         padding, source, b.constant(np.dtype(dtype).type(0)), lambda p, q: p + q)
    return b.build(), out


@pytest.mark.parametrize(("dtype", "direction", "dims", "strides", "padding"), [
    (np.float32, "GT", (2, 9, 11, 32), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0))),
    (np.float64, "GE", (3, 5, 7, 16), (1, 1, 1, 1), ((0, 0), (2, 2), (0, 3), (0, 0))),
    (np.float32, "LE", (1, 8, 8, 17), (1, 2, 2, 1), ((0, 0), (0, 0), (0, 0), (0, 0))),
    (np.uint8, "LT", (2, 6, 6, 48), (1, 1, 1, 1), ((0, 0), (1, 1), (1, 1), (0, 0))),
    (np.int64, "GT", (1, 7, 9, 16), (1, 3, 2, 1), ((0, 0), (1, 0), (0, 2), (0, 0)))])
def test_select_and_scatter_ties_nans_and_padding(dtype: object, direction: str,
                                                  dims: tuple[int, ...], strides: tuple[int, ...],
                                                  padding: tuple[tuple[int, int], ...]) -> None:
    """Channels-last 3x3 windows over values 0..2 (ties everywhere: GE/LE keep the earlier
    cell, GT/LT take the later), NaN and -0.0, overlapping windows (their sources added in
    row-major order) and padding: the reference's bits, on every target for f32."""
    comp, out = _select_and_scatter(dtype, direction, dims, (1, 3, 3, 1), strides, padding)
    rng = np.random.default_rng(sum(dims))
    x = rng.integers(0, 3, dims).astype(dtype)
    if np.dtype(dtype).kind == "f":
        flat = x.reshape(-1)
        flat[rng.random(flat.size) < 0.03] = np.nan
        flat[rng.random(flat.size) < 0.1] = -0.0
    source = rng.integers(1, 5, out).astype(dtype)
    got = on_every_target(comp, x, source) if dtype == np.float32 else xm.compile(comp)(x, source)
    assert_same_bits(got, evaluate(comp, [x, source]))


# ---- convolution accumulators starting from zero in registers ----------------------------

@pytest.mark.parametrize(("n", "c", "o", "spatial", "window", "strides", "pads", "dilation", "layouts"), [
    (2, 32, 32, (33, 31), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), (NHWC, HWIO, NHWC)),
    (2, 64, 48, (17, 19), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (NHWC, HWIO, NHWC)),
    (1, 32, 70, (30, 30), (3, 3), (1, 1), ((0, 0), (0, 0)), (2, 2), (NHWC, HWIO, NHWC)),
    (1, 32, 32, (31, 31), (3, 3), (2, 2), ((4, 3), (3, 5)), (1, 1), (NCHW, OIHW, NCHW))])
def test_scheduled_convolutions_exact(n: int, c: int, o: int, spatial: tuple[int, int],
                                      window: tuple[int, int], strides: tuple[int, int],
                                      pads: tuple[tuple[int, int], ...], dilation: tuple[int, int],
                                      layouts: tuple[tuple[int, ...], ...]) -> None:
    """Odd sizes (peeled pixel and channel tiles), an image of -0.0 (its sums are +0), a
    dilated window with a bias epilogue: the definition's bits, on every target."""
    lp, kp, op_ = layouts
    ldims, kdims = [0] * 4, [0] * 4
    for i, pos in enumerate(lp):
        ldims[pos] = (n, c, *spatial)[i]
    for i, pos in enumerate(kp):
        kdims[pos] = (o, c, *window)[i]
    b = xm.XlaBuilder("conv")
    x = b.parameter(0, shape(np.float32, tuple(ldims)))
    w = b.parameter(1, shape(np.float32, tuple(kdims)))
    y = b.conv_general_dilated(x, w, strides, pads, rhs_dilation=dilation,
                               dimension_numbers=_dn(lp, kp, op_))
    comp = b.build(b.tuple([y, b.add(y, b.constant(np.float32(0.5)))]))
    rng = np.random.default_rng(n + c + o)
    xv = rng.integers(-3, 4, ldims).astype(np.float32)
    wv = rng.integers(-3, 4, kdims).astype(np.float32)
    xv[0] = -0.0
    want = direct_conv(xv, wv, strides, pads, (1, 1), dilation, lp, kp, op_).astype(np.float32)
    got, biased = on_every_target(comp, xv, wv)
    assert_same_bits(got, want)
    assert_same_bits(biased, want + np.float32(0.5))


# ---- loop-invariant parameters copied to aligned buffers ---------------------------------

def _misaligned(a: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `a` whose data starts `offset` bytes after a 64-byte boundary."""
    buffer = np.zeros(a.nbytes + 128, np.uint8)
    start = (-buffer.ctypes.data) % 64 + offset
    view = buffer[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    view[...] = a
    return view


@pytest.mark.parametrize("trips", [0, 5])
def test_loop_invariant_parameter_also_returned(trips: int) -> None:
    """A 16 KB matrix read whole by every step of an RNN (copied to an aligned buffer when
    misaligned, freed after the loop) that is also the loop's output and read after it:
    the outputs hold the parameter's values at every offset, with 0 or 5 trips."""
    n = 64
    w = (np.random.default_rng(0).standard_normal((n, n)) * 0.1).astype(np.float32)
    h = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    b = xm.XlaBuilder("rnn_invariant")
    pw = b.parameter(0, shape(np.float32, (n, n)))
    ph = b.parameter(1, shape(np.float32, (n,)))

    def cond(st: xm.XlaOp) -> xm.XlaOp:
        bb = st.builder
        return bb.lt(bb.get_tuple_element(st, 0), bb.constant(np.int32(trips)))

    def body(st: xm.XlaOp) -> xm.XlaOp:
        bb = st.builder
        i, hh, ww = (bb.get_tuple_element(st, k) for k in range(3))
        return bb.tuple([i + np.int32(1), bb.tanh(bb.dot(ww, hh)), ww])

    out = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), ph, pw]))
    comp = b.build(b.tuple([b.get_tuple_element(out, 1), b.get_tuple_element(out, 2),
                            b.add(pw, pw)]))
    exe = xm.compile(comp)
    want = evaluate(comp, [w, h])
    for offset in (0, 4, 16, 32, 4):  # the last calls on the C path
        got_h, got_w, doubled = exe(_misaligned(w, offset), h)
        np.testing.assert_allclose(got_h, want[0], rtol=1e-5, atol=1e-6)
        assert_same_bits(got_w, w)
        assert_same_bits(doubled, w + w)


def test_select_and_scatter_batch_of_one_split_by_columns() -> None:
    """One image (the cores split the minor dimension in blocks of vectors): 80 channels,
    a window and stride along every spatial dimension, against the reference."""
    comp, out = _select_and_scatter(np.float32, "GE", (1, 7, 9, 80), (1, 3, 3, 1), (1, 2, 2, 1),
                                    ((0, 0), (1, 1), (1, 1), (0, 0)))
    rng = np.random.default_rng(9)
    x = rng.integers(0, 3, (1, 7, 9, 80)).astype(np.float32)
    x.reshape(-1)[::37] = np.nan
    source = rng.integers(1, 5, out).astype(np.float32)
    assert_same_bits(on_every_target(comp, x, source), evaluate(comp, [x, source]))


# ---- lane folds of matrix-vector products as register transposes -------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
def test_matrix_vector_lane_folds(dtype: object) -> None:
    """Matrix-vector products of 16..45 rows at depths 64 and 144 (folded as 16 x 16
    transposes): exact sums of small integers as numpy's, a NaN in one row only in that
    row, an inf row, the same bits on every target."""
    for rows, depth in [(16, 64), (45, 144), (33, 64)]:
        rng = np.random.default_rng(rows + depth)
        a = rng.integers(-4, 5, (rows, depth)).astype(dtype)
        v = rng.integers(-4, 5, depth).astype(dtype)
        a[3, 17] = np.nan
        a[5, :] = np.inf
        v[np.flatnonzero(v == 0)] = 1  # inf * 0 would be a NaN of its own
        b = xm.XlaBuilder("matvec")
        pa = b.parameter(0, shape(dtype, a.shape))
        pv = b.parameter(1, shape(dtype, v.shape))
        comp = b.build(b.dot(pa, pv))
        got = on_every_target(comp, a, v)
        with np.errstate(invalid="ignore"):
            want = (a.astype(np.float64) @ v.astype(np.float64)).astype(dtype)
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


# ---- fork --------------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_compile_in_a_forked_child() -> None:
    """The parent compiled (this thread's reusable context exists), then forks; the child
    compiles a new program and runs it (the disk cache's writer supports forked children,
    runtime/cache_writer.py). A child that hangs is killed by an alarm."""
    b = xm.XlaBuilder("before_fork")
    x = b.parameter(0, shape(np.float32, (5,)))
    b.exp(x)
    xm.compile(b.build())(np.zeros(5, np.float32))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        import signal

        signal.alarm(5)
        try:
            b = xm.XlaBuilder("in_child")
            y = b.parameter(0, shape(np.float32, (6,)))
            b.mul(y, y)
            ok = np.array_equal(xm.compile(b.build())(np.arange(6, dtype=np.float32)),
                                np.arange(6, dtype=np.float32) ** 2)
        finally:
            os._exit(0 if "ok" in locals() and ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"child: {os.waitstatus_to_exitcode(status)}"


def test_long_row_skewed_buckets() -> None:
    """One compiled long-row sort on rows whose keys all fall in one bucket (all equal, all
    NaN, -0.0 and +0.0 only), half in one bucket, a tiny range, sorted and reversed."""
    n = LONG_ROW + 5
    rng = np.random.default_rng(7)
    normal = rng.standard_normal(n).astype(np.float32)
    rows = [np.full(n, 3.0, np.float32), np.full(n, np.nan, np.float32),
            np.where(rng.random(n) < 0.5, np.float32(-0.0), np.float32(0.0)),
            np.where(rng.random(n) < 0.5, np.float32(1.0), normal),
            (1 + rng.integers(0, 4, n) * np.finfo(np.float32).eps).astype(np.float32),
            np.sort(normal), np.sort(normal)[::-1].copy()]
    b = xm.XlaBuilder("sort_skewed")
    b.sort(b.parameter(0, shape(np.float32, (n,))))
    exe = xm.compile(b.build())
    for x in rows:
        canonical = np.where(np.isnan(x), np.float32(np.nan), x)
        assert_same_bits(exe(x), x[np.argsort(_total_key(canonical), kind="stable")])


@pytest.mark.parametrize("k", [1023, 1024, 1025, 2048])
def test_matmul_depths_around_one_cache_block(k: int) -> None:
    """Depths around the AVX-512 tiles' 1024-deep cache block (one block: accumulators from
    zero in registers; two blocks: the fill kept): exact sums, on every target."""
    rng = np.random.default_rng(k)
    a = rng.integers(-2, 3, (67, k)).astype(np.float32)
    w = rng.integers(-2, 3, (k, 50)).astype(np.float32)
    b = xm.XlaBuilder("deep")
    b.dot(b.parameter(0, shape(np.float32, a.shape)), b.parameter(1, shape(np.float32, w.shape)))
    got = on_every_target(b.build(), a, w)
    assert_same_bits(got, (a.astype(np.float64) @ w.astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize("cols", [48, 256, 1040])
def test_row_max_nan_follows_the_documented_fold_order(cols: int) -> None:
    """docs/numerics.md: a reduce max(acc, x) returns the first NaN of its fold order, which
    for a row of 64 or more (a multiple of 16) is lane by lane (lane j: j, j + 16, ...),
    lanes 0..15 in turn; shorter rows fold in sequence. Whatever loop computes the rows."""
    x = np.random.default_rng(cols).standard_normal((3, cols)).astype(np.float32)
    x[0, 17], x[0, 32] = _nan(0x7FC000A1), _nan(0x7FC000B2)  # lane 1 first, lane 0 later
    x[1, 33], x[1, 1] = _nan(0x7FC000C3), _nan(0x7FC000D4)  # lane 1 both
    b = xm.XlaBuilder("row_max")
    b.reduce(b.parameter(0, shape(np.float32, x.shape)), b.constant(np.float32(-np.inf)),
             lambda a, v: a.builder.max(a, v), [1])
    got = on_every_target(b.build(), x).view(np.uint32)
    lanes = cols >= 64 and cols % 16 == 0
    assert [hex(v) for v in got[:2]] == ([hex(0x7FC000B2) if lanes else hex(0x7FC000A1),
                                          hex(0x7FC000D4)])


def test_threads_share_executables_with_per_call_buffers() -> None:
    """Six threads call one RNN (its matrix misaligned differently on every call: the
    aligned copy is per call) and one in-place softmax row loop at once."""
    n = 64
    b = xm.XlaBuilder("rnn_w")
    pw = b.parameter(0, shape(np.float32, (n, n)))
    ph = b.parameter(1, shape(np.float32, (n,)))
    out = b.while_(
        lambda s: s.builder.lt(s.builder.get_tuple_element(s, 0), s.builder.constant(np.int32(6))),
        lambda s: s.builder.tuple([s.builder.get_tuple_element(s, 0) + np.int32(1),
                                   s.builder.tanh(s.builder.dot(s.builder.get_tuple_element(s, 2),
                                                                s.builder.get_tuple_element(s, 1))),
                                   s.builder.get_tuple_element(s, 2)]),
        b.tuple([b.constant(np.int32(0)), ph, pw]))
    rnn = xm.compile(b.build(b.get_tuple_element(out, 1)))
    softmax = xm.compile(_softmax_variant((300, 128), "temp max logsumexp"))
    errors: list[tuple[str, int, int]] = []

    def work(k: int) -> None:
        rng = np.random.default_rng(k)
        w = (rng.standard_normal((n, n)) * 0.1).astype(np.float32)
        h = rng.standard_normal(n).astype(np.float32)
        x = rng.standard_normal((300, 128)).astype(np.float32)
        want, want_softmax = rnn(w.copy(), h), softmax(x)
        for i in range(60):
            if not np.array_equal(rnn(_misaligned(w, (i * 4) % 64), h), want):
                errors.append(("rnn", k, i))
                return
            if i % 10 == 0 and not all(np.array_equal(a, c) for a, c in zip(softmax(x), want_softmax)):
                errors.append(("softmax", k, i))
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_parallel_loops_capture_values_from_outside() -> None:
    """Parallel loops (64K elements) inside a while body reading the loop's counter, a
    scalar state, a reduction made before the loop and a dynamic index (what the outlined
    bodies must capture), then a row max over the result: the reference's values."""
    n = 1 << 16
    b = xm.XlaBuilder("captures")
    x = b.parameter(0, shape(np.float32, (n,)))
    s = b.parameter(1, shape(np.float32, ()))
    k = b.parameter(2, shape(np.int32, ()))
    total = b.reduce(x, b.constant(np.float32(0)), lambda a, v: a + v, [0])

    def body(st: xm.XlaOp) -> xm.XlaOp:
        bb = st.builder
        i, v, sc, tt = (bb.get_tuple_element(st, j) for j in range(4))
        fi = bb.convert_element_type(i, xm.F32)
        nv = bb.add(bb.mul(v, bb.broadcast(sc, (n,))), bb.broadcast(bb.add(fi, tt), (n,)))
        nv = bb.dynamic_update_slice(nv, bb.broadcast(fi, (7,)), [i])
        return bb.tuple([i + np.int32(1), bb.tanh(nv), bb.mul(sc, bb.constant(np.float32(0.9))),
                         bb.div(tt, bb.constant(np.float32(n)))])

    out = b.while_(lambda st: st.builder.lt(st.builder.get_tuple_element(st, 0),
                                            st.builder.constant(np.int32(4))),
                   body, b.tuple([b.constant(np.int32(0)), x, s, total]))
    r = b.get_tuple_element(out, 1)
    square = b.reshape(r, (256, 256))
    m = b.reduce(square, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [1])
    comp = b.build(b.tuple([r, b.sub(square, b.broadcast_in_dim(m, (256, 256), [0])),
                            b.dynamic_slice(x, [k], [5])]))
    args = [np.linspace(-1, 1, n, dtype=np.float32), np.float32(0.7), np.int32(n - 3)]
    for g, w in zip(on_every_target(comp, *args), evaluate(comp, args)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_parallel_programs_outlive_each_other() -> None:
    """Programs with parallel loops (the process's shared dispatcher, or their own copy for
    a process's first ones) compiled, partly dropped and collected, then more compiled from
    three threads at once: every program still alive computes its own result."""
    import gc

    from xlamlir.runtime.compiler import clear_cache

    n = 1 << 18
    x = np.linspace(-1, 1, n, dtype=np.float32)

    def program(k: int) -> xm.XlaComputation:
        b = xm.XlaBuilder(f"parallel{k}")
        y = b.tanh(b.mul(b.parameter(0, shape(np.float32, (n,))), b.constant(np.float32(k + 1))))
        b.tuple([y, b.reduce(y, b.constant(np.float32(0)), lambda a, v: a + v, [0])])
        return b.build()

    def right(exe: xm.Executable, k: int) -> bool:
        y, total = exe(x)
        want = np.tanh(x.astype(np.float64) * (k + 1))
        return np.allclose(y, want, atol=1e-6) and abs(float(total) - want.sum()) < 0.1

    exes = {k: xm.compile(program(k)) for k in range(5)}
    assert all(right(e, k) for k, e in exes.items())
    for k in (0, 1, 3):
        del exes[k]
    clear_cache()
    gc.collect()
    results: list[bool] = []

    def work(t: int) -> None:
        results.append(right(xm.compile(program(5 + t)), 5 + t))
        results.append(right(exes[4], 4))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    clear_cache()
    gc.collect()
    assert results == [True] * 6 and right(exes[2], 2) and right(xm.compile(program(0)), 0)
