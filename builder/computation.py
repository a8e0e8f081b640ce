"""XlaComputation: a built computation, held as the MLIR text of its module.

Imports `dialect` and `builder.emit`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..dialect.shapes import Shape
from .emit import ModuleEmitter, check_parameters

if TYPE_CHECKING:
    from .builder import XlaBuilder
    from .xla_op import XlaOp


class XlaComputation:
    """A closed computation: parameters, a root, and the module text in the xhlo dialect."""

    def __init__(self, name: str, parameter_shapes: list[Shape], result_shape: Shape,
                 builder: XlaBuilder | None = None, root: XlaOp | None = None,
                 text: str | None = None) -> None:
        self.name = name
        self._parameter_shapes = parameter_shapes
        self._result_shape = result_shape
        self._builder = builder
        self._root = root
        self._text = text

    @classmethod
    def from_builder(cls, builder: XlaBuilder, root: XlaOp) -> XlaComputation:
        params = check_parameters(builder)
        comp = cls(builder.name, [p.shape for p in params], root.shape, builder, root)
        comp.as_mlir_text()  # emit now, so errors surface at build()
        return comp

    def program_shape(self) -> tuple[list[Shape], Shape]:
        return list(self._parameter_shapes), self._result_shape

    def emit_into(self, emitter: ModuleEmitter, name: str, private: bool = True) -> None:
        assert self._builder is not None and self._root is not None
        emitter.emit_function(name, check_parameters(self._builder), self._root, private=private)

    def as_mlir_text(self) -> str:
        if self._text is None:
            emitter = ModuleEmitter()
            self.emit_into(emitter, "main", private=False)
            self._text = emitter.text()
        return self._text

    def __str__(self) -> str:
        return self.as_mlir_text()

    def __repr__(self) -> str:
        params, result = self.program_shape()
        return f"XlaComputation({self.name!r}: ({', '.join(map(str, params))}) -> {result})"

    def _cache_key(self) -> Any:
        return self.as_mlir_text()
