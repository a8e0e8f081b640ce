"""MLIR types of StableHLO -> xm.Shape. Anything without an XLA element type (f6E2M3FN,
quantized types, dynamic shapes) is an ImportError-free refusal: `Unsupported`, turned into a
CompileError naming the op by the importer."""

from __future__ import annotations

from typing import Any

from ..dialect.element_types import MLIR_ELEMENT_TYPES, PrimitiveType
from ..dialect.shape import Shape

# Every MLIR element type with an XLA type: i1, (s|u)i2..64, f16, bf16, f32, f64, complex,
# and the narrow floats (f8E5M2, f8E4M3FN, f8E4M3B11FNUZ, f8E5M2FNUZ, f8E4M3FNUZ, f8E4M3,
# f8E3M4, f4E2M1FN, f8E8M0FNU).
ELEMENT_TYPES: dict[str, PrimitiveType] = dict(MLIR_ELEMENT_TYPES)


class Unsupported(Exception):
    """A type (or attribute) this importer cannot express; the message says what and why."""


def element_type(mlir_type: Any) -> PrimitiveType:
    name = str(mlir_type)
    try:
        return ELEMENT_TYPES[name]
    except KeyError:
        raise Unsupported(f"element type {name} has no xlamlir counterpart (supported: "
                          f"{', '.join(ELEMENT_TYPES)})") from None


def shape_of(mlir_type: Any) -> Shape:
    """The xm.Shape of a tensor, tuple or token type; Unsupported for anything else."""
    from jaxlib.mlir import ir

    text = str(mlir_type)
    if hasattr(mlir_type, "maybe_downcast"):
        mlir_type = mlir_type.maybe_downcast()
    if text == "!stablehlo.token":
        return Shape.token()
    if isinstance(mlir_type, ir.TupleType):
        tuple_type = mlir_type
        return Shape.tuple([shape_of(tuple_type.get_type(i)) for i in range(tuple_type.num_types)])
    if isinstance(mlir_type, ir.RankedTensorType):
        tensor = mlir_type
        if not tensor.has_static_shape:
            raise Unsupported(f"{text} has a dynamic shape that stays dynamic after shape refinement "
                              "(xlamlir compiles static shapes only)")
        if tensor.encoding is not None:
            raise Unsupported(f"{text} has an encoding (bounded dynamism or sparsity), not supported")
        return Shape.array(element_type(tensor.element_type), list(tensor.shape))
    if isinstance(mlir_type, ir.UnrankedTensorType):
        raise Unsupported(f"{text} is unranked (xlamlir compiles static shapes only)")
    raise Unsupported(f"type {text} is not a tensor, tuple or token")
