"""Tests of dot_general(..., algorithm=...): each preset against a numpy emulation of XLA's
definition (dot_algorithm_rewriter.cc: bf16 operands rounded to nearest even, tf32 ones
truncated, f32 split into truncated parts whose partial dots are summed smallest first,
NaN from the low parts replaced by zero), and the operand/result types each accepts.

The emulation rounds every partial dot to f32 once from float64; the library
accumulates in f32, so results agree to a few f32 ulps of sum(|x| |y|).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import run

import xlamlir as xm

BF16 = np.dtype(ml_dtypes.bfloat16)
MATMUL = xm.DotDimensionNumbers((1,), (0,))
MASK = {"bf16": 0xFFFF0000, "tf32": 0xFFFFE000}


def trunc(x: np.ndarray, precision: str) -> np.ndarray:
    return (x.view(np.uint32) & np.uint32(MASK[precision])).view(np.float32)


def bf16(x: np.ndarray) -> np.ndarray:
    return x.astype(BF16).astype(np.float32)


def pdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def split(x: np.ndarray, precision: str, count: int) -> dict[str, np.ndarray]:
    parts = {"hi": trunc(x, precision)}
    with np.errstate(invalid="ignore"):
        rest = x - parts["hi"]
        if count == 3:
            parts["mid"] = trunc(rest, precision)
            rest = rest - parts["mid"]
    parts["lo"] = bf16(rest) if precision == "bf16" else trunc(rest, precision)
    return parts


TERMS = {3: [("lo", "hi"), ("hi", "lo")],
         6: [("mid", "mid"), ("hi", "lo"), ("lo", "hi"), ("hi", "mid"), ("mid", "hi")],
         9: [("lo", "lo"), ("lo", "mid"), ("mid", "lo"), ("mid", "mid"), ("hi", "lo"), ("lo", "hi"),
             ("hi", "mid"), ("mid", "hi")]}


def emulate(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if name in ("F32_F32_F32",):
        return pdot(x, y)
    if name == "BF16_BF16_F32":
        return pdot(bf16(x), bf16(y))
    if name == "TF32_TF32_F32":
        return pdot(trunc(x, "tf32"), trunc(y, "tf32"))
    precision = "tf32" if name.startswith("TF32") else "bf16"
    n = int(name.rsplit("X", 1)[1])
    xs, ys = split(x, precision, 2 if n == 3 else 3), split(y, precision, 2 if n == 3 else 3)
    low = None
    for a, b in TERMS[n]:
        term = pdot(xs[a], ys[b])
        low = term if low is None else low + term
    low = np.where(np.isnan(low), np.float32(0), low)
    return low + pdot(xs["hi"], ys["hi"])


def dot(x, y, algorithm, preferred=None):
    return run(lambda b, p, q: b.dot_general(p, q, MATMUL, preferred_element_type=preferred,
                                             algorithm=algorithm), x, y)


F32_ALGORITHMS = ["F32_F32_F32", "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
                  "TF32_TF32_F32", "TF32_TF32_F32_X3"]
# How far the emulation is from the exact product (relative to sum |x||y|) at least / at most:
# the algorithm must make the difference it is meant to make.
ERROR = {"F32_F32_F32": (0, 1e-6), "BF16_BF16_F32": (1e-4, 1e-2), "BF16_BF16_F32_X3": (1e-7, 1e-4),
         "BF16_BF16_F32_X6": (0, 1e-6), "BF16_BF16_F32_X9": (0, 1e-6), "TF32_TF32_F32": (1e-5, 2e-3),
         "TF32_TF32_F32_X3": (1e-8, 1e-5)}


@pytest.mark.parametrize("name", F32_ALGORITHMS)
def test_f32_algorithms_against_the_emulation(name):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 16)).astype(np.float32)
    y = rng.standard_normal((16, 5)).astype(np.float32)
    scale = np.abs(x).astype(np.float64) @ np.abs(y).astype(np.float64)
    got = dot(x, y, name)
    assert got.dtype == np.float32
    want = emulate(name, x, y)
    assert np.all(np.abs(got - want) <= 4e-7 * scale)
    error = np.max(np.abs(want - x.astype(np.float64) @ y.astype(np.float64)) / scale)
    lo, hi = ERROR[name]
    assert lo <= error <= hi


def test_parts_by_hand():
    """x = 1 + 2**-10: bf16 keeps 1; x3 splits it into 1 and 2**-10 and drops lo * lo,
    giving 1 + 2**-9; x6 has mid * mid = 2**-20 too, the exact square."""
    x = np.array([[1 + 2**-10]], np.float32)
    assert dot(x, x, "BF16_BF16_F32")[0, 0] == 1.0
    assert dot(x, x, "BF16_BF16_F32_X3")[0, 0] == 1 + 2**-9
    assert dot(x, x, "BF16_BF16_F32_X6")[0, 0] == 1 + 2**-9 + 2**-20


@pytest.mark.parametrize("name", ["BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
                                  "TF32_TF32_F32_X3"])
def test_split_algorithms_keep_infinities(name):
    """inf splits into inf and NaN parts; the low partial dots' NaN is replaced by zero."""
    x = np.array([[np.inf, 1.0], [-np.inf, 2.0]], np.float32)
    y = np.array([[1.0], [1.0]], np.float32)
    got = dot(x, y, name)
    np.testing.assert_array_equal(got, [[np.inf], [-np.inf]])
    np.testing.assert_array_equal(got, emulate(name, x, y))


