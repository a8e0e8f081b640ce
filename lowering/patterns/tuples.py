"""Tuple values in the middle of lowering: built from and taken apart into their array leaves.

Lowerings work on array leaves (tensors); where an op's operand or result is a
tuple, these helpers look through `xhlo.tuple` ops or build new ones, which
fold away once every op is lowered. Imports `dialect` and `patterns.framework`.
"""

from __future__ import annotations

from mlir import ir

from .framework import cast


def make_tuple(values: list[ir.Value], tuple_type: ir.Type) -> ir.Value:
    return ir.Operation.create("xhlo.tuple", results=[tuple_type], operands=values).results[0]


def get_tuple_element(value: ir.Value, index: int, result_type: ir.Type) -> ir.Value:
    attr = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), index)
    return ir.Operation.create("xhlo.get_tuple_element", results=[result_type], operands=[value],
                               attributes={"index": attr}).results[0]


def tuple_leaves(value: ir.Value) -> list[ir.Value]:
    """The array leaves of a (possibly tuple) value, looking through xhlo.tuple ops."""
    if not isinstance(value.type, ir.TupleType) and not str(value.type).startswith("tuple<"):
        return [value]
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.operation.name == "xhlo.tuple":
        elements = list(owner.operation.operands)
    else:
        tuple_type = ir.TupleType(value.type)
        elements = [get_tuple_element(value, i, tuple_type.get_type(i)) for i in range(tuple_type.num_types)]
    return [leaf for e in elements for leaf in tuple_leaves(e)]


def rebuild_tuple(leaves: list[ir.Value], tuple_type: ir.Type, cast_leaves: bool = False) -> ir.Value:
    """The nested tuple of `tuple_type` built from its leaves, in order (cast to the
    tuple's element types if `cast_leaves`)."""
    it = iter(leaves)

    def build(t: ir.Type) -> ir.Value:
        if not str(t).startswith("tuple<"):
            return cast(next(it), t) if cast_leaves else next(it)
        tt = ir.TupleType(t)
        return make_tuple([build(tt.get_type(i)) for i in range(tt.num_types)], t)

    return build(tuple_type)
