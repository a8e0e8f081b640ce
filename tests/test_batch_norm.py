"""Tests of batch_norm_training, batch_norm_inference and batch_norm_grad.

They are builder compositions of our own ops (no dialect op). Reference: the
seeds' formulas in float64 numpy (biased variance, epsilon inside the square
root; seed 001/004 BatchNormGrad), rounded once to the element type. f16/bf16
are computed in f32 and rounded once, so every result is within about one ulp
of the reference. batch_norm_grad is also checked against central differences
of the training forward pass: the seed formulas are its exact gradient.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, stage_text

import xlamlir as xm

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": BF16}
# Relative tolerance per type: a few ulps of the f32 computation, one rounding of the result.
RTOL = {"f32": 2e-5, "f64": 1e-12, "f16": 2e-3, "bf16": 1.6e-2}
EPSILON = 1e-3


def _along(v: np.ndarray, rank: int, index: int) -> np.ndarray:
    """A per-feature vector shaped to broadcast along dimension `index`."""
    return v.reshape([-1 if d == index else 1 for d in range(rank)])


def reference_training(x, scale, offset, epsilon, index):
    x, scale, offset = (a.astype(np.float64) for a in (x, scale, offset))
    axes = tuple(d for d in range(x.ndim) if d != index)
    mean = x.mean(axis=axes)
    centered = x - _along(mean, x.ndim, index)
    var = (centered ** 2).mean(axis=axes)  # biased: 1 / (m w h)
    out = (_along(scale, x.ndim, index) * centered / np.sqrt(_along(var, x.ndim, index) + epsilon)
           + _along(offset, x.ndim, index))
    return out, mean, var


def reference_inference(x, scale, offset, mean, var, epsilon, index):
    x, scale, offset, mean, var = (a.astype(np.float64) for a in (x, scale, offset, mean, var))
    r = x.ndim
    return (_along(scale, r, index) * (x - _along(mean, r, index)) / np.sqrt(_along(var, r, index) + epsilon)
            + _along(offset, r, index))


def reference_grad(x, scale, mean, var, dy, epsilon, index):
    x, scale, mean, var, dy = (a.astype(np.float64) for a in (x, scale, mean, var, dy))
    r = x.ndim
    axes = tuple(d for d in range(r) if d != index)
    centered = x - _along(mean, r, index)
    var_eps = _along(var, r, index) + epsilon
    c = (dy * centered / var_eps).mean(axis=axes)
    d = dy.mean(axis=axes)
    grad_x = _along(scale, r, index) / np.sqrt(var_eps) * (dy - _along(d, r, index)
                                                           - _along(c, r, index) * centered)
    grad_scale = (dy * centered / np.sqrt(var_eps)).sum(axis=axes)
    return grad_x, grad_scale, dy.sum(axis=axes)


def param(b: xm.XlaBuilder, i: int, a: np.ndarray) -> xm.XlaOp:
    return b.parameter(i, xm.Shape.array(xm.type_of(a.dtype), a.shape))


def run(method: str, *arrays: np.ndarray, epsilon: float = EPSILON, feature_index: int) -> tuple:
    b = xm.XlaBuilder(method)
    ops = [param(b, i, a) for i, a in enumerate(arrays)]
    getattr(b, method)(*ops, epsilon, feature_index)
    return xm.compile(b.build())(*arrays)


def inputs(shape: tuple[int, ...], index: int, dtype, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    features = shape[index]
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    scale = (rng.standard_normal(features) + 1).astype(dtype)
    offset = rng.standard_normal(features).astype(dtype)
    return x, scale, offset


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype, name: str) -> None:
    assert actual.dtype == np.dtype(dtype) and actual.shape == expected.shape
    scale = max(float(np.abs(expected).max(initial=0.0)), 1.0)
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=RTOL[name], atol=RTOL[name] * scale)


CASES = [((2, 3, 4, 5), 1), ((2, 3, 4, 5), 3), ((4, 3), 0), ((5,), 0), ((3, 2, 1, 2), 2)]


@pytest.mark.parametrize("name", DTYPES)
def test_training(name: str) -> None:
    dtype = DTYPES[name]
    for i, (shape, index) in enumerate(CASES):
        x, scale, offset = inputs(shape, index, dtype, seed=i)
        out, mean, var = run("batch_norm_training", x, scale, offset, feature_index=index)
        expected = reference_training(x, scale, offset, EPSILON, index)
        for actual, want, what in zip((out, mean, var), expected, ("output", "mean", "variance")):
            assert_close(actual, want, dtype, name)
            assert actual.shape == (shape if what == "output" else (shape[index],))


@pytest.mark.parametrize("name", DTYPES)
def test_inference(name: str) -> None:
    dtype = DTYPES[name]
    rng = np.random.default_rng(5)
    for i, (shape, index) in enumerate(CASES):
        x, scale, offset = inputs(shape, index, dtype, seed=i)
        mean = rng.standard_normal(shape[index]).astype(dtype)
        var = (rng.random(shape[index]) + 0.5).astype(dtype)
        out = run("batch_norm_inference", x, scale, offset, mean, var, feature_index=index)
        assert_close(out, reference_inference(x, scale, offset, mean, var, EPSILON, index), dtype, name)


@pytest.mark.parametrize("name", DTYPES)
def test_grad(name: str) -> None:
    dtype = DTYPES[name]
    for i, (shape, index) in enumerate(CASES):
        x, scale, _ = inputs(shape, index, dtype, seed=i)
        _, mean, var = reference_training(x, scale, scale, EPSILON, index)
        mean, var = mean.astype(dtype), var.astype(dtype)
        dy = np.random.default_rng(i + 20).standard_normal(shape).astype(dtype)
        results = run("batch_norm_grad", x, scale, mean, var, dy, feature_index=index)
        for actual, want in zip(results, reference_grad(x, scale, mean, var, dy, EPSILON, index)):
            assert_close(actual, want, dtype, name)


def test_training_matches_the_seed_example_shape() -> None:
    """The seeds' 4-D case: feature l last, mean and variance over m, w and h; variance biased."""
    x = np.array([[[[1.0, 10.0], [3.0, 30.0]]], [[[5.0, 50.0], [7.0, 70.0]]]], np.float32)  # [2,1,2,2]
    out, mean, var = run("batch_norm_training", x, np.ones(2, np.float32), np.zeros(2, np.float32),
                         epsilon=0.0, feature_index=3)
    np.testing.assert_array_equal(mean, [4.0, 40.0])
    np.testing.assert_array_equal(var, [5.0, 500.0])  # (9 + 1 + 1 + 9) / 4, not / 3
    np.testing.assert_allclose(out[..., 0].ravel(), np.array([-3, -1, 1, 3]) / np.sqrt(5.0), rtol=1e-6)


