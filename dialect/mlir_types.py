"""Shapes as MLIR types of the project's dialect: ``tensor<2x3xf32>``, ``tuple<...>``, ``!xhlo.token``.

Layouts are not part of the MLIR type (the boundary carries them as attributes).
"""

from __future__ import annotations

import re

from .element_types import MLIR_ELEMENT_TYPES, TOKEN_MLIR_TYPE
from .errors import ShapeError
from .shape import Shape

__all__ = ["TOKEN_MLIR_TYPE", "shape_from_mlir_type_text", "to_mlir_type_text"]


def to_mlir_type_text(shape: Shape) -> str:
    """The MLIR type of ``shape`` in the project's dialect: ``tensor<2x3xf32>``,
    ``tensor<f32>``, ``tensor<2xcomplex<f32>>``, ``tuple<tensor<2xf32>, tensor<i32>>``,
    ``!xhlo.token``. Layouts are not part of the MLIR type."""
    if not isinstance(shape, Shape):
        raise ShapeError("to_mlir_type_text", [], f"expected a Shape, got {shape!r}")
    if shape.is_tuple():
        return "tuple<" + ", ".join(to_mlir_type_text(s) for s in shape.tuple_shapes) + ">"
    if shape.is_token():
        return TOKEN_MLIR_TYPE
    return (
        "tensor<"
        + "".join(f"{d}x" for d in shape.dimensions)
        + (shape.element_type.mlir_name + ">")
    )


class _MlirTypeParser:
    _SPACE = re.compile(r"\s*")
    _DIM = re.compile(r"([0-9]+)\s*x")
    _ELEM = re.compile(r"complex\s*<\s*[a-z0-9]+\s*>|[a-z][a-zA-Z0-9]*")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, why: str) -> ShapeError:
        return ShapeError(
            "shape_from_mlir_type_text",
            [],
            f"unsupported MLIR type {self.text!r}: {why} at offset {self.pos}",
        )

    def skip(self) -> None:
        m = self._SPACE.match(self.text, self.pos)
        assert m is not None
        self.pos = m.end()

    def take(self, word: str) -> bool:
        self.skip()
        if self.text.startswith(word, self.pos):
            self.pos += len(word)
            return True
        return False

    def type(self) -> Shape:
        if self.take(TOKEN_MLIR_TYPE):
            return Shape.token()
        if self.take("tuple<"):
            elems: list[Shape] = []
            if self.take(">"):
                return Shape.tuple(elems)
            while True:
                elems.append(self.type())
                if self.take(","):
                    continue
                if self.take(">"):
                    return Shape.tuple(elems)
                raise self.fail("expected ',' or '>' in tuple")
        if self.take("tensor<"):
            dims: list[int] = []
            while True:
                self.skip()
                m = self._DIM.match(self.text, self.pos)
                if m is None:
                    break
                dims.append(int(m.group(1)))
                self.pos = m.end()
            self.skip()
            m = self._ELEM.match(self.text, self.pos)
            if m is None:
                raise self.fail("expected a static dimension or an element type")
            name = re.sub(r"\s+", "", m.group())
            et = MLIR_ELEMENT_TYPES.get(name)
            if et is None:
                raise self.fail(f"unsupported element type {name!r}")
            self.pos = m.end()
            if not self.take(">"):
                raise self.fail("expected '>' closing the tensor type")
            return Shape.array(et, dims)
        raise self.fail("expected tensor<...>, tuple<...> or " + TOKEN_MLIR_TYPE)

    def parse(self) -> Shape:
        if not isinstance(self.text, str):
            raise ShapeError("shape_from_mlir_type_text", [], f"expected a str, got {self.text!r}")
        s = self.type()
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("trailing text")
        return s


def shape_from_mlir_type_text(text: str) -> Shape:
    """The :class:`Shape` (default layouts) of an MLIR type as printed by MLIR:
    ``tensor<2x3xf32>``, ``tensor<f32>``, ``tensor<4xcomplex<f64>>``, ``tensor<4xsi32>``
    (signless and signed ints both give S*), ``tuple<tensor<2xf32>, tuple<>>``,
    ``!xhlo.token``. Dynamic dimensions, encodings, memrefs, vectors and other
    types raise :class:`ShapeError`."""
    return _MlirTypeParser(text).parse()
