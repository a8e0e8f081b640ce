"""Hand-written XlaBuilder methods of the conv family. Imports `dialect` and `builder`.

Every function in METHODS becomes a method of XlaBuilder (see builder/__init__.py).

- `conv_general_dilated` emits the dialect's `convolution`; the seeds' `conv`,
  `conv_with_general_padding`, `conv_with_general_dimensions` and
  `conv_general` are thin forms of it. "SAME"/"VALID" padding becomes
  explicit (low, high) pairs here (XLA's MakePadding, on the lhs-dilated
  base when lhs_dilation is given) and `window_reversal` a `rev` of the
  kernel's spatial dimensions, so the op only sees explicit pairs.
- Batch norm (`batch_norm_training`, `batch_norm_inference`,
  `batch_norm_grad`) has no dialect op: each is a composition of our own ops
  (reduce, broadcast_in_dim, elementwise arithmetic, convert) following the
  seeds' formulas exactly, with the biased variance. f16/bf16 operands are
  computed in f32 and rounded once at the end (as the dot and convolution
  accumulations are).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dialect.element_types import PrimitiveType, type_of
from ..dialect.errors import ShapeError
from ..dialect.ops_conv import ConvDimensionNumbers, dilated, normalize_precision
from ..dialect.registry import lookup
from ..dialect.shape import Shape
from .builder import XlaBuilder
from .xla_op import XlaOp

P = PrimitiveType
OP = "convolution"
METHODS: dict[str, Callable[..., Any]] = {}


def _method(fn: Callable[..., Any]) -> Callable[..., Any]:
    METHODS[fn.__name__] = fn
    return fn


# -- argument normalisation ----------------------------------------------------------------------

def _ints(values: Any, what: str, op: str = OP) -> tuple[int, ...]:
    """A list/tuple/array of ints as a tuple of Python ints; anything else is a ShapeError."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}")
    result = []
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}")
        result.append(int(v))
    return tuple(result)


def _int(value: Any, what: str, op: str = OP) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ShapeError(op, [], f"{what} must be an int, got {value!r}")
    return int(value)


def _spatial(operand: XlaOp, dims: Sequence[int]) -> list[int]:
    """Sizes of the listed dimensions (0 for an out-of-range one, reported by the shape rule)."""
    return [operand.shape.dimensions[d] if 0 <= d < operand.shape.rank else 0 for d in dims]