def test_grad_is_the_gradient_of_training() -> None:
    """Central differences of sum(dy * training_output(x, scale, offset)) in float64."""
    shape, index = (3, 2, 4), 1
    x, scale, offset = inputs(shape, index, np.float64, seed=7)
    dy = np.random.default_rng(8).standard_normal(shape)
    _, mean, var = reference_training(x, scale, offset, EPSILON, index)
    grad_x, grad_scale, grad_offset = run("batch_norm_grad", x, scale, mean, var, dy, feature_index=index)

    def loss(x, scale, offset):
        return float((dy * reference_training(x, scale, offset, EPSILON, index)[0]).sum())

    h = 1e-6
    for value, grad, args in ((x, grad_x, lambda v: (v, scale, offset)),
                              (scale, grad_scale, lambda v: (x, v, offset)),
                              (offset, grad_offset, lambda v: (x, scale, v))):
        numeric = np.zeros_like(value)
        for pos in np.ndindex(value.shape):
            up, down = value.copy(), value.copy()
            up[pos] += h
            down[pos] -= h
            numeric[pos] = (loss(*args(up)) - loss(*args(down))) / (2 * h)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-7)


def test_results_are_tuples_of_the_right_shapes() -> None:
    b = xm.XlaBuilder("shapes")
    x = b.parameter(0, xm.Shape.array(xm.F16, (2, 5, 3)))
    v = b.parameter(1, xm.Shape.array(xm.F16, (5,)))
    training = b.batch_norm_training(x, v, v, 1e-5, 1)
    assert training.shape == xm.Shape.tuple([x.shape, v.shape, v.shape])
    assert b.batch_norm_inference(x, v, v, v, v, 1e-5, 1).shape == x.shape
    assert b.batch_norm_grad(x, v, v, v, x, 1e-5, 1).shape == xm.Shape.tuple([x.shape, v.shape, v.shape])
    assert b.get_tuple_element(training, 2).shape == v.shape


