"""The op registry: one `OpDef` per op of the xhlo dialect.

Everything else is derived from it: the builder methods, the verifier of xhlo
ops (`dialect.verify`: the ops are unregistered in MLIR) and the lowering
lookup. Imports only `dialect.errors` and `dialect.shape`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .shape import Shape

DIALECT = "xhlo"
#: The entry function of a module: what compile_mlir runs and export exports.
ENTRY = "main"


@dataclass(frozen=True)
class Operand:
    """A named operand; `variadic` ones take any number of values (0 or more)."""

    name: str
    variadic: bool = False


@dataclass(frozen=True)
class AttrKind:
    """How a Python attribute value maps onto a builtin MLIR attribute."""

    name: str


I64_ARRAY = AttrKind("i64_array")  # tuple of ints -> array<i64: ...>
INT = AttrKind("int")  # int -> i64 integer attribute
FLOAT = AttrKind("float")  # float -> f64 float attribute
BOOL = AttrKind("bool")  # bool -> builtin bool attribute
STR = AttrKind("str")  # str -> string attribute
ELEMENT_TYPE = AttrKind("element_type")  # PrimitiveType -> a type attribute
ELEMENTS = AttrKind("elements")  # numpy array -> dense elements of the result type
PAIRS = AttrKind("pairs")  # tuple of int pairs -> dense i64 tensor Nx2
SYMBOL = AttrKind("symbol")  # name of a private func.func sub-computation
DICT = AttrKind("dict")  # {str: tuple[int, ...] | int} -> dictionary of the above


@dataclass(frozen=True)
class OpDef:
    """One op of the dialect.

    `infer(*operand_shapes, **attrs) -> Shape` is the XLA shape rule; a
    variadic operand arrives as a tuple of shapes. `results` is the number of
    MLIR results; `None` means one per element of the inferred tuple shape.
    `builder` names the XlaBuilder method(s) generated from this entry, with
    `fixed` attributes for sugar (e.g. `eq` is `compare` with direction EQ).
    """

    name: str
    operands: tuple[Operand, ...]
    attrs: dict[str, AttrKind]
    infer: Callable[..., Shape]
    doc: str
    results: int | None = 1
    computations: tuple[str, ...] = ()
    builders: dict[str, dict[str, Any]] = field(default_factory=dict)
    side_effect: bool = False
    family: str = "other"  # "unary" / "binary" / "compare" get generated builder methods

    @property
    def full_name(self) -> str:
        return f"{DIALECT}.{self.name}"


REGISTRY: dict[str, OpDef] = {}


def define(opdef: OpDef) -> OpDef:
    if opdef.name in REGISTRY:
        raise ValueError(f"op {opdef.name} defined twice")
    REGISTRY[opdef.name] = opdef
    return opdef


def lookup(name: str) -> OpDef:
    """Registry entry by bare (`add`) or full (`xhlo.add`) name."""
    short = name.removeprefix(DIALECT + ".")
    return REGISTRY[short]
