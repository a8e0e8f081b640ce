"""The xhlo dialect: types and shapes, the op registry and its IRDL form.

Importing this package registers every op. Imports nothing outside `dialect`.
"""

from . import ops_core, ops_dot, ops_elementwise, ops_reduce, ops_shape  # noqa: F401  (registration)
from .errors import ArgumentError, CompileError, ShapeError, XlaError
from .registry import DIALECT, REGISTRY, OpDef, lookup
from .shapes import Layout, PrimitiveType, Shape, dtype_of, type_of

__all__ = [
    "ArgumentError", "CompileError", "ShapeError", "XlaError", "DIALECT", "REGISTRY", "OpDef",
    "lookup", "Layout", "PrimitiveType", "Shape", "dtype_of", "type_of",
]