def test_bf16_operands_and_results():
    x = np.arange(6, dtype=np.float32).reshape(2, 3).astype(BF16)
    y = np.arange(12, dtype=np.float32).reshape(3, 4).astype(BF16)
    want = x.astype(np.float32) @ y.astype(np.float32)
    got = dot(x, y, "BF16_BF16_F32", np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(dot(x, y, "BF16_BF16_F32"), want.astype(BF16))
    np.testing.assert_array_equal(dot(x, y, "BF16_BF16_BF16"), want.astype(BF16))


def test_f16_and_f64_presets():
    x = np.arange(6, dtype=np.float16).reshape(2, 3)
    np.testing.assert_array_equal(dot(x, x.T, "F16_F16_F32", np.float32), (x @ x.T).astype(np.float32))
    np.testing.assert_array_equal(dot(x, x.T, "F16_F16_F16"), x @ x.T)
    z = np.random.default_rng(0).standard_normal((3, 3))
    np.testing.assert_allclose(dot(z, z, "F64_F64_F64"), z @ z, rtol=1e-14)


def test_spellings():
    x = np.array([[1 + 2**-10]], np.float32)
    for spelling in ("bf16_bf16_f32", "ALG_DOT_BF16_BF16_F32", "DOT_BF16_BF16_F32"):
        assert dot(x, x, spelling)[0, 0] == 1.0
    assert dot(x, x, "DEFAULT")[0, 0] == np.float32((1 + 2**-10) ** 2)


def test_jax_presets_and_algorithms():
    lax = pytest.importorskip("jax").lax
    x = np.array([[1 + 2**-10]], np.float32)
    assert dot(x, x, lax.DotAlgorithmPreset.BF16_BF16_F32)[0, 0] == 1.0
    assert dot(x, x, lax.DotAlgorithmPreset.DEFAULT)[0, 0] == np.float32((1 + 2**-10) ** 2)
    algorithm = lax.DotAlgorithm(np.dtype(BF16), np.dtype(BF16), np.float32)
    assert dot(x, x, algorithm)[0, 0] == 1.0


def test_default_algorithm_builds_one_dot():
    b = xm.XlaBuilder("t")
    p = b.parameter(0, xm.Shape.array(xm.F32, (2, 2)))
    text = b.build(b.dot_general(p, p, MATMUL, algorithm="F32_F32_F32")).as_mlir_text()
    assert text.count("xhlo.") == 1 and "xhlo.dot_general" in text


def build(lhs, rhs, algorithm, preferred=None):
    b = xm.XlaBuilder("e")
    p = b.parameter(0, xm.Shape.array(lhs, (2, 2)))
    q = b.parameter(1, xm.Shape.array(rhs, (2, 2)))
    b.dot_general(p, q, MATMUL, preferred_element_type=preferred, algorithm=algorithm)


@pytest.mark.parametrize("args, message", [
    ((xm.BF16, xm.BF16, "BF16_BF16_F32_X3"), r"BF16_BF16_F32_X3 takes f32 operands -> f32; got bf16"),
    ((xm.F32, xm.F32, "BF16_BF16_F32", xm.BF16), r"f32 operands -> f32; got f32 and f32 operands -> bf16"),
    ((xm.F32, xm.F32, "F64_F64_F64"), "takes f64 operands"),
    ((xm.F32, xm.F32, "F16_F16_F32"), "takes f16 operands"),
    ((xm.F16, xm.F32, "F16_F16_F32", xm.F32), "got f16 and f32"),
    ((xm.F32, xm.F32, "TF32_TF32_F32", xm.F64), "TF32_TF32_F32 takes f32 operands -> f32"),
    ((xm.F32, xm.F32, "ANY_F8_ANY_F8_F32"), "unsupported dot algorithm"),
    ((xm.F32, xm.F32, "FASTEST"), "unsupported dot algorithm"),
    ((xm.F32, xm.F32, 3), "preset name or a DotAlgorithm"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_rejected_combinations(args, message):
    with pytest.raises(xm.ShapeError, match=message):
        build(*args)
