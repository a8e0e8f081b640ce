"""XLA's element types (`PrimitiveType`, numbered as in xla_data.proto) and their numpy dtypes.

BF16 is stored as ``ml_dtypes.bfloat16``. Also the element types' MLIR names, both ways.
Pure Python on numpy and ml_dtypes; imports nothing of ours except ``dialect.errors``.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import ml_dtypes
import numpy as np

from .errors import ShapeError

__all__ = [
    "BF16", "C64", "C128", "F16", "F32", "F64", "PRED", "S8", "S16", "S32", "S64", "TOKEN",
    "TOKEN_MLIR_TYPE", "TUPLE", "U8", "U16", "U32", "U64", "PrimitiveType", "dtype_of",
    "type_from_mlir_name", "type_of",
]

#: The MLIR type text of a token in the project's dialect.
TOKEN_MLIR_TYPE = "!xhlo.token"


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
NAMED_TYPES: dict[str, PrimitiveType] = {}
for _t in PrimitiveType:
    NAMED_TYPES[_t.text_name] = _t
    NAMED_TYPES[_t.name] = _t
del _t

# MLIR element type text -> PrimitiveType (signless and explicitly signed ints both map to S*).
MLIR_ELEMENT_TYPES: dict[str, PrimitiveType] = {
    "i1": PRED,
    "f16": F16,
    "bf16": BF16,
    "f32": F32,
    "f64": F64,
    "complex<f32>": C64,
    "complex<f64>": C128,
}
for _bits, _s, _u in ((8, S8, U8), (16, S16, U16), (32, S32, U32), (64, S64, U64)):
    MLIR_ELEMENT_TYPES[f"i{_bits}"] = _s
    MLIR_ELEMENT_TYPES[f"si{_bits}"] = _s
    MLIR_ELEMENT_TYPES[f"ui{_bits}"] = _u
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
        named = NAMED_TYPES.get(x.strip())
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
    t = MLIR_ELEMENT_TYPES.get(re.sub(r"\s+", "", name))
    if t is None:
        raise ShapeError("type_from_mlir_name", [], f"unsupported MLIR element type {name!r}")
    return t
