"""Softmax as one loop over rows (lowering/passes/row_softmax.py): one exp per element, no
temporary, one parallel loop; the same bits as the five generics it replaces (the default
pipeline without the pass), against numpy at odd sizes, with NaN/inf/-inf/-0.0 rows, in
every float type (only f32 takes the loop) and on every target CPU."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from targets_support import TARGETS, target_options
from test_in_place import attention, reference_attention

import xlamlir as xm
from xlamlir.lowering.passes.row_softmax import rows_softmax

DTYPES = {"f32": (xm.F32, np.float32), "f64": (xm.F64, np.float64),
          "f16": (xm.F16, np.float16), "bf16": (xm.BF16, ml_dtypes.bfloat16)}


def softmax(shape: tuple[int, ...], dtype: str = "f32", scale: float | None = None,
            **options: object) -> xm.Executable:
    """softmax(x [* scale]) along the last axis, as the benchmark writes it."""
    et, nt = DTYPES[dtype]
    b = xm.XlaBuilder("softmax")
    x = b.parameter(0, xm.Shape.array(et, shape))
    if scale is not None:
        x = b.mul(x, b.constant(nt(scale)))
    lead = list(range(len(shape) - 1))
    m = b.reduce(x, b.constant(nt(-np.inf)), lambda a, v: a.builder.max(a, v), [len(shape) - 1])
    e = b.exp(b.sub(x, b.broadcast_in_dim(m, shape, lead)))
    s = b.reduce(e, b.constant(nt(0)), lambda a, v: a + v, [len(shape) - 1])
    b.div(e, b.broadcast_in_dim(s, shape, lead))
    return xm.compile(b.build(), **options)


FOUR_CHAINS = "-> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)"


def without_pass() -> xm.Pipeline:
    pipeline = xm.Pipeline.default()
    return pipeline.replace("fused", [p for p in pipeline.passes("fused") if p is not rows_softmax])


def reference(x: np.ndarray, scale: float | None = None) -> np.ndarray:
    x = x.astype(np.float64) * (1 if scale is None else scale)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def edge_rows(shape: tuple[int, ...], seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 4
    rows = x.reshape(-1, shape[-1])
    edits = [
        lambda r: r.__setitem__(1, np.nan),  # one NaN: the row is NaN
        lambda r: r.__setitem__(slice(None), -np.inf),  # all -inf: -inf - -inf is NaN
        lambda r: r.__setitem__(3, np.inf),  # inf - inf: NaN
        lambda r: r.__setitem__(slice(None, None, 2), -np.inf),  # exp(-inf) = 0, rest finite
        lambda r: r.__setitem__(slice(None), 88.0),  # exp would overflow without the max
        lambda r: r.__setitem__(slice(None), -0.0),  # all equal: 1/n each
    ]
    for i, edit in enumerate(edits[:rows.shape[0]]):
        edit(rows[i])
    return x


def test_pass_is_in_the_fused_stage() -> None:
    assert rows_softmax in xm.Pipeline.default().passes("fused")


def test_one_loop_one_exp_no_temporary() -> None:
    exe = softmax((1024, 1024))
    fused = exe.stages["fused"]
    assert "linalg.generic" not in fused
    assert fused.count("math.exp") == 1 and fused.count("scf.forall (") == 1
    assert "memref.alloc" not in exe.stages["bufferized"]
    vectorized = exe.stages["vectorized"]
    assert re.findall(r"math\.exp %\S+ : (\S+)", vectorized) == ["vector<16xf32>"]
    assert vectorized.count("arith.divf") == 1 and "vector<16xf32>" in vectorized
    assert FOUR_CHAINS in fused  # the max in interleaved accumulators


def test_attention_softmax_is_one_loop_over_its_scores() -> None:
    exe = attention(8, 512, 64)
    assert exe.stages["fused"].count("math.exp") == 1
    bufferized = exe.stages["bufferized"]
    assert len(re.findall(r"memref\.alloc\(\)[^\n]*memref<8x512x512xf32>", bufferized)) == 1
    assert re.search(r"scf\.forall \(%\w+, %\w+\) in \(8, 512\)", bufferized)


# Chunks of 16 per row: 64 (four max chains), 5 (one), 6 (two); [7, 48] is not lane-split
# by reduce.py and keeps the generics.
@pytest.mark.parametrize("shape", [(1024, 1024), (7, 64), (1, 64), (5, 3, 64), (33, 80), (9, 96),
                                   (7, 48)])
def test_same_bits_as_the_generics_and_close_to_numpy(shape: tuple[int, ...]) -> None:
    x = edge_rows(shape, sum(shape))
    got = np.asarray(softmax(shape)(x))
    b = xm.XlaBuilder("softmax")  # the same computation through the generics
    old = np.asarray(xm.compile(_same(shape, b), pipeline=without_pass())(x))
    nan = np.isnan(old)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), old[~nan].view(np.uint32))
    np.testing.assert_allclose(got, reference(x), rtol=2e-6, atol=1e-7, equal_nan=True)


def _same(shape: tuple[int, ...], b: xm.XlaBuilder) -> xm.XlaComputation:
    x = b.parameter(0, xm.Shape.array(xm.F32, shape))
    lead = list(range(len(shape) - 1))
    m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v), [len(shape) - 1])
    e = b.exp(b.sub(x, b.broadcast_in_dim(m, shape, lead)))
    s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [len(shape) - 1])
    b.div(e, b.broadcast_in_dim(s, shape, lead))
    return b.build()


@pytest.mark.parametrize(("shape", "taken"), [((64, 512), True), ((3, 64), True), ((8, 40), False),
                                              ((4, 8), False)])
def test_parallel_and_sequential_rows(shape: tuple[int, int], taken: bool) -> None:
    exe = softmax(shape)
    fused = exe.stages["fused"]
    assert ("linalg.generic" not in fused) == taken
    if taken:  # a parallel loop over the rows when there is enough work
        assert ("scf.forall (" in fused) == (shape[0] * shape[1] >= 1 << 15)
    x = edge_rows(shape, 7)
    np.testing.assert_allclose(exe(x), reference(x), rtol=2e-6, atol=1e-7, equal_nan=True)


def test_scaled_softmax() -> None:
    # f = exp(x * scale - max): the division's body starts with the same two ops.
    # The max chains combine their accumulators without scaling them again (a softmax is
    # shift-invariant: only the bits show a wrong max).
    exe = softmax((16, 256), scale=0.125)
    assert exe.stages["fused"].count("math.exp") == 1
    assert FOUR_CHAINS in exe.stages["fused"]
    x = edge_rows((16, 256), 3)
    got = np.asarray(exe(x))
    np.testing.assert_allclose(got, reference(x, 0.125), rtol=2e-6, atol=1e-7, equal_nan=True)
    old = np.asarray(softmax((16, 256), scale=0.125, pipeline=without_pass())(x))
    nan = np.isnan(old)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), old[~nan].view(np.uint32))


@pytest.mark.parametrize("dtype", ["f64", "f16", "bf16"])
def test_other_float_types_keep_the_generics(dtype: str) -> None:
    exe = softmax((6, 64), dtype)
    assert "linalg.generic" in exe.stages["fused"]
    nt = DTYPES[dtype][1]
    x = np.random.default_rng(1).standard_normal((6, 64)).astype(nt)
    x[1, 4] = np.nan
    x[2, :] = -np.inf
    tolerance = {"f64": 1e-12, "f16": 1e-2, "bf16": 2e-2}[dtype]
    got = np.asarray(exe(x)).astype(np.float64)
    np.testing.assert_allclose(got, reference(x.astype(np.float64)), rtol=tolerance, atol=tolerance,
                               equal_nan=True)


@pytest.mark.parametrize("target", TARGETS)
def test_same_bits_on_every_target(target: str) -> None:
    x = edge_rows((24, 96), 11)
    host = np.asarray(softmax((24, 96))(x))
    got = np.asarray(softmax((24, 96), **target_options(target))(x))
    np.testing.assert_array_equal(got.view(np.uint32), host.view(np.uint32))


def test_attention_through_the_loop_matches_numpy() -> None:
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((2, 48, 16)).astype(np.float32) for _ in range(3))
    q[0, 3, :] = np.nan
    np.testing.assert_allclose(attention(2, 48, 16)(q, k, v), reference_attention(q, k, v),
                               rtol=1e-5, atol=1e-6, equal_nan=True)


def test_rounding_first_combiner_keeps_the_order() -> None:
    # The same structure with a sum where the max was: its lanes accumulate in one chain,
    # chunk by chunk as the generic does (interleaving would round differently).
    shape = (16, 256)
    b = xm.XlaBuilder("sum_shift")
    x = b.parameter(0, xm.Shape.array(xm.F32, shape))
    m = b.reduce(x, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    e = b.exp(b.sub(x, b.broadcast_in_dim(m, shape, [0])))
    s = b.reduce(e, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    b.div(e, b.broadcast_in_dim(s, shape, [0]))
    computation = b.build()
    exe = xm.compile(computation)
    assert "linalg.generic" not in exe.stages["fused"]
    x = (np.random.default_rng(4).standard_normal(shape) * 0.1).astype(np.float32)
    old = np.asarray(xm.compile(computation, pipeline=without_pass())(x))
    np.testing.assert_array_equal(np.asarray(exe(x)).view(np.uint32), old.view(np.uint32))


def test_attention_same_bits_as_the_generics() -> None:
    # The in-place form (rows read from the scores buffer before being overwritten).
    rng = np.random.default_rng(10)
    q, k, v = (rng.standard_normal((3, 64, 16)).astype(np.float32) for _ in range(3))
    q[1, 5, :] = np.inf
    exe = attention(3, 64, 16)
    assert exe.stages["fused"].count("math.exp") == 1
    got = np.asarray(exe(q, k, v))
    old = np.asarray(attention(3, 64, 16, pipeline=without_pass())(q, k, v))
    nan = np.isnan(old)
    assert nan.any()
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), old[~nan].view(np.uint32))


def test_jax_softmax_takes_the_row_loop() -> None:
    jax = pytest.importorskip("jax")
    x = edge_rows((256, 512), 12)
    plain = lambda v: jax.nn.softmax(v, axis=-1)  # noqa: E731
    scaled = lambda v: jax.nn.softmax(v * np.float32(0.125), axis=-1)  # noqa: E731
    for fn in (plain, scaled):
        exe = xm.compile(xm.jit(fn).lower(x))
        fused = exe.stages["fused"]
        assert "linalg.generic" not in fused and fused.count("math.exp") == 1
        np.testing.assert_allclose(exe(x), np.asarray(fn(x)), rtol=2e-6, atol=1e-7, equal_nan=True)