def test_empty_batch_gives_nan_moments() -> None:
    """No elements per feature: the mean is 0 / 0, as XLA's expansion computes it."""
    x = np.zeros((0, 3), np.float32)
    out, mean, var = run("batch_norm_training", x, np.ones(3, np.float32), np.zeros(3, np.float32),
                         feature_index=1)
    assert out.shape == (0, 3) and np.isnan(mean).all() and np.isnan(var).all()


def test_composition_of_our_ops() -> None:
    b = xm.XlaBuilder("bn")
    x = b.parameter(0, xm.Shape.array(xm.BF16, (2, 3, 4)))
    v = b.parameter(1, xm.Shape.array(xm.BF16, (3,)))
    b.batch_norm_training(x, v, v, 1e-3, 1)
    check_ir(stage_text(b.build(), "hlo"), """
        CHECK-NOT: xhlo.batch_norm
        CHECK: "xhlo.convert"(%arg0) {{.*}} -> tensor<2x3x4xf32>
        CHECK: "xhlo.reduce"
        CHECK-SAME: dimensions = array<i64: 0, 2>
        CHECK: "xhlo.divide"
        CHECK: "xhlo.broadcast_in_dim"
        CHECK-SAME: broadcast_dimensions = array<i64: 1>
        CHECK: "xhlo.sqrt"
        CHECK: "xhlo.convert"{{.*}} -> tensor<2x3x4xbf16>
        CHECK-NOT: xhlo.batch_norm
    """)


RULES = [
    ("floating-point", lambda b, f, i: b.batch_norm_training(i((2, 3)), i((3,)), i((3,)), 1e-3, 1)),
    ("out of range", lambda b, f, i: b.batch_norm_training(f((2, 3)), f((3,)), f((3,)), 1e-3, 2)),
    ("out of range", lambda b, f, i: b.batch_norm_inference(f((2, 3)), f((3,)), f((3,)), f((3,)), f((3,)),
                                                            1e-3, -1)),
    ("feature size 3", lambda b, f, i: b.batch_norm_training(f((2, 3)), f((2,)), f((3,)), 1e-3, 1)),
    ("rank-1", lambda b, f, i: b.batch_norm_inference(f((2, 3)), f((3,)), f((3,)), f((1, 3)), f((3,)),
                                                      1e-3, 1)),
    ("element type", lambda b, f, i: b.batch_norm_grad(f((2, 3)), f((3,)), f((3,)),
                                                       b.parameter(9, xm.Shape.array(xm.F64, (3,))),
                                                       f((2, 3)), 1e-3, 1)),
    ("grad_output", lambda b, f, i: b.batch_norm_grad(f((2, 3)), f((3,)), f((3,)), f((3,)), f((3, 2)),
                                                      1e-3, 1)),
    ("epsilon must be a float", lambda b, f, i: b.batch_norm_training(f((2, 3)), f((3,)), f((3,)), "tiny",
                                                                      1)),
    ("feature_index must be an int", lambda b, f, i: b.batch_norm_training(f((2, 3)), f((3,)), f((3,)),
                                                                           1e-3, 1.0)),
    ("arrays", lambda b, f, i: b.batch_norm_training(b.tuple([f((2, 3))]), f((3,)), f((3,)), 1e-3, 0)),
]


@pytest.mark.parametrize("rule,build", RULES, ids=[f"{i}-{r[0]}" for i, r in enumerate(RULES)])
def test_shape_rules(rule: str, build) -> None:
    b = xm.XlaBuilder("rules")
    count = iter(range(100))

    def f(shape):
        return b.parameter(next(count), xm.Shape.array(xm.F32, shape))

    def i(shape):
        return b.parameter(next(count), xm.Shape.array(xm.S32, shape))

    with pytest.raises(xm.ShapeError, match=rule) as info:
        build(b, f, i)
    assert info.value.op.startswith("batch_norm")


def test_operands_must_be_ops_of_this_builder() -> None:
    b, other = xm.XlaBuilder("a"), xm.XlaBuilder("b")
    x = other.parameter(0, xm.Shape.array(xm.F32, (2, 3)))
    v = b.parameter(0, xm.Shape.array(xm.F32, (3,)))
    with pytest.raises(xm.ShapeError, match="closed"):
        b.batch_norm_training(x, v, v, 1e-3, 1)
