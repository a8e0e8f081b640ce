"""XlaBuilder: the whole builder API in one class statement.

Each base is one family of methods (`builder/methods_<family>.py`), all deriving from
`Recorder` (`builder/recorder.py`), which records ops and holds parameters, constants,
tuples, sub-computation tracing and `build`. `GeneratedMethods` holds the methods made
from the op registry (the elementwise unary/binary ops and the comparison directions),
so a new op of that kind needs no builder edit (docs/adding_ops.md); it comes last, so
a hand-written method of the same name would take precedence. Imports `dialect`.
"""

from __future__ import annotations

from .methods_batch_norm import BatchNormMethods
from .methods_collective import CollectiveMethods
from .methods_control import ControlMethods
from .methods_conv import ConvMethods
from .methods_custom import CustomCallMethods
from .methods_dot import DotMethods
from .methods_dynamic import DynamicMethods
from .methods_elementwise import ElementwiseMethods
from .methods_fft import FftMethods
from .methods_generated import GeneratedMethods
from .methods_indexing import IndexingMethods
from .methods_io import IoMethods
from .methods_linear_algebra import LinearAlgebraMethods
from .methods_reduce import ReduceMethods
from .methods_rng import RngMethods
from .methods_shape import ShapeMethods
from .methods_sort import SortMethods


class XlaBuilder(ElementwiseMethods, ShapeMethods, ReduceMethods, ControlMethods, ConvMethods,
                 BatchNormMethods, DotMethods, IndexingMethods, SortMethods, LinearAlgebraMethods,
                 FftMethods, RngMethods, CollectiveMethods, IoMethods, CustomCallMethods,
                 DynamicMethods, GeneratedMethods):
    """Builds one computation: `parameter`, `constant`, the ops, then `build`
    (the API of ../shared/API.md; `help(XlaBuilder)` lists every method by family)."""
