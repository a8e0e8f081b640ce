"""Bounded dynamic shapes: `set_dimension_size` (the padded data as is) and
`dynamic_reshape` (one linalg.generic reading the operand by runtime sizes).

The masking other ops need (reduce, dot) is emitted by the builder as ordinary ops
(`builder/methods_dynamic.py`), so nothing else in the lowering knows about dynamism.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ...dialect.element_types import PrimitiveType
from ..patterns.framework import OpView, lowers
from ..scalar.arithmetic import Elem
from ..scalar.storage import from_storage
from .elementwise import generic


@lowers("set_dimension_size")
def lower_set_dimension_size(v: OpView) -> ir.Value:
    return v.args["operand"]


def _clamped_size(size_tensor: ir.Value, bound: int) -> ir.Value:
    """A runtime size as an index in [0, bound]: XLA leaves other sizes undefined, and the
    indices computed from it must stay in bounds."""
    index = ir.IndexType.get()
    size = arith.index_cast(index, tensor.extract(size_tensor, []))
    size = arith.maxsi(size, arith.constant(index, 0))
    return arith.minsi(size, arith.constant(index, bound))


def _zero(t: PrimitiveType) -> ir.Value:
    return Elem(t).const(0.0 if t.is_floating or t.is_complex else 0)


@lowers("dynamic_reshape")
def lower_dynamic_reshape(v: OpView) -> ir.Value:
    """out[i] = operand[unravel(ravel(i, output sizes), input sizes)] inside the output sizes,
    zero in the padding. Row-major order over the valid regions, as XLA's reshape."""
    operand_shape = v.shapes["operand"]
    out = v.result_shape
    t = out.element_type
    index = ir.IndexType.get()
    if operand_shape.numel == 0:  # nothing to read: every element is padding
        return generic([], [], out, v.result_type, lambda: _zero(t))
    operand = v.args["operand"]
    in_sizes = [_clamped_size(s, b) for s, b in zip(v.args["input_sizes"], operand_shape.dimensions)]
    out_sizes = [_clamped_size(s, b) for s, b in zip(v.args["output_sizes"], out.dimensions)]
    one = arith.constant(index, 1)
    # A zero-sized input dimension would divide by zero below; the output is then all padding
    # (or the sizes disagree, which XLA leaves undefined).
    divisors = [arith.maxsi(s, one) for s in in_sizes]

    def body() -> ir.Value:
        linear = arith.constant(index, 0)
        valid = arith.constant(ir.IntegerType.get_signless(1), 1)
        for d, size in enumerate(out_sizes):
            i = linalg.IndexOp(d).result
            linear = arith.addi(arith.muli(linear, size), i)
            valid = arith.andi(valid, arith.cmpi(arith.CmpIPredicate.ult, i, size))
        indices: list[ir.Value] = []
        for divisor in reversed(divisors):
            indices.append(arith.remui(linear, divisor))
            linear = arith.divui(linear, divisor)
        value = from_storage(tensor.extract(operand, list(reversed(indices))), t)
        return arith.select(valid, value, _zero(t))

    return generic([], [], out, v.result_type, body)
