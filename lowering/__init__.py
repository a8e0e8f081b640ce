"""Lowering of the xhlo dialect to LLVM: patterns, the entry boundary and the Pipeline.

Imports `dialect`.
"""

from .pipeline import Pipeline

__all__ = ["Pipeline"]
