"""xlamlir: XLA's operation semantics as a Python library on upstream MLIR.

Build a computation with `XlaBuilder`, compile it with `compile` (or a module
given as text with `compile_mlir`), and call the executable on numpy arrays.
"""

from . import distributed  # xm.distributed: replicas over MPI
from .builder import XlaBuilder, XlaComputation, XlaOp
from .dialect.element_types import (
    BF16,
    C64,
    C128,
    F4E2M1FN,
    F8E3M4,
    F8E4M3,
    F8E4M3B11FNUZ,
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    F8E8M0FNU,
    F16,
    F32,
    F64,
    PRED,
    S2,
    S4,
    S8,
    S16,
    S32,
    S64,
    TOKEN,
    TUPLE,
    U2,
    U4,
    U8,
    U16,
    U32,
    U64,
    PrimitiveType,
    dtype_of,
    type_of,
)
from .dialect.errors import ArgumentError, CompileError, ShapeError, XlaError
from .dialect.layout import Layout
from .dialect.ops_conv import ConvDimensionNumbers
from .dialect.ops_dot import DotDimensionNumbers, RaggedDotDimensionNumbers
from .dialect.ops_indexing import GatherDimensionNumbers, ScatterDimensionNumbers
from .dialect.shape import Shape
from .lowering import Pipeline
from .runtime import Executable, compile, compile_mlir
from .runtime.custom_calls import CustomCallError, register_custom_call
from .runtime.replicas import CollectiveError
from .stablehlo_import import import_stablehlo, jit  # jax is imported only when they are called

__all__ = [
    "XlaBuilder", "XlaComputation", "XlaOp", "ArgumentError", "CompileError", "ShapeError",
    "XlaError", "BF16", "C64", "C128", "F16", "F32", "F64", "PRED", "S8", "S16", "S32", "S64",
    "TOKEN", "TUPLE", "U8", "U16", "U32", "U64", "S2", "S4", "U2", "U4", "F8E5M2", "F8E4M3FN",
    "F8E4M3B11FNUZ", "F8E5M2FNUZ", "F8E4M3FNUZ", "F8E4M3", "F8E3M4", "F4E2M1FN", "F8E8M0FNU",
    "Layout", "PrimitiveType", "Shape", "dtype_of",
    "type_of", "Pipeline", "Executable", "compile", "compile_mlir", "DotDimensionNumbers",
    "RaggedDotDimensionNumbers",
    "register_custom_call", "CustomCallError", "GatherDimensionNumbers", "ScatterDimensionNumbers",
    "ConvDimensionNumbers", "CollectiveError", "distributed", "import_stablehlo", "jit",
]
__version__ = "0.1.0"
