"""XLA element types, layouts and shapes, independent of MLIR.

This module holds :class:`PrimitiveType` (XLA's element types with XLA's own
numbering), their mapping to and from numpy dtypes (BF16 through
``ml_dtypes.bfloat16``), the immutable :class:`Layout` (a ``minor_to_major``
permutation) and the immutable, hashable :class:`Shape` (array, tuple or token)
together with XLA's shape text form (``f32[2,3]{0,1}``, ``(f32[2], s32[])``,
``token[]``) and the MLIR type text of the project's dialect
(``tensor<2x3xf32>``, ``tuple<...>``, ``!xhlo.token``). It is pure Python on
numpy and ml_dtypes and imports nothing of ours except ``dialect.errors``.
"""

from __future__ import annotations

import enum
import math
import operator
import re
from collections.abc import Iterable, Iterator
from typing import Any

import ml_dtypes
import numpy as np

from .errors import ShapeError

__all__ = [
    "BF16",
    "C64",
    "C128",
    "F16",
    "F32",
    "F64",
    "PRED",
    "S8",
    "S16",
    "S32",
    "S64",
    "TOKEN",
    "TOKEN_MLIR_TYPE",
    "TUPLE",
    "U8",
    "U16",
    "U32",
    "U64",
    "Layout",
    "PrimitiveType",
    "Shape",
    "dtype_of",
    "shape_from_mlir_type_text",
    "to_mlir_type_text",
    "type_from_mlir_name",
    "type_of",
]

#: The MLIR type text of a token in the project's dialect.
TOKEN_MLIR_TYPE = "!xhlo.token"


# --------------------------------------------------------------------------------------------
# Element types
# --------------------------------------------------------------------------------------------


class PrimitiveType(enum.IntEnum):
    """XLA's element types, numbered as in ``xla_data.proto``.

    ``str(t)`` is the XLA text name (``'f32'``); ``repr`` is the enum's.
    """

    PRED = 1
    S8 = 2
    S16 = 3
    S32 = 4
    S64 = 5
    U8 = 6
    U16 = 7
    U32 = 8
    U64 = 9
    F16 = 10
    F32 = 11
    F64 = 12
    TUPLE = 13
    C64 = 15
    BF16 = 16
    TOKEN = 17
    C128 = 18

    def __str__(self) -> str:
        return self.text_name

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else format(int(self), spec)

    @property
    def is_pred(self) -> bool:
        return self is PrimitiveType.PRED

    @property
    def is_signed_int(self) -> bool:
        return self in _SIGNED

    @property
    def is_unsigned_int(self) -> bool:
        return self in _UNSIGNED

    @property
    def is_integral(self) -> bool:
        """Signed or unsigned integer (PRED is not integral)."""
        return self in _SIGNED or self in _UNSIGNED

    @property
    def is_floating(self) -> bool:
        """F16, BF16, F32 or F64 (complex types are not floating)."""
        return self in _FLOATING

    @property
    def is_complex(self) -> bool:
        return self in _COMPLEX

    @property
    def is_array_type(self) -> bool:
        """True for everything but TUPLE and TOKEN."""
        return self not in (PrimitiveType.TUPLE, PrimitiveType.TOKEN)

    @property
    def bit_width(self) -> int:
        """Bits of one element (PRED: 1; TUPLE/TOKEN: 0)."""
        return _BIT_WIDTH[self]

    @property
    def byte_width(self) -> int:
        """Bytes of one element in numpy storage (PRED: 1; TUPLE/TOKEN: 0)."""
        return (self.bit_width + 7) // 8

    @property
    def text_name(self) -> str:
        """XLA's text name: ``'pred'``, ``'s32'``, ``'bf16'``, ``'c64'``, ``'token'``..."""
        return _TEXT_NAME[self]

    @property
    def mlir_name(self) -> str:
        """MLIR element type text: ``'i1'``, ``'i32'``, ``'ui8'``, ``'complex<f32>'``...

        Signed integers are signless (``i32``). TOKEN gives ``'!xhlo.token'``
        and TUPLE ``'tuple'`` (neither is a tensor element type).
        """
        return _MLIR_NAME[self]

    @property
    def complex_component(self) -> PrimitiveType:
        """C64 -> F32, C128 -> F64, any other type -> itself."""
        if self is PrimitiveType.C64:
            return PrimitiveType.F32
        if self is PrimitiveType.C128:
            return PrimitiveType.F64
        return self


