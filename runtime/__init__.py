"""Compiling and running: compile, compile_mlir, Executable. Imports `dialect`, `lowering`."""

from .compiler import clear_cache, compile, compile_mlir
from .executable import Executable

__all__ = ["clear_cache", "compile", "compile_mlir", "Executable"]