def _padding(padding: Any, base: Sequence[int], window: Sequence[int], strides: Sequence[int],
             lhs_dilation: Sequence[int], rhs_dilation: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Explicit (low, high) pairs. "VALID" is no padding; "SAME" is XLA's MakePadding:
    output size ceil(base / stride) over the lhs-dilated base and the rhs-dilated window,
    the odd element of padding on the high side."""
    if isinstance(padding, str):
        kind = padding.upper()
        if kind not in ("SAME", "VALID"):
            raise ShapeError(OP, [], f"padding must be 'SAME', 'VALID' or (low, high) pairs, got {padding!r}")
        n = len(base)
        if kind == "VALID" or any(len(x) != n for x in (window, strides, lhs_dilation, rhs_dilation)):
            return ((0, 0),) * len(strides)  # a length mismatch is reported by the shape rule
        pairs = []
        for size, k, s, ld, rd in zip(base, window, strides, lhs_dilation, rhs_dilation):
            if s < 1 or ld < 1 or rd < 1:
                pairs.append((0, 0))  # the shape rule reports the bad value
                continue
            extent = dilated(size, ld)
            out = -(-extent // s)
            total = max((out - 1) * s + dilated(k, rd) - extent, 0)
            pairs.append((total // 2, total - total // 2))
        return tuple(pairs)
    if isinstance(padding, (Sequence, np.ndarray)):
        pairs = []
        for pair in padding:
            p = _ints(pair, "each padding entry")
            if len(p) != 2:
                raise ShapeError(OP, [], f"padding must be a list of (low, high) pairs, got {padding!r}")
            pairs.append((p[0], p[1]))
        return tuple(pairs)
    raise ShapeError(OP, [], f"padding must be 'SAME', 'VALID' or (low, high) pairs, got {padding!r}")


def _preferred(lhs: XlaOp, rhs: XlaOp, preferred_element_type: Any) -> PrimitiveType:
    if preferred_element_type is None:
        return lhs.shape.element_type  # only read when lhs and rhs agree (see the shape rule)
    try:
        return type_of(preferred_element_type)
    except ShapeError:
        raise ShapeError(OP, [lhs.shape, rhs.shape], f"preferred_element_type "
                         f"{preferred_element_type!r} is not an element type") from None


# -- convolution -----------------------------------------------------------------------------------

@_method
def conv_general_dilated(self: XlaBuilder, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                         padding: str | Sequence[tuple[int, int]], lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                         feature_group_count: int = 1, batch_group_count: int = 1,
                         precision_config: Any = None, preferred_element_type: Any = None,
                         window_reversal: Sequence[bool] | None = None) -> XlaOp:
    """Convolution with every option (seed 001 ConvGeneralDilated, spec#convolution).

    `padding`: (low, high) per spatial dimension (negative removes elements),
    or "SAME"/"VALID". `dimension_numbers`: a ConvDimensionNumbers, layout
    strings such as ("NHWC", "HWIO", "NHWC"), jax's (lhs_spec, rhs_spec,
    out_spec), or None for XLA's [batch, feature, spatial...] /
    [out_feature, in_feature, spatial...]. `window_reversal` (seed 001's last
    argument): one bool per spatial dimension, reversing the kernel there.
    """
    lhs = self._check_operand(OP, lhs)
    rhs = self._check_operand(OP, rhs)
    for s in (lhs.shape, rhs.shape):
        if not s.is_array():
            raise ShapeError(OP, [lhs.shape, rhs.shape], f"operands must be arrays, got {s}")
    num_spatial = max(lhs.shape.rank - 2, 0)
    dnums = ConvDimensionNumbers.of(dimension_numbers, num_spatial)
    strides = _ints(window_strides, "window_strides")
    n = len(strides)
    lhs_dil = (1,) * n if lhs_dilation is None else _ints(lhs_dilation, "lhs_dilation")
    rhs_dil = (1,) * n if rhs_dilation is None else _ints(rhs_dilation, "rhs_dilation")
    pads = _padding(padding, _spatial(lhs, dnums.input_spatial_dimensions),
                    _spatial(rhs, dnums.kernel_spatial_dimensions), strides, lhs_dil, rhs_dil)
    attrs = {
        "window_strides": strides, "padding": pads, "lhs_dilation": lhs_dil, "rhs_dilation": rhs_dil,
        **dnums.as_dict(),
        "feature_group_count": _int(feature_group_count, "feature_group_count"),
        "batch_group_count": _int(batch_group_count, "batch_group_count"),
        "precision_config": normalize_precision(precision_config),
        "preferred_element_type": _preferred(lhs, rhs, preferred_element_type),
        "preferred_given": preferred_element_type is not None,
    }
    if window_reversal is not None:
        flags = list(window_reversal)
        if len(flags) != dnums.num_spatial or not all(isinstance(f, (bool, np.bool_)) for f in flags):
            raise ShapeError(OP, [lhs.shape, rhs.shape], f"window_reversal {flags} needs one bool per "
                             f"spatial dimension ({dnums.num_spatial})")
        flipped = [d for d, f in zip(dnums.kernel_spatial_dimensions, flags) if f]
        if flipped:
            lookup(OP).infer(lhs.shape, rhs.shape, **attrs)  # report a bad convolution as such
            # Reversing the lhs window (StableHLO) or the kernel gives the same sums.
            rhs = self.rev(rhs, flipped)
    return self._emit(OP, [lhs, rhs], attrs)


@_method
def conv(self: XlaBuilder, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
         padding: str | Sequence[tuple[int, int]], feature_group_count: int = 1,
         batch_group_count: int = 1, precision_config: Any = None,
         preferred_element_type: Any = None) -> XlaOp:
    """Seed 001's Conv: XLA's default dimension numbers, no dilation; padding "SAME"/"VALID"
    (explicit pairs are accepted as well)."""
    return conv_general_dilated(self, lhs, rhs, window_strides, padding, None, None, None,
                                feature_group_count, batch_group_count, precision_config,
                                preferred_element_type)


@_method
def conv_with_general_padding(self: XlaBuilder, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                              padding: str | Sequence[tuple[int, int]], feature_group_count: int = 1,
                              batch_group_count: int = 1, precision_config: Any = None,
                              preferred_element_type: Any = None, *,
                              lhs_dilation: Sequence[int] | None = None,
                              rhs_dilation: Sequence[int] | None = None) -> XlaOp:
    """Seed 001's ConvWithGeneralPadding: explicit (low, high) pairs, default dimension
    numbers. Seed 003's form also took dilations; here they are keyword-only, since the
    current seed puts feature_group_count in that position."""
    return conv_general_dilated(self, lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                None, feature_group_count, batch_group_count, precision_config,
                                preferred_element_type)


@_method
def conv_with_general_dimensions(self: XlaBuilder, lhs: XlaOp, rhs: XlaOp,
                                 window_strides: Sequence[int], padding: str | Sequence[tuple[int, int]],
                                 dimension_numbers: Any, feature_group_count: int = 1,
                                 batch_group_count: int = 1, precision_config: Any = None,
                                 preferred_element_type: Any = None) -> XlaOp:
    """Seed 001's ConvWithGeneralDimensions: "SAME"/"VALID" padding, explicit dimension numbers."""
    return conv_general_dilated(self, lhs, rhs, window_strides, padding, None, None,
                                dimension_numbers, feature_group_count, batch_group_count,
                                precision_config, preferred_element_type)


@_method
def conv_general(self: XlaBuilder, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                 padding: str | Sequence[tuple[int, int]], dimension_numbers: Any,
                 feature_group_count: int = 1, batch_group_count: int = 1,
                 precision_config: Any = None, preferred_element_type: Any = None) -> XlaOp:
    """Seed 001's ConvGeneral: explicit padding pairs and dimension numbers, no dilation."""
    return conv_general_dilated(self, lhs, rhs, window_strides, padding, None, None,
                                dimension_numbers, feature_group_count, batch_group_count,
                                precision_config, preferred_element_type)


# -- batch norm -------------------------------------------------------------------------------------
# Compositions of our own ops (no dialect op): reduce (add) over every dimension but the
# feature dimension, broadcast_in_dim back along it, elementwise arithmetic.


def _batch_norm_operands(self: XlaBuilder, op: str, operand: Any, vectors: dict[str, Any],
                         epsilon: Any, feature_index: Any) -> tuple[XlaOp, list[XlaOp], int]:
    """Checks XLA's InferBatchNorm*Shape rules: a float array operand, a valid feature
    index, rank-1 vectors of the feature size and of the operand's element type."""
    operand = self._check_operand(op, operand)
    ops = [self._check_operand(op, v) for v in vectors.values()]
    shapes = [operand.shape] + [v.shape for v in ops]
    for s in shapes:
        if not s.is_array():
            raise ShapeError(op, shapes, f"operands must be arrays, got {s}")
    t = operand.shape.element_type
    if not t.is_floating:
        raise ShapeError(op, shapes, f"the operand must have a floating-point element type, got {t}")
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, numbers.Real):
        raise ShapeError(op, shapes, f"epsilon must be a float, got {epsilon!r}")
    index = _int(feature_index, "feature_index", op)
    if not 0 <= index < operand.shape.rank:
        raise ShapeError(op, shapes, f"feature_index {index} is out of range for rank {operand.shape.rank}")
    features = operand.shape.dimensions[index]
    for name, v in zip(vectors, ops):
        if v.shape.rank != 1 or v.shape.dimensions[0] != features:
            raise ShapeError(op, shapes, f"{name} must be a rank-1 array of the feature size {features} "
                             f"(dimension {index} of the operand), got {v.shape}")
        if v.shape.element_type != t:
            raise ShapeError(op, shapes, f"{name} ({v.shape}) must have the operand's element type {t}")
    return operand, ops, index