PRED = PrimitiveType.PRED
S8 = PrimitiveType.S8
S16 = PrimitiveType.S16
S32 = PrimitiveType.S32
S64 = PrimitiveType.S64
U8 = PrimitiveType.U8
U16 = PrimitiveType.U16
U32 = PrimitiveType.U32
U64 = PrimitiveType.U64
F16 = PrimitiveType.F16
BF16 = PrimitiveType.BF16
F32 = PrimitiveType.F32
F64 = PrimitiveType.F64
C64 = PrimitiveType.C64
C128 = PrimitiveType.C128
TOKEN = PrimitiveType.TOKEN
TUPLE = PrimitiveType.TUPLE

_SIGNED = frozenset({S8, S16, S32, S64})
_UNSIGNED = frozenset({U8, U16, U32, U64})
_FLOATING = frozenset({F16, BF16, F32, F64})
_COMPLEX = frozenset({C64, C128})

_BIT_WIDTH = {
    PRED: 1,
    S8: 8,
    S16: 16,
    S32: 32,
    S64: 64,
    U8: 8,
    U16: 16,
    U32: 32,
    U64: 64,
    F16: 16,
    BF16: 16,
    F32: 32,
    F64: 64,
    C64: 64,
    C128: 128,
    TOKEN: 0,
    TUPLE: 0,
}

_TEXT_NAME = {t: t.name.lower() for t in PrimitiveType}

_MLIR_NAME = {
    PRED: "i1",
    S8: "i8",
    S16: "i16",
    S32: "i32",
    S64: "i64",
    U8: "ui8",
    U16: "ui16",
    U32: "ui32",
    U64: "ui64",
    F16: "f16",
    BF16: "bf16",
    F32: "f32",
    F64: "f64",
    C64: "complex<f32>",
    C128: "complex<f64>",
    TOKEN: TOKEN_MLIR_TYPE,
    TUPLE: "tuple",
}

_DTYPE = {
    PRED: np.dtype(np.bool_),
    S8: np.dtype(np.int8),
    S16: np.dtype(np.int16),
    S32: np.dtype(np.int32),
    S64: np.dtype(np.int64),
    U8: np.dtype(np.uint8),
    U16: np.dtype(np.uint16),
    U32: np.dtype(np.uint32),
    U64: np.dtype(np.uint64),
    F16: np.dtype(np.float16),
    BF16: np.dtype(ml_dtypes.bfloat16),
    F32: np.dtype(np.float32),
    F64: np.dtype(np.float64),
    C64: np.dtype(np.complex64),
    C128: np.dtype(np.complex128),
}
_TYPE_OF_DTYPE = {dt: t for t, dt in _DTYPE.items()}

# Names accepted by ``type_of`` before numpy gets a say ('u8' is uint8 here, not uint64).
_NAMED_TYPES: dict[str, PrimitiveType] = {}
for _t in PrimitiveType:
    _NAMED_TYPES[_t.text_name] = _t
    _NAMED_TYPES[_t.name] = _t
del _t

# MLIR element type text -> PrimitiveType (signless and explicitly signed ints both map to S*).
_MLIR_ELEMENT_TYPES: dict[str, PrimitiveType] = {
    "i1": PRED,
    "f16": F16,
    "bf16": BF16,
    "f32": F32,
    "f64": F64,
    "complex<f32>": C64,
    "complex<f64>": C128,
}
for _bits, _s, _u in ((8, S8, U8), (16, S16, U16), (32, S32, U32), (64, S64, U64)):
    _MLIR_ELEMENT_TYPES[f"i{_bits}"] = _s
    _MLIR_ELEMENT_TYPES[f"si{_bits}"] = _s
    _MLIR_ELEMENT_TYPES[f"ui{_bits}"] = _u
del _bits, _s, _u


def dtype_of(t: Any) -> np.dtype:
    """The numpy dtype storing elements of type ``t`` (anything :func:`type_of` accepts).

    PRED -> ``bool``, BF16 -> ``ml_dtypes.bfloat16``, C64 -> ``complex64``...
    TOKEN and TUPLE have no dtype and raise :class:`ShapeError`.
    """
    pt = type_of(t)
    try:
        return _DTYPE[pt]
    except KeyError:
        raise ShapeError("dtype_of", [], f"{pt.text_name} has no numpy dtype") from None


