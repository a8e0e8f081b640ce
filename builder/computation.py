"""XlaComputation: a built computation, held as the MLIR text of its module.

Imports `dialect`, `builder.emit` and `builder.graphviz`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..dialect.hlo_text import hlo_text
from ..dialect.shape import Shape
from ..dialect.verify import ENTRY
from . import graphviz
from .emit import ModuleEmitter, check_parameters

if TYPE_CHECKING:
    from .recorder import Recorder as XlaBuilder
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
        self._located_text: str | None = None

    @classmethod
    def from_builder(cls, builder: XlaBuilder, root: XlaOp) -> XlaComputation:
        params = check_parameters(builder)
        comp = cls(builder.name, [p.shape for p in params], root.shape, builder, root)
        comp.as_mlir_text()  # emit now, so errors surface at build()
        return comp

    @property
    def builder(self) -> XlaBuilder | None:
        """The builder that recorded the computation (None for one made from text)."""
        return self._builder

    @property
    def root(self) -> XlaOp | None:
        """The op the computation returns (None for one made from text)."""
        return self._root

    def program_shape(self) -> tuple[list[Shape], Shape]:
        return list(self._parameter_shapes), self._result_shape

    def emit_into(self, emitter: ModuleEmitter, name: str, private: bool = True) -> None:
        assert self._builder is not None and self._root is not None
        emitter.emit_function(name, check_parameters(self._builder), self._root, private=private)

    def as_mlir_text(self, locations: bool = False) -> str:
        """The module in the xhlo dialect; with `locations`, every op carries the Python
        file:line that built it (what the compiler parses, so diagnostics name it)."""
        if self._text is None:
            emitter = ModuleEmitter()
            self.emit_into(emitter, ENTRY, private=False)
            self._text, self._located_text = emitter.text()
        if locations:
            return self._located_text or self._text
        return self._text

    def as_hlo_text(self) -> str:
        """The computation in XLA's HLO text format (`%add.3 = f32[4]{0} add(...)`), as XLA
        users read it (dialect/hlo_text.py); parameters keep the names given to them."""
        names = None
        if self._builder is not None:
            names = [p.parameter_name for p in check_parameters(self._builder)]
        return hlo_text(self.as_mlir_text(), self.name, names)

    def __str__(self) -> str:
        return self.as_mlir_text()

    def __repr__(self) -> str:
        params, result = self.program_shape()
        return f"XlaComputation({self.name!r}: ({', '.join(map(str, params))}) -> {result})"

    def _cache_key(self) -> Any:
        return self.as_mlir_text()

    def to_dot(self) -> str:
        """The computation as a Graphviz graph (ops with shapes, sub-computations as clusters)."""
        return graphviz.to_dot(self)

    def render(self, path: str, fmt: str | None = None) -> str:
        """Render the graph with Graphviz's `dot` to `path` (format from its suffix)."""
        return graphviz.render(self, path, fmt)

    def _repr_svg_(self) -> str | None:
        return graphviz.svg(self)
