"""The Shape of an MLIR type, remembered by the type's text.

Verification and every lowering pattern read the shapes of the values they see, and a
program holds few distinct types: parsing each text once (`mlir_types`, a Python
tokenizer) instead of per use saves most of that time. Shapes are immutable, so one
object serves every use; a type that has no Shape raises each time (failures are not
remembered).
"""

from __future__ import annotations

from functools import lru_cache

from mlir import ir

from .mlir_types import shape_from_mlir_type_text
from .shape import Shape

__all__ = ["shape_of_type", "shape_of_type_text"]


@lru_cache(maxsize=4096)
def shape_of_type_text(text: str) -> Shape:
    """`shape_from_mlir_type_text(text)`, parsed once per text."""
    return shape_from_mlir_type_text(text)


def shape_of_type(t: ir.Type) -> Shape:
    return shape_of_type_text(str(t))
