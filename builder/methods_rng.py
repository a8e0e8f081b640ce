"""RngMethods: the XlaBuilder methods of the rng family. Imports `dialect` and
`builder.recorder`.

rng_uniform / rng_normal emit `rng_get_and_update_state` (the executable's
random state, advanced by the draw's size) and an `rng` op drawing from it;
rng_bernoulli is sugar: `convert(rng_uniform(0, 1) < mean, u32)`.
rng_bit_generator is pure: the state is an operand and the next state a result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialect.element_types import PrimitiveType, dtype_of
from ..dialect.errors import ShapeError
from ..dialect.ops_rng import ALGORITHMS, STATE_SHAPE, infer_rng, state_delta
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import XlaOp

P = PrimitiveType


def _dims_and_type(op: str, shape: Any, default: PrimitiveType) -> tuple[tuple[int, ...], PrimitiveType]:
    """An array Shape's dimensions and element type; a plain sequence of sizes takes `default`."""
    if isinstance(shape, Shape):
        if not shape.is_array():
            raise ShapeError(op, [shape], f"shape must be an array shape, got {shape}")
        args.static_shape(op, shape)
        return shape.dimensions, shape.element_type
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise ShapeError(op, [], f"shape must be an xm.Shape or a sequence of sizes, got {shape!r}")
    return args.ints(op, shape, "shape"), default


def _scalar_operand(b: Recorder, op: str, value: Any, t: PrimitiveType | None) -> XlaOp:
    """An XlaOp as is; a Python or numpy number as a constant of type `t` (when known)."""
    if isinstance(value, XlaOp):
        return b.check_operand(op, value)
    if t is None or np.ndim(value) != 0:
        raise ShapeError(op, [], f"expected a scalar XlaOp, got {value!r}")
    return b.constant(np.asarray(value).astype(dtype_of(t)))


def _draw(b: Recorder, op: str, distribution: str, first: Any, second: Any, shape: Any) -> XlaOp:
    given = shape.element_type if isinstance(shape, Shape) and shape.is_array() else None
    if given is None:
        given = next((x.shape.element_type for x in (first, second) if isinstance(x, XlaOp)), None)
    first = _scalar_operand(b, op, first, given)
    second = _scalar_operand(b, op, second, given)
    dims, t = _dims_and_type(op, shape, first.shape.element_type)
    if t != first.shape.element_type:
        raise ShapeError(op, [first.shape, second.shape], f"the output element type {t} must be the "
                         f"parameters' type {first.shape.element_type}")
    # The shape rule of `rng` checks the parameters first: no state op for a bad call.
    infer_rng(first.shape, second.shape, STATE_SHAPE, rng_distribution=distribution, dimensions=dims)
    state = b.emit("rng_get_and_update_state", [], {"delta": state_delta(dims, t)})
    return b.emit("rng", [first, second, state], {"rng_distribution": distribution, "dimensions": dims})


def _algorithm(value: Any) -> str:
    """"DEFAULT"/"THREE_FRY"/"PHILOX", any case, with or without XLA's "RNG_" prefix, or an
    enum member with such a `.name` (jax's lax.RandomAlgorithm.RNG_PHILOX)."""
    name = getattr(value, "name", value)
    if isinstance(name, str):
        name = name.upper()
        name = name[4:] if name.startswith("RNG_") else name
        if name in ALGORITHMS:
            return name
    raise ShapeError("rng_bit_generator", [], f"algorithm must be one of {ALGORITHMS}, got {value!r}")


class RngMethods(Recorder):
    """The random-number methods."""

    def rng_uniform(self, a: XlaOp, b: XlaOp, shape: Any) -> XlaOp:
        """Numbers uniform in [a, b) (SEMANTICS D6; integers: a + bits mod (b - a)); b <= a is
        implementation-defined. Draws from the executable's state (`exe.seed(n)` resets it)."""
        return _draw(self, "rng_uniform", "UNIFORM", a, b, shape)

    def rng_normal(self, mu: XlaOp, sigma: XlaOp, shape: Any) -> XlaOp:
        """Numbers from N(mu, sigma) (Box-Muller), drawn from the executable's state."""
        return _draw(self, "rng_normal", "NORMAL", mu, sigma, shape)

    def rng_bernoulli(self, mean: XlaOp, shape: Any) -> XlaOp:
        """u32 zeros and ones, one with probability `mean` (seeds 000/003: an f32 mean, a u32
        output shape; any float mean is accepted). Built as uniform [0, 1) < mean."""
        op = "rng_bernoulli"
        mean = _scalar_operand(self, op, mean, P.F32)
        dims, t = _dims_and_type(op, shape, P.U32)
        if t != P.U32:
            raise ShapeError(op, [mean.shape], f"the output element type must be u32, got {t}")
        mt = mean.shape.element_type
        if not mean.shape.is_array() or mean.shape.rank != 0 or not mt.is_floating:
            raise ShapeError(op, [mean.shape], f"mean must be a floating-point scalar, got {mean.shape}")
        uniform = _draw(self, op, "UNIFORM", self.constant(np.zeros((), mean.shape.dtype)),
                        self.constant(np.ones((), mean.shape.dtype)), Shape.array(mt, dims))
        below = self.lt(uniform, mean)
        return self.convert_element_type(below, P.U32)

    def rng_bit_generator(self, algorithm: Any, initial_state: XlaOp, shape: Any) -> XlaOp:
        """The tuple (new_state, bits): `shape` (u8/u16/u32/u64) of random bits from `initial_state`
        by XLA's THREE_FRY (u64[2] state) or PHILOX (u64[2] or u64[3]); DEFAULT is PHILOX, XLA:CPU's
        default. Bit-exact with XLA."""
        op = "rng_bit_generator"
        state = self.check_operand(op, initial_state)
        dims, t = _dims_and_type(op, shape, P.U32)
        result = self.emit(op, [state], {"algorithm": _algorithm(algorithm), "dimensions": dims,
                                          "element_type": t})
        return self.results(result, as_tuple=True)