def type_of(x: Any) -> PrimitiveType:
    """The :class:`PrimitiveType` for ``x``.

    ``x`` is a :class:`PrimitiveType` (returned as is), an XLA type name
    (``'f32'``, ``'pred'``, ``'bf16'``, ``'u8'``; also ``'F32'``; these take
    precedence over numpy's reading of the same string), anything
    ``np.dtype()`` accepts (``np.float32``, ``'float32'``, ``ml_dtypes.bfloat16``,
    ``np.dtype('int8')``, ``bool``...), or an object with a numpy ``.dtype``
    (an array or a numpy scalar). Byte order is ignored. Anything else, or a
    dtype XLA has no type for, raises :class:`ShapeError`.
    """
    if isinstance(x, PrimitiveType):
        return x
    if (isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)) or x is None:
        # Plain numbers are values, not types (and None means float64 to numpy).
        raise ShapeError("type_of", [], f"not an element type: {x!r}")
    if isinstance(x, str):
        named = _NAMED_TYPES.get(x.strip())
        if named is not None:
            return named
    dt: np.dtype | None
    if isinstance(x, np.dtype):
        dt = x
    elif isinstance(getattr(x, "dtype", None), np.dtype) and not isinstance(x, type):
        dt = x.dtype
    else:
        try:
            dt = np.dtype(x)
        except (TypeError, ValueError, SyntaxError, AttributeError, RecursionError):
            dt = None
    if dt is None:
        raise ShapeError("type_of", [], f"not an element type: {x!r}")
    if dt.byteorder not in ("=", "|"):
        dt = dt.newbyteorder("=")
    t = _TYPE_OF_DTYPE.get(dt)
    if t is None:
        raise ShapeError("type_of", [], f"numpy dtype {dt} has no XLA element type")
    return t


def type_from_mlir_name(name: str) -> PrimitiveType:
    """The :class:`PrimitiveType` of an MLIR element type text (``'i32'``, ``'si32'``,
    ``'ui8'``, ``'i1'``, ``'complex<f32>'``...); anything else raises :class:`ShapeError`."""
    t = _MLIR_ELEMENT_TYPES.get(re.sub(r"\s+", "", name))
    if t is None:
        raise ShapeError("type_from_mlir_name", [], f"unsupported MLIR element type {name!r}")
    return t


# --------------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------------