def _compute_type(t: PrimitiveType) -> PrimitiveType:
    """f16/bf16 are computed in f32 (rounded once at the end); f32/f64 in themselves."""
    return P.F32 if t in (P.F16, P.BF16) else t


class _Norm:
    """Per-feature helpers of one batch norm over `shape` along `index`, in type `t`."""

    def __init__(self, b: XlaBuilder, shape: Shape, index: int, t: PrimitiveType) -> None:
        self.b, self.shape, self.index, self.t = b, shape, index, t
        self.others = tuple(d for d in range(shape.rank) if d != index)
        self.count = math.prod(shape.dimensions[d] for d in self.others)  # m·w·h in the seeds
        adder = XlaBuilder(f"{b.name}_batch_norm_add")
        scalar = Shape.array(t, ())
        adder.add(adder.parameter(0, scalar), adder.parameter(1, scalar))
        self.adder = adder.build()

    def const(self, value: float) -> XlaOp:
        return self.b.constant(np.asarray(value, dtype=Shape.array(self.t, ()).dtype))

    def cast(self, x: XlaOp) -> XlaOp:
        return x if x.shape.element_type == self.t else self.b.convert_element_type(x, self.t)

    def total(self, x: XlaOp) -> XlaOp:
        """The per-feature sum over every other dimension: a rank-1 [features] array."""
        return self.b.reduce(x, self.const(0.0), self.adder, self.others)

    def mean(self, x: XlaOp) -> XlaOp:
        """The per-feature mean (1/(m·w·h) times the sum)."""
        return self.b.div(self.total(x), self.const(float(self.count)))

    def spread(self, v: XlaOp) -> XlaOp:
        """A per-feature vector broadcast to the operand's shape."""
        return self.b.broadcast_in_dim(v, self.shape.dimensions, (self.index,))


def _round(b: XlaBuilder, x: XlaOp, t: PrimitiveType) -> XlaOp:
    return x if x.shape.element_type == t else b.convert_element_type(x, t)


