"""XLA's shape: an immutable, hashable array (element type, dimensions, layout), tuple or token,
and its text form (``f32[2,3]{0,1}``, ``(f32[2], s32[])``, ``token[]``): ``str`` and a parser.

An array dimension may be *dynamic* with a static bound (XLA's bounded dynamism, text
``f32[<=10,3]``): ``dimensions`` holds the bound, the runtime size travels beside the value.

Pure Python; imports nothing of ours outside ``dialect`` (element types, layout, errors).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .element_types import PrimitiveType, dtype_of, type_of
from .errors import ShapeError
from .layout import Layout
from .sequences import int_list

__all__ = ["Shape"]


class Shape:
    """An XLA shape: an array (element type, dimensions, layout), a tuple of shapes, or a token.

    Immutable, hashable and ``==`` by value; the layout takes part
    (``f32[2,3]{0,1} != f32[2,3]``), and an array made without a layout has
    the default one, so giving the default layout explicitly changes nothing.
    Build with :meth:`array`, :meth:`tuple`, :meth:`token`, :meth:`scalar` or
    :meth:`parse`; ``Shape(text)`` is :meth:`parse` too.
    """

    __slots__ = ("_dimensions", "_dynamic", "_element_type", "_hash", "_layout", "_tuple_shapes")
    _element_type: PrimitiveType
    _dimensions: tuple[int, ...]
    _dynamic: tuple[bool, ...]  # () when every dimension is static, else one flag per dimension
    _layout: Layout | None
    _tuple_shapes: tuple[Shape, ...]
    _hash: int

    def __init__(self, text: str) -> None:
        parsed = Shape.parse(text)
        for name in Shape.__slots__:
            object.__setattr__(self, name, object.__getattribute__(parsed, name))

    @classmethod
    def _make(
        cls,
        element_type: PrimitiveType,
        dimensions: tuple[int, ...],
        layout: Layout | None,
        tuple_shapes: tuple[Shape, ...],
        dynamic: tuple[bool, ...] = (),
    ) -> Shape:
        s = object.__new__(cls)
        dynamic = dynamic if any(dynamic) else ()
        object.__setattr__(s, "_element_type", element_type)
        object.__setattr__(s, "_dimensions", dimensions)
        object.__setattr__(s, "_dynamic", dynamic)
        object.__setattr__(s, "_layout", layout)
        object.__setattr__(s, "_tuple_shapes", tuple_shapes)
        object.__setattr__(
            s, "_hash", hash((int(element_type), dimensions, dynamic, layout, tuple_shapes))
        )
        return s

    # ---- constructors -------------------------------------------------------------------------

    @classmethod
    def array(
        cls,
        element_type: Any,
        dims: Iterable[int],
        minor_to_major: Iterable[int] | Layout | None = None,
        dynamic_dimensions: Iterable[bool] | None = None,
    ) -> Shape:
        """An array shape. ``element_type``: a :class:`PrimitiveType` or anything
        :func:`type_of` accepts (not TUPLE/TOKEN). ``dims``: non-negative ints.
        ``minor_to_major``: a permutation of ``range(rank)`` (or a :class:`Layout`);
        ``None`` means the default row-major layout. ``dynamic_dimensions``: one bool per
        dimension, True for a dynamic one whose ``dims`` entry is its bound (``f32[<=10]``);
        ``None`` means all static."""
        et = type_of(element_type)
        if not et.is_array_type:
            raise ShapeError(
                "Shape.array",
                [],
                f"{et.text_name} is not an array element type; use "
                f"Shape.{'tuple' if et is PrimitiveType.TUPLE else 'token'}()",
            )
        dimensions = int_list(dims, "dimensions", "Shape.array")
        for d in dimensions:
            if d < 0:
                raise ShapeError(
                    "Shape.array", [], f"dimensions must be non-negative, got {list(dimensions)}"
                )
        rank = len(dimensions)
        if minor_to_major is None:
            layout = Layout.default(rank)
        else:
            mtm = (
                minor_to_major.minor_to_major
                if isinstance(minor_to_major, Layout)
                else int_list(minor_to_major, "minor_to_major", "Shape.array")
            )
            if sorted(mtm) != list(range(rank)):
                raise ShapeError(
                    "Shape.array",
                    [],
                    f"minor_to_major {list(mtm)} is not a permutation of "
                    f"range({rank}) for dimensions {list(dimensions)}",
                )
            layout = Layout(mtm)
        return cls._make(et, dimensions, layout, (), _dynamic_flags(dynamic_dimensions, rank))

    @classmethod
    def scalar(cls, element_type: Any) -> Shape:
        """A rank-0 array shape."""
        return cls.array(element_type, ())

    @classmethod
    def token(cls) -> Shape:
        """The token shape ``token[]``."""
        return _TOKEN_SHAPE

    @classmethod
    def parse(cls, text: str) -> Shape:
        """Parses XLA's shape text: ``f32[2,3]``, ``f32[2,3]{0,1}``, ``pred[]``,
        ``f32[]{}``, ``f32[<=10,3]`` (dimension 0 dynamic, bounded by 10), ``(f32[2], s32[])``,
        ``((), token[])``. Whitespace and ``/*...*/`` comments between tokens are allowed; anything malformed
        raises :class:`ShapeError` naming the text."""
        if not isinstance(text, str):
            raise ShapeError("Shape.parse", [], f"expected a str, got {type(text).__name__}")
        return _ShapeParser(text).parse()

    # Defined last among the constructors: inside the class body, ``tuple`` means this method
    # from here on (function bodies and string annotations still see the builtin).
    @classmethod
    def tuple(cls, shapes: Iterable[Shape]) -> Shape:
        """A tuple shape of ``shapes`` (a list/tuple of Shapes; nested and empty allowed)."""
        if isinstance(shapes, (Shape, str, bytes)) or not isinstance(shapes, Iterable):
            raise ShapeError("Shape.tuple", [], f"expected a sequence of Shapes, got {shapes!r}")
        elems = []
        for s in shapes:
            if not isinstance(s, Shape):
                raise ShapeError("Shape.tuple", [], f"tuple elements must be Shapes, got {s!r}")
            elems.append(s)
        return cls._make(PrimitiveType.TUPLE, (), None, (*elems,))

    # ---- attributes ---------------------------------------------------------------------------

    @property
    def element_type(self) -> PrimitiveType:
        """The element type; ``TUPLE`` for tuples and ``TOKEN`` for the token."""
        return self._element_type

    @property
    def dimensions(self) -> tuple[int, ...]:
        """Dimension sizes; ``()`` for scalars, tuples and tokens."""
        return self._dimensions

    @property
    def dynamic_dimensions(self) -> tuple[bool, ...]:
        """One flag per dimension, True where it is dynamic (its size a bound); ``()`` for
        tuples and tokens."""
        return self._dynamic or (False,) * len(self._dimensions)

    def is_dynamic_dimension(self, dimension: int) -> bool:
        """Whether array dimension ``dimension`` (in ``[0, rank)``) is dynamic."""
        self._require_array("Shape.is_dynamic_dimension")
        if isinstance(dimension, bool) or not isinstance(dimension, (int, np.integer)) or not (
            0 <= dimension < len(self._dimensions)
        ):
            raise ShapeError(
                "Shape.is_dynamic_dimension",
                [self],
                f"dimension {dimension!r} is out of range for rank {len(self._dimensions)}",
            )
        return bool(self._dynamic) and self._dynamic[dimension]

    def is_dynamic(self) -> bool:
        """Whether any dimension is dynamic, also inside tuples."""
        return bool(self._dynamic) or any(s.is_dynamic() for s in self._tuple_shapes)

    def with_dynamic_dimensions(self, dynamic_dimensions: Iterable[bool] | None) -> Shape:
        """The same array shape (dimensions as bounds, layout) with these dynamic flags
        (``None``: all static)."""
        self._require_array("Shape.with_dynamic_dimensions")
        flags = _dynamic_flags(dynamic_dimensions, len(self._dimensions))
        return Shape._make(self._element_type, self._dimensions, self._layout, (), flags)

    @property
    def rank(self) -> int:
        return len(self._dimensions)

    @property
    def layout(self) -> Layout | None:
        """The array's layout (default row-major if none was given); None for tuples/tokens."""
        return self._layout

    @property
    def tuple_shapes(self) -> tuple[Shape, ...]:
        """The element shapes of a tuple; ``()`` for anything else."""
        return self._tuple_shapes

    def is_array(self) -> bool:
        return self._element_type.is_array_type

    def is_tuple(self) -> bool:
        return self._element_type is PrimitiveType.TUPLE

    def is_token(self) -> bool:
        return self._element_type is PrimitiveType.TOKEN

    def is_scalar(self) -> bool:
        """A rank-0 array."""
        return self.is_array() and not self._dimensions

    def has_default_layout(self) -> bool:
        """Arrays: whether the layout is row-major. Tuples: whether every element's is.
        Tokens: True."""
        if self._layout is not None:
            return self._layout.is_default()
        return all(s.has_default_layout() for s in self._tuple_shapes)

    def _require_array(self, what: str) -> None:
        if not self.is_array():
            raise ShapeError(what, [self], "needs an array shape")

    @property
    def numel(self) -> int:
        """Number of elements (product of the dimensions; 1 for a scalar). Arrays only."""
        self._require_array("Shape.numel")
        return math.prod(self._dimensions)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the element type. Arrays only."""
        self._require_array("Shape.dtype")
        return dtype_of(self._element_type)

    @property
    def byte_size(self) -> int:
        """Bytes of a dense array of this shape (``numel * byte_width``). Arrays only."""
        return self.numel * self._element_type.byte_width

    def byte_strides(self) -> tuple[int, ...]:
        """numpy-style byte strides of a dense array stored in this shape's layout
        (row-major for the default layout, Fortran order for ``{0,1,...}``). Arrays only."""
        self._require_array("Shape.byte_strides")
        assert self._layout is not None
        strides = [0] * len(self._dimensions)
        step = self._element_type.byte_width
        for d in self._layout.minor_to_major:
            strides[d] = step
            step *= self._dimensions[d]
        return tuple(strides)

    def with_dims(self, dims: Iterable[int]) -> Shape:
        """An array shape of the same element type with ``dims`` and the default layout."""
        self._require_array("Shape.with_dims")
        return Shape.array(self._element_type, dims)

    def with_element_type(self, element_type: Any) -> Shape:
        """An array shape with the same dimensions (and dynamic ones), ``element_type`` and
        the default layout."""
        self._require_array("Shape.with_element_type")
        return Shape.array(element_type, self._dimensions, None, self._dynamic or None)

    def with_layout(self, minor_to_major: Iterable[int] | Layout | None) -> Shape:
        """The same array shape with another layout (``None``: the default)."""
        self._require_array("Shape.with_layout")
        return Shape.array(self._element_type, self._dimensions, minor_to_major, self._dynamic or None)

    def with_default_layout(self) -> Shape:
        """This shape with every array (also inside tuples) given the default layout."""
        if self.is_tuple():
            return Shape.tuple([s.with_default_layout() for s in self._tuple_shapes])
        if self.is_token() or self.has_default_layout():
            return self
        return Shape.array(self._element_type, self._dimensions, None, self._dynamic or None)

    def flatten(self) -> list[Shape]:
        """The leaf array and token shapes, depth-first, left to right."""
        return list(self._leaves())

    def _leaves(self) -> Iterator[Shape]:
        if self.is_tuple():
            for s in self._tuple_shapes:
                yield from s._leaves()
        else:
            yield self

    # ---- protocol -----------------------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Shape is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Shape is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Shape):
            return NotImplemented
        if self is other:
            return True
        return (
            self._hash == other._hash
            and self._element_type is other._element_type
            and self._dimensions == other._dimensions
            and self._dynamic == other._dynamic
            and self._layout == other._layout
            and self._tuple_shapes == other._tuple_shapes
        )

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        if self.is_tuple():
            return "(" + ", ".join(str(s) for s in self._tuple_shapes) + ")"
        if self.is_token():
            return "token[]"
        dims = ",".join(
            f"<={d}" if dynamic else str(d) for d, dynamic in zip(self._dimensions, self.dynamic_dimensions)
        )
        text = f"{self._element_type.text_name}[{dims}]"
        if self._layout is not None and not self._layout.is_default():
            text += str(self._layout)
        return text

    def __repr__(self) -> str:
        return f"Shape({str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Shape.parse, (str(self),))


def _dynamic_flags(flags: Iterable[bool] | None, rank: int) -> tuple[bool, ...]:
    if flags is None:
        return ()
    if isinstance(flags, (str, bytes)) or not isinstance(flags, Iterable):
        raise ShapeError("Shape.array", [], f"dynamic_dimensions must be a sequence of bools, got {flags!r}")
    values = tuple(flags)
    if len(values) != rank or not all(isinstance(f, (bool, np.bool_)) for f in values):
        raise ShapeError(
            "Shape.array",
            [],
            f"dynamic_dimensions must be {rank} bools (one per dimension), got {list(values)}",
        )
    return tuple(bool(f) for f in values) if any(values) else ()


_TOKEN_SHAPE = Shape._make(PrimitiveType.TOKEN, (), None, ())
# Lower-case XLA names only: the text form is 'f32[2]', never 'F32[2]'.
_TEXT_NAMES = {t.text_name: t for t in PrimitiveType}


class _ShapeParser:
    """Recursive-descent parser of XLA's shape text."""

    _SPACE = re.compile(r"(?:\s+|/\*.*?\*/)*", re.DOTALL)
    _NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
    _INT = re.compile(r"[0-9]+")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, why: str) -> ShapeError:
        return ShapeError(
            "Shape.parse", [], f"malformed shape text {self.text!r}: {why} at offset {self.pos}"
        )

    def skip(self) -> None:
        m = self._SPACE.match(self.text, self.pos)
        assert m is not None
        self.pos = m.end()

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos : self.pos + 1]

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            found = self.text[self.pos : self.pos + 1] or "end of text"
            raise self.fail(f"expected {ch!r}, found {found!r}")
        self.pos += 1

    def int_list(self, close: str) -> list[int]:
        values: list[int] = []
        if self.peek() == close:
            self.pos += 1
            return values
        while True:
            self.skip()
            m = self._INT.match(self.text, self.pos)
            if m is None:
                raise self.fail("expected a non-negative integer")
            values.append(int(m.group()))
            self.pos = m.end()
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c == close:
                self.pos += 1
                return values
            else:
                raise self.fail(f"expected ',' or {close!r}")

    def shape(self) -> Shape:
        c = self.peek()
        if c == "(":
            self.pos += 1
            elems: list[Shape] = []
            if self.peek() == ")":
                self.pos += 1
                return Shape.tuple(elems)
            while True:
                elems.append(self.shape())
                c = self.peek()
                if c == ",":
                    self.pos += 1
                elif c == ")":
                    self.pos += 1
                    return Shape.tuple(elems)
                else:
                    raise self.fail("expected ',' or ')' in tuple")
        m = self._NAME.match(self.text, self.pos)
        if m is None:
            raise self.fail("expected an element type or '('")
        name = m.group()
        et = _TEXT_NAMES.get(name) if name == name.lower() else None
        if et is None or et is PrimitiveType.TUPLE:
            raise self.fail(f"unknown element type {name!r}")
        self.pos = m.end()
        self.expect("[")
        dims, dynamic = self.dimension_list()
        mtm: list[int] | None = None
        if self.peek() == "{":
            self.pos += 1
            mtm = self.int_list("}")
        if et is PrimitiveType.TOKEN:
            if dims or mtm:
                raise self.fail("a token has no dimensions or layout")
            return _TOKEN_SHAPE
        if mtm is not None and sorted(mtm) != list(range(len(dims))):
            raise self.fail(
                f"layout {{{','.join(map(str, mtm))}}} is not a permutation of "
                f"the {len(dims)} dimensions"
            )
        return Shape.array(et, dims, mtm, dynamic if any(dynamic) else None)

    def dimension_list(self) -> tuple[list[int], list[bool]]:
        """``2,<=10,3]``: the sizes (bounds for ``<=``) and which are dynamic."""
        dims: list[int] = []
        dynamic: list[bool] = []
        if self.peek() == "]":
            self.pos += 1
            return dims, dynamic
        while True:
            self.skip()
            if self.text.startswith("?", self.pos):
                raise self.fail("an unbounded dynamic dimension '?' is not supported; give a bound '<=N'")
            bounded = self.text.startswith("<=", self.pos)
            if bounded:
                self.pos += 2
                self.skip()
            m = self._INT.match(self.text, self.pos)
            if m is None:
                raise self.fail("expected a non-negative integer")
            dims.append(int(m.group()))
            dynamic.append(bounded)
            self.pos = m.end()
            c = self.peek()
            if c == ",":
                self.pos += 1
            elif c == "]":
                self.pos += 1
                return dims, dynamic
            else:
                raise self.fail("expected ',' or ']'")

    def parse(self) -> Shape:
        s = self.shape()
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("trailing text")
        return s
