"""BatchNormMethods: batch_norm_training, batch_norm_inference and batch_norm_grad.
Imports `dialect` and `builder.recorder`.

Batch norm has no dialect op: each method is a composition of our own ops (reduce,
broadcast_in_dim, elementwise arithmetic, convert) following the seeds' formulas
exactly, with the biased variance. f16/bf16 operands are computed in f32 and rounded
once at the end (as the dot and convolution accumulations are).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from ..dialect.element_types import PrimitiveType
from ..dialect.errors import ShapeError
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import XlaOp

P = PrimitiveType


def _batch_norm_operands(self: Recorder, op: str, operand: Any, vectors: dict[str, Any],
                         epsilon: Any, feature_index: Any) -> tuple[XlaOp, list[XlaOp], int]:
    """Checks XLA's InferBatchNorm*Shape rules: a float array operand, a valid feature
    index, rank-1 vectors of the feature size and of the operand's element type."""
    operand = self.check_operand(op, operand)
    ops = [self.check_operand(op, v) for v in vectors.values()]
    shapes = [operand.shape] + [v.shape for v in ops]
    for s in shapes:
        if not s.is_array():
            raise ShapeError(op, shapes, f"operands must be arrays, got {s}")
    t = operand.shape.element_type
    if not t.is_floating:
        raise ShapeError(op, shapes, f"the operand must have a floating-point element type, got {t}")
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, numbers.Real):
        raise ShapeError(op, shapes, f"epsilon must be a float, got {epsilon!r}")
    index = args.integer(op, feature_index, "feature_index")
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

    def __init__(self, b: Any, shape: Shape, index: int, t: PrimitiveType) -> None:
        self.b, self.shape, self.index, self.t = b, shape, index, t
        self.others = tuple(d for d in range(shape.rank) if d != index)
        self.count = math.prod(shape.dimensions[d] for d in self.others)  # m·w·h in the seeds
        adder = type(b)(f"{b.name}_batch_norm_add")
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


def _round(b: Any, x: XlaOp, t: PrimitiveType) -> XlaOp:
    return x if x.shape.element_type == t else b.convert_element_type(x, t)


class BatchNormMethods(Recorder):
    """The seeds' batch norm, as compositions of our own ops."""

    def batch_norm_training(self, operand: XlaOp, scale: XlaOp, offset: XlaOp, epsilon: float,
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

    def batch_norm_inference(self, operand: XlaOp, scale: XlaOp, offset: XlaOp, mean: XlaOp,
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

    def batch_norm_grad(self, operand: XlaOp, scale: XlaOp, mean: XlaOp, variance: XlaOp,
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
        dy = self.check_operand(op, grad_output)
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
