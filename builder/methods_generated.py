"""GeneratedMethods: the XlaBuilder methods that are 1:1 with a registry entry, made from
the registry when this module is imported, so that a new op of these kinds needs no
builder edit (docs/adding_ops.md shows one being added).

An entry of family
- "unary" gives `name(operand)`, emitting the op;
- "binary" gives `name(lhs, rhs, broadcast_dimensions=())` with XLA's implicit
  broadcasting (`builder.broadcasting`), a Python scalar on either side standing for
  a constant of the other side's element type;
- "compare" gives, for every builder name with a fixed `comparison_direction`
  (`eq`, `lt`...), `name(lhs, rhs, broadcast_dimensions=())`, i.e.
  `compare(lhs, rhs, direction, None, broadcast_dimensions)`;
one method per name in the entry's `builders=` (`compare` itself, with its direction
argument, is hand-written in ElementwiseMethods). XlaBuilder lists this class last,
so a hand-written method of the same name takes precedence. The methods are ordinary functions with a name,
a signature and a docstring, so `help(xm.XlaBuilder)` and `dir()` list them.
Imports `dialect` and `builder.recorder`.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

from ..dialect.registry import REGISTRY, OpDef
from .broadcasting import broadcast_binary_operands
from .recorder import Recorder
from .xla_op import Scalar, XlaOp

GENERATED_FAMILIES = ("unary", "binary", "compare")


def _unary(opdef: OpDef) -> Callable[..., XlaOp]:
    def method(self: Recorder, operand: XlaOp) -> XlaOp:
        return self.emit(opdef, [operand])

    return method


def _binary(opdef: OpDef) -> Callable[..., XlaOp]:
    def method(self: Recorder, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar,
               broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        lhs, rhs = broadcast_binary_operands(self, opdef.name, lhs, rhs, broadcast_dimensions)
        return self.emit(opdef, [lhs, rhs])

    return method


def _direction(direction: str) -> Callable[..., XlaOp]:
    def method(self: Any, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar,
               broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        return self.compare(lhs, rhs, direction, None, broadcast_dimensions)

    return method


def registry_methods() -> dict[str, Callable[..., XlaOp]]:
    """name -> method for every builder name of a unary/binary/compare registry entry."""
    methods: dict[str, Callable[..., XlaOp]] = {}
    for opdef in REGISTRY.values():
        if opdef.family not in GENERATED_FAMILIES:
            continue
        for name, fixed in opdef.builders.items():
            if opdef.family == "unary":
                fn, doc = _unary(opdef), opdef.doc
            elif opdef.family == "binary":
                fn, doc = _binary(opdef), opdef.doc + " Broadcasts as XLA does."
            elif "comparison_direction" in fixed:
                direction = fixed["comparison_direction"]
                fn = _direction(direction)
                doc = f"Elementwise lhs {direction} rhs, giving pred (spec#compare)."
            else:
                continue  # `compare` itself is hand-written (ElementwiseMethods)
            fn.__name__ = name
            fn.__qualname__ = f"GeneratedMethods.{name}"
            fn.__doc__ = f"{doc}\n\nGenerated from the registry entry xhlo.{opdef.name}."
            methods[name] = fn
    return methods


def _body(namespace: dict[str, Any]) -> None:
    namespace["__doc__"] = __doc__
    namespace["__module__"] = __name__
    namespace.update(registry_methods())


# A class statement cannot list methods it does not know yet; new_class fills the namespace
# before the class is created, so Recorder.__init_subclass__ wraps them like any other.
GeneratedMethods = types.new_class("GeneratedMethods", (Recorder,), exec_body=_body)
