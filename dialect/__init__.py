"""The xhlo dialect: types and shapes, the op registry and its verifier.

Importing this package registers every op. Imports nothing outside `dialect`.
"""

from . import (  # noqa: F401  (registration side effects)
    ops_collective,
    ops_control,
    ops_conv,
    ops_core,
    ops_custom,
    ops_dot,
    ops_dynamic,
    ops_elementwise,
    ops_fft,
    ops_indexing,
    ops_io,
    ops_linear_algebra,
    ops_reduce,
    ops_rng,
    ops_shape,
    ops_sort,
)
from .element_types import PrimitiveType, dtype_of, type_of
from .errors import ArgumentError, CompileError, ShapeError, XlaError
from .layout import Layout
from .registry import DIALECT, REGISTRY, OpDef, lookup
from .shape import Shape

__all__ = [
    "ArgumentError", "CompileError", "ShapeError", "XlaError", "DIALECT", "REGISTRY", "OpDef",
    "lookup", "Layout", "PrimitiveType", "Shape", "dtype_of", "type_of",
]
