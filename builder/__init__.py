"""The XlaBuilder API: XlaBuilder, XlaOp, XlaComputation. Imports `dialect`."""

from . import methods, methods_dot, methods_reduce, methods_shape
from .builder import XlaBuilder
from .computation import XlaComputation
from .xla_op import XlaOp

methods.install()
for _module in (methods_shape, methods_reduce, methods_dot):
    for _name, _fn in _module.METHODS.items():
        setattr(XlaBuilder, _name, _fn)

__all__ = ["XlaBuilder", "XlaComputation", "XlaOp"]