@_method
def batch_norm_training(self: XlaBuilder, operand: XlaOp, scale: XlaOp, offset: XlaOp, epsilon: float,
                        feature_index: int) -> XlaOp:
    """Normalize over every dimension but `feature_index` (seed 001 BatchNormTraining).

    Returns the tuple (output, batch_mean, batch_var) with, per feature l,
    mean = sum(x) / m, var = sum((x - mean)^2) / m (biased) and
    output = scale * (x - mean) / sqrt(var + epsilon) + offset. A composition of
    our own ops (reduce, broadcast_in_dim, elementwise), no dialect op.
    """
    op = "batch_norm_training"
    x, (gamma, beta), index = _batch_norm_operands(self, op, operand, {"scale": scale, "offset": offset},
                                                   epsilon, feature_index)
    t = x.shape.element_type
    n = _Norm(self, x.shape, index, _compute_type(t))
    x, gamma, beta = n.cast(x), n.cast(gamma), n.cast(beta)
    mean = n.mean(x)
    centered = self.sub(x, n.spread(mean))
    var = n.mean(self.mul(centered, centered))
    stddev = self.sqrt(self.add(var, n.const(epsilon)))
    out = self.add(self.div(self.mul(n.spread(gamma), centered), n.spread(stddev)), n.spread(beta))
    return self.tuple([_round(self, out, t), _round(self, mean, t), _round(self, var, t)])


@_method
def batch_norm_inference(self: XlaBuilder, operand: XlaOp, scale: XlaOp, offset: XlaOp, mean: XlaOp,
                         variance: XlaOp, epsilon: float, feature_index: int) -> XlaOp:
    """batch_norm_training's output with the given mean and variance (seed 001
    BatchNormInference): scale * (x - mean) / sqrt(variance + epsilon) + offset."""
    op = "batch_norm_inference"
    x, (gamma, beta, mu, var), index = _batch_norm_operands(
        self, op, operand, {"scale": scale, "offset": offset, "mean": mean, "variance": variance},
        epsilon, feature_index)
    t = x.shape.element_type
    n = _Norm(self, x.shape, index, _compute_type(t))
    x, gamma, beta, mu, var = (n.cast(v) for v in (x, gamma, beta, mu, var))
    centered = self.sub(x, n.spread(mu))
    stddev = self.sqrt(self.add(var, n.const(epsilon)))
    out = self.add(self.div(self.mul(n.spread(gamma), centered), n.spread(stddev)), n.spread(beta))
    return _round(self, out, t)


@_method
def batch_norm_grad(self: XlaBuilder, operand: XlaOp, scale: XlaOp, mean: XlaOp, variance: XlaOp,
                    grad_output: XlaOp, epsilon: float, feature_index: int) -> XlaOp:
    """Gradients of batch_norm_training (seed 001/004 BatchNormGrad formulas).

    Returns the tuple (grad_operand, grad_scale, grad_offset) with, per feature l
    and m·w·h the element count of the other dimensions:
    c = sum(dy * (x - mean) / (var + eps)) / m, d = sum(dy) / m,
    grad_operand = scale / sqrt(var + eps) * (dy - d - c * (x - mean)),
    grad_scale = sum(dy * (x - mean) / sqrt(var + eps)), grad_offset = sum(dy).
    """
    op = "batch_norm_grad"
    x, (gamma, mu, var), index = _batch_norm_operands(
        self, op, operand, {"scale": scale, "mean": mean, "variance": variance}, epsilon, feature_index)
    dy = self._check_operand(op, grad_output)
    if (not dy.shape.is_array() or dy.shape.dimensions != x.shape.dimensions
            or dy.shape.element_type != x.shape.element_type):
        raise ShapeError(op, [x.shape, dy.shape], f"grad_output {dy.shape} must have the operand's "
                         f"dimensions and element type ({x.shape})")
    t = x.shape.element_type
    n = _Norm(self, x.shape, index, _compute_type(t))
    x, gamma, mu, var, dy = (n.cast(v) for v in (x, gamma, mu, var, dy))
    centered = self.sub(x, n.spread(mu))
    var_eps = self.add(var, n.const(epsilon))
    stddev = self.sqrt(var_eps)
    c = n.mean(self.div(self.mul(dy, centered), n.spread(var_eps)))
    d = n.mean(dy)
    inner = self.sub(self.sub(dy, n.spread(d)), self.mul(n.spread(c), centered))
    grad_operand = self.mul(n.spread(self.div(gamma, stddev)), inner)
    grad_scale = n.total(self.div(self.mul(dy, centered), n.spread(stddev)))
    grad_offset = n.total(dy)
    return self.tuple([_round(self, v, t) for v in (grad_operand, grad_scale, grad_offset)])
