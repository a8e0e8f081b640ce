"""The XlaBuilder API: XlaBuilder, XlaOp, XlaComputation. Imports `dialect`."""

from . import (
    methods,
    methods_collective,
    methods_control,
    methods_conv,
    methods_custom,
    methods_dot,
    methods_fft,
    methods_indexing,
    methods_io,
    methods_linear_algebra,
    methods_reduce,
    methods_rng,
    methods_shape,
    methods_sort,
)
from .builder import XlaBuilder
from .computation import XlaComputation
from .xla_op import XlaOp

methods.install()
_FAMILIES = (methods_collective, methods_control, methods_conv, methods_custom, methods_dot, methods_fft,
             methods_indexing, methods_io, methods_linear_algebra, methods_reduce, methods_rng,
             methods_shape, methods_sort)
for _module in _FAMILIES:
    for _name, _fn in _module.METHODS.items():
        setattr(XlaBuilder, _name, _fn)

__all__ = ["XlaBuilder", "XlaComputation", "XlaOp"]
