"""Which dimensions of an xhlo module's values XLA would show as dynamic (`f32[<=10]`),
for the HLO text (dialect/hlo_text.py).

The module is static (docs/architecture.md, "Bounded dynamic shapes"): a dynamic value is
its padded array. What the module still says: a `set_dimension_size` result is dynamic
along its `dimension`, and an entry's `xhlo.dynamic_result` attribute names what it
returns. From the `set_dimension_size` results on, dynamism is propagated forward by the
rules the builder applies (builder/methods_dynamic.py, XLA's shape inference).
What the module does not say (docs/hlo_text.md): `remove_dynamic_dimension_size` emits no
op, so values computed after it from the same array still show as dynamic; a
`dynamic_reshape` output dimension whose size is the constant bound shows as static.
Imports `dialect` modules only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .registry import OpDef
from .shape import Shape

_ELEMENTWISE_FAMILIES = frozenset({"unary", "binary", "compare"})
# Element by element: each result dimension is dynamic where an operand of the same rank
# has it dynamic (scalar operands, clamp's bounds or a broadcast predicate, do not count).
_ELEMENTWISE_OPS = frozenset({"select", "clamp", "convert", "reduce_precision", "map",
                              "bitcast_convert", "reverse", "pad", "slice", "concatenate", "sort"})

Flags = tuple[bool, ...]


def result_shapes(opdef: OpDef, operands: Sequence[Any], attrs: dict[str, Any],
                  shape_of: Callable[[Any], Shape], statics: Sequence[Shape],
                  constant_of: Callable[[Any], int | None]) -> list[Shape]:
    """The op's result shapes (`statics`, as the MLIR types give them) with the dimensions
    XLA would show dynamic marked; `operands` are the op's operand values in order,
    `shape_of` gives an operand's shape as printed, `constant_of` the value of an integer
    scalar constant operand (None otherwise)."""
    name = opdef.name
    shapes = [shape_of(v) for v in operands]
    if name == "get_tuple_element":
        return [shapes[0].tuple_shapes[attrs["index"]]]
    if name == "tuple":
        return [Shape.tuple(shapes)]
    if not any(s.is_dynamic() for s in shapes) and name not in ("set_dimension_size", "dynamic_reshape"):
        return list(statics)
    flags = _flags(name, opdef.family, attrs, operands, shapes, statics, constant_of)
    if flags is None:
        return list(statics)
    return [s.with_dynamic_dimensions(flags) if s.is_array() and len(flags) == s.rank else s
            for s in statics]


def _flags(name: str, family: str, attrs: dict[str, Any], operands: Sequence[Any],
           shapes: list[Shape], statics: Sequence[Shape],
           constant_of: Callable[[Any], int | None]) -> Flags | None:
    """The dynamic flags of the (every) result, None when it is static."""
    rank = statics[0].rank if statics and statics[0].is_array() else 0
    arrays = [s for s in shapes if s.is_array()]
    if name == "set_dimension_size":
        flags = list(arrays[0].dynamic_dimensions)
        flags[attrs["dimension"]] = True
        return tuple(flags)
    if family in _ELEMENTWISE_FAMILIES or name in _ELEMENTWISE_OPS or name == "reduce":
        if name == "reduce":  # the inputs (then the inits): the dimensions not reduced are kept
            reduced = set(attrs["dimensions"])
            inputs = arrays[:len(arrays) // 2]
            return tuple(any(s.dynamic_dimensions[d] for s in inputs)
                         for d in range(inputs[0].rank) if d not in reduced)
        return tuple(any(s.dynamic_dimensions[d] for s in arrays if s.rank == rank)
                     for d in range(rank))
    operand = arrays[0] if arrays else None
    if name == "broadcast_in_dim":
        flags = [False] * rank
        for i, out in enumerate(attrs["broadcast_dimensions"]):
            flags[out] = operand.dynamic_dimensions[i]
        return tuple(flags)
    if name == "transpose":
        return tuple(operand.dynamic_dimensions[p] for p in attrs["permutation"])
    if name == "reshape":  # only a dynamic major dimension reshapes (builder/methods_dynamic.py)
        return (operand.dynamic_dimensions[0],) + (False,) * (rank - 1) if rank else None
    if name == "convolution":
        flags = [False] * rank
        flags[attrs["output_batch_dimension"]] = operand.dynamic_dimensions[attrs["input_batch_dimension"]]
        return tuple(flags)
    if name == "dot_general":
        return _dot_flags(attrs, shapes[0], shapes[1])
    if name == "dynamic_reshape":
        # The output sizes are the last `rank` operands: a static dimension's is the
        # constant bound, which a dynamic dimension of size bound also has (shown static).
        sizes = operands[len(operands) - rank:]
        return tuple(constant_of(s) != bound for s, bound in zip(sizes, statics[0].dimensions))
    return None  # the builder accepts no dynamic operand elsewhere


def _dot_flags(attrs: dict[str, Any], lhs: Shape, rhs: Shape) -> Flags:
    lb, rb = attrs["lhs_batch_dimensions"], attrs["rhs_batch_dimensions"]
    flags = [lhs.dynamic_dimensions[a] or rhs.dynamic_dimensions[b] for a, b in zip(lb, rb)]
    lhs_gone = set(lb) | set(attrs["lhs_contracting_dimensions"])
    rhs_gone = set(rb) | set(attrs["rhs_contracting_dimensions"])
    flags += [f for d, f in enumerate(lhs.dynamic_dimensions) if d not in lhs_gone]
    flags += [f for d, f in enumerate(rhs.dynamic_dimensions) if d not in rhs_gone]
    return tuple(flags)
