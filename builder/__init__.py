"""The XlaBuilder API: XlaBuilder, XlaOp, XlaComputation. Imports `dialect`."""

from .builder import XlaBuilder
from .computation import XlaComputation
from .xla_op import XlaOp

__all__ = ["XlaBuilder", "XlaComputation", "XlaOp"]
