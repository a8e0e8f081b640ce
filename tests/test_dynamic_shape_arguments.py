"""Builder methods that take a Shape make values of that shape; a dynamic one (`f32[<=10]`)
is refused with a ShapeError naming the method, never used as its bounds silently
(a dynamic value comes from set_dimension_size: docs/architecture.md)."""

from __future__ import annotations

import numpy as np
import pytest

import xlamlir as xm
from xlamlir import Shape, ShapeError

DYNAMIC = Shape.parse("f32[<=10,3]")
DYNAMIC_U32 = Shape.parse("u32[<=10]")
STATE = Shape.array(xm.U64, (2,))

# method -> a call of it with `f` (f32[10,3] or f32[<=10,3]) or `u` (u32[10] or u32[<=10])
# where the method takes a Shape
CALLS = {
    "iota": lambda b, f, u: b.iota(f, 0),
    "rng_uniform": lambda b, f, u: b.rng_uniform(np.float32(0), np.float32(1), f),
    "rng_normal": lambda b, f, u: b.rng_normal(np.float32(0), np.float32(1), f),
    "rng_bernoulli": lambda b, f, u: b.rng_bernoulli(np.float32(0.5), u),
    "rng_bit_generator": lambda b, f, u: b.rng_bit_generator("PHILOX", b.parameter(0, STATE), u),
    "infeed": lambda b, f, u: b.infeed(f),
    "infeed (a tuple)": lambda b, f, u: b.infeed(Shape.tuple([Shape.parse("s32[2]"), f])),
    "outfeed": lambda b, f, u: b.outfeed(b.parameter(0, Shape.parse("f32[10,3]")), f),
    "recv": lambda b, f, u: b.recv(f, 1),
    "custom_call": lambda b, f, u: b.custom_call("target", [], f),
    "custom_call (a tuple)": lambda b, f, u: b.custom_call("target", [], Shape.tuple([f])),
    "reshape": lambda b, f, u: b.reshape(b.parameter(0, Shape.parse("f32[30]")), f),
}


@pytest.mark.parametrize("what", sorted(CALLS))
def test_a_dynamic_shape_is_refused(what: str) -> None:
    method = what.split(" ")[0]
    b = xm.XlaBuilder("dyn")
    with pytest.raises(ShapeError, match=rf"^{method}: {method} does not accept a dynamic shape .*<=10"):
        CALLS[what](b, DYNAMIC, DYNAMIC_U32)


def test_a_dynamic_parameter_is_refused() -> None:
    with pytest.raises(ShapeError, match=r"^parameter\(f32\[<=10,3\]\): a parameter with a dynamic"):
        xm.XlaBuilder("dyn").parameter(0, DYNAMIC)


@pytest.mark.parametrize("what", sorted(CALLS))
def test_the_same_calls_with_static_shapes_build(what: str) -> None:
    """The refusal is the shape's dynamism alone: with the bounds as sizes the call builds."""
    op = CALLS[what](xm.XlaBuilder("static"), Shape.parse("f32[10,3]"), Shape.parse("u32[10]"))
    assert isinstance(op, xm.XlaOp)
