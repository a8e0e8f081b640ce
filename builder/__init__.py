"""The XlaBuilder API: XlaBuilder, XlaOp, XlaComputation. Imports `dialect`."""

from . import methods
from .builder import XlaBuilder
from .computation import XlaComputation
from .xla_op import XlaOp

methods.install()

__all__ = ["XlaBuilder", "XlaComputation", "XlaOp"]