def _int_list(values: Any, what: str, op: str) -> tuple[int, ...]:
    """Converts an iterable of ints (Python or numpy, not bool) to a tuple of Python ints."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}")
    try:
        items = list(values)
    except TypeError:  # e.g. a 0-d numpy array
        raise ShapeError(op, [], f"{what} must be a sequence of ints, got {values!r}") from None
    out = []
    for v in items:
        if isinstance(v, (bool, np.bool_)):
            raise ShapeError(op, [], f"{what} must be ints, got a bool in {values!r}")
        try:
            out.append(operator.index(v))
        except TypeError:
            raise ShapeError(op, [], f"{what} must be ints, got {v!r}") from None
    return tuple(out)


class Layout:
    """An array layout: ``minor_to_major`` lists the dimensions from most minor to most major.

    Immutable, hashable, equal by value. ``minor_to_major`` must be a
    permutation of ``range(len(minor_to_major))``.
    """

    __slots__ = ("_minor_to_major",)
    _minor_to_major: tuple[int, ...]

    def __init__(self, minor_to_major: Iterable[int]) -> None:
        mtm = _int_list(minor_to_major, "minor_to_major", "Layout")
        if sorted(mtm) != list(range(len(mtm))):
            raise ShapeError(
                "Layout",
                [],
                f"minor_to_major {list(mtm)} is not a permutation of range({len(mtm)})",
            )
        object.__setattr__(self, "_minor_to_major", mtm)

    @classmethod
    def default(cls, rank: int) -> Layout:
        """The default (row-major) layout of a rank-``rank`` array: ``(rank-1, ..., 0)``."""
        return cls(range(rank - 1, -1, -1))

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        return self._minor_to_major

    @property
    def rank(self) -> int:
        return len(self._minor_to_major)

    def is_default(self) -> bool:
        """True if this is the row-major layout of its rank."""
        n = len(self._minor_to_major)
        return self._minor_to_major == tuple(range(n - 1, -1, -1))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Layout is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Layout is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Layout):
            return NotImplemented
        return self._minor_to_major == other._minor_to_major

    def __hash__(self) -> int:
        return hash(("Layout", self._minor_to_major))

    def __repr__(self) -> str:
        return f"Layout({self._minor_to_major!r})"

    def __str__(self) -> str:
        return "{" + ",".join(str(d) for d in self._minor_to_major) + "}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Layout, (self._minor_to_major,))


# --------------------------------------------------------------------------------------------
# Shape
# --------------------------------------------------------------------------------------------


class Shape:
    """An XLA shape: an array (element type, dimensions, layout), a tuple of shapes, or a token.

    Immutable, hashable and ``==`` by value; the layout takes part
    (``f32[2,3]{0,1} != f32[2,3]``), and an array made without a layout has
    the default one, so giving the default layout explicitly changes nothing.
    Build with :meth:`array`, :meth:`tuple`, :meth:`token`, :meth:`scalar` or
    :meth:`parse`; ``Shape(text)`` is :meth:`parse` too.
    """

    __slots__ = ("_dimensions", "_element_type", "_hash", "_layout", "_tuple_shapes")
    _element_type: PrimitiveType
    _dimensions: tuple[int, ...]
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
    ) -> Shape:
        s = object.__new__(cls)
        object.__setattr__(s, "_element_type", element_type)
        object.__setattr__(s, "_dimensions", dimensions)
        object.__setattr__(s, "_layout", layout)
        object.__setattr__(s, "_tuple_shapes", tuple_shapes)
        object.__setattr__(s, "_hash", hash((int(element_type), dimensions, layout, tuple_shapes)))
        return s

    # ---- constructors -------------------------------------------------------------------------

    @classmethod
    def array(
        cls,
        element_type: Any,
        dims: Iterable[int],
        minor_to_major: Iterable[int] | Layout | None = None,
    ) -> Shape:
        """An array shape. ``element_type``: a :class:`PrimitiveType` or anything
        :func:`type_of` accepts (not TUPLE/TOKEN). ``dims``: non-negative ints.
        ``minor_to_major``: a permutation of ``range(rank)`` (or a :class:`Layout`);
        ``None`` means the default row-major layout."""
        et = type_of(element_type)
        if not et.is_array_type:
            raise ShapeError(
                "Shape.array",
                [],
                f"{et.text_name} is not an array element type; use "
                f"Shape.{'tuple' if et is PrimitiveType.TUPLE else 'token'}()",
            )
        dimensions = _int_list(dims, "dimensions", "Shape.array")
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
                else _int_list(minor_to_major, "minor_to_major", "Shape.array")
            )
            if sorted(mtm) != list(range(rank)):
                raise ShapeError(
                    "Shape.array",
                    [],
                    f"minor_to_major {list(mtm)} is not a permutation of "
                    f"range({rank}) for dimensions {list(dimensions)}",
                )
            layout = Layout(mtm)
        return cls._make(et, dimensions, layout, ())

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
        ``f32[]{}``, ``(f32[2], s32[])``, ``((), token[])``. Whitespace and
        ``/*...*/`` comments between tokens are allowed; anything malformed
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
        return _DTYPE[self._element_type]

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
        """An array shape with the same dimensions, ``element_type`` and the default layout."""
        self._require_array("Shape.with_element_type")
        return Shape.array(element_type, self._dimensions)

    def with_layout(self, minor_to_major: Iterable[int] | Layout | None) -> Shape:
        """The same array shape with another layout (``None``: the default)."""
        self._require_array("Shape.with_layout")
        return Shape.array(self._element_type, self._dimensions, minor_to_major)

    def with_default_layout(self) -> Shape:
        """This shape with every array (also inside tuples) given the default layout."""
        if self.is_tuple():
            return Shape.tuple([s.with_default_layout() for s in self._tuple_shapes])
        if self.is_token() or self.has_default_layout():
            return self
        return Shape.array(self._element_type, self._dimensions)

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
        text = f"{self._element_type.text_name}[{','.join(str(d) for d in self._dimensions)}]"
        if self._layout is not None and not self._layout.is_default():
            text += str(self._layout)
        return text

    def __repr__(self) -> str:
        return f"Shape({str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Shape.parse, (str(self),))


_TOKEN_SHAPE = Shape._make(PrimitiveType.TOKEN, (), None, ())


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
        et = _NAMED_TYPES.get(name) if name == name.lower() else None
        if et is None or et is PrimitiveType.TUPLE:
            raise self.fail(f"unknown element type {name!r}")
        self.pos = m.end()
        self.expect("[")
        dims = self.int_list("]")
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
        return Shape.array(et, dims, mtm)

    def parse(self) -> Shape:
        s = self.shape()
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("trailing text")
        return s


# --------------------------------------------------------------------------------------------
# MLIR type text
# --------------------------------------------------------------------------------------------


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
    _ELEM = re.compile(r"complex\s*<\s*[a-z0-9]+\s*>|[a-z][a-z0-9]*")

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
            return _TOKEN_SHAPE
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
            et = _MLIR_ELEMENT_TYPES.get(name)
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
