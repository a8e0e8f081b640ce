"""XLA's element types (`PrimitiveType`, numbered as in xla_data.proto) and their numpy dtypes.

BF16 and the narrow types (S2/S4/U2/U4, the 8- and 4-bit floats) are stored as
ml_dtypes' types, one element per byte. Also the element types' MLIR names, both ways.
Pure Python on numpy and ml_dtypes; imports nothing of ours except ``dialect.errors``.
"""

from __future__ import annotations

import enum
import re
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from .errors import ShapeError

__all__ = [
    "BF16", "C64", "C128", "F4E2M1FN", "F8E3M4", "F8E4M3", "F8E4M3B11FNUZ", "F8E4M3FN",
    "F8E4M3FNUZ", "F8E5M2", "F8E5M2FNUZ", "F8E8M0FNU", "F16", "F32", "F64", "PRED", "S2", "S4",
    "S8", "S16", "S32", "S64", "TOKEN", "TOKEN_MLIR_TYPE", "TUPLE", "U2", "U4", "U8", "U16", "U32",
    "U64", "FloatFormat", "PrimitiveType", "dtype_of", "type_from_mlir_name", "type_of",
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
    F8E5M2 = 19
    F8E4M3FN = 20
    S4 = 21
    U4 = 22
    F8E4M3B11FNUZ = 23
    F8E5M2FNUZ = 24
    F8E4M3FNUZ = 25
    S2 = 26
    U2 = 27
    F8E4M3 = 28
    F8E3M4 = 29
    F4E2M1FN = 32
    F8E8M0FNU = 33

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
        """A real floating-point type: F16, BF16, F32, F64 or a narrow float (F8*, F4E2M1FN)."""
        return self in _FLOATING

    @property
    def is_narrow_float(self) -> bool:
        """The 8- and 4-bit floats (F8*, F4E2M1FN): stored one per byte, computed in f32."""
        return self in _NARROW_FORMATS

    @property
    def is_sub_byte_int(self) -> bool:
        """S2, S4, U2, U4: stored one per byte (the low bits), computed in their own width."""
        return self in _SUB_BYTE_INTS

    @property
    def float_format(self) -> FloatFormat:
        """The encoding of a floating type (F16, BF16, F32, F64 and the narrow floats)."""
        try:
            return _FLOAT_FORMATS[self]
        except KeyError:
            raise ShapeError("float_format", [], f"{self.text_name} is not a floating type") from None

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


class FloatFormat(NamedTuple):
    """One binary float encoding: sign bit (unless unsigned), exponent, mantissa.

    ``bias``: the exponent bias. ``has_inf``: the all-ones exponent with a zero
    mantissa is infinity. ``nan``: where NaN lives: ``"ieee"`` (exponent all ones,
    mantissa nonzero), ``"all_ones"`` (FN: only exponent and mantissa all ones),
    ``"neg_zero"`` (FNUZ: the bit pattern of -0, so no -0 exists), ``"none"``.
    ``signed``: False for F8E8M0FNU (no sign bit).
    """

    exponent_bits: int
    mantissa_bits: int
    bias: int
    has_inf: bool
    nan: str
    signed: bool = True

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exponent_bits + self.mantissa_bits


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
S2 = PrimitiveType.S2
S4 = PrimitiveType.S4
U2 = PrimitiveType.U2
U4 = PrimitiveType.U4
F8E5M2 = PrimitiveType.F8E5M2
F8E4M3FN = PrimitiveType.F8E4M3FN
F8E4M3B11FNUZ = PrimitiveType.F8E4M3B11FNUZ
F8E5M2FNUZ = PrimitiveType.F8E5M2FNUZ
F8E4M3FNUZ = PrimitiveType.F8E4M3FNUZ
F8E4M3 = PrimitiveType.F8E4M3
F8E3M4 = PrimitiveType.F8E3M4
F4E2M1FN = PrimitiveType.F4E2M1FN
F8E8M0FNU = PrimitiveType.F8E8M0FNU
TOKEN = PrimitiveType.TOKEN
TUPLE = PrimitiveType.TUPLE

_SIGNED = frozenset({S2, S4, S8, S16, S32, S64})
_UNSIGNED = frozenset({U2, U4, U8, U16, U32, U64})
_SUB_BYTE_INTS = frozenset({S2, S4, U2, U4})
# The formats as ml_dtypes and LLVM's APFloat define them.
_NARROW_FORMATS = {
    F8E5M2: FloatFormat(5, 2, 15, True, "ieee"),
    F8E4M3FN: FloatFormat(4, 3, 7, False, "all_ones"),
    F8E4M3B11FNUZ: FloatFormat(4, 3, 11, False, "neg_zero"),
    F8E5M2FNUZ: FloatFormat(5, 2, 16, False, "neg_zero"),
    F8E4M3FNUZ: FloatFormat(4, 3, 8, False, "neg_zero"),
    F8E4M3: FloatFormat(4, 3, 7, True, "ieee"),
    F8E3M4: FloatFormat(3, 4, 3, True, "ieee"),
    F4E2M1FN: FloatFormat(2, 1, 1, False, "none"),
    F8E8M0FNU: FloatFormat(8, 0, 127, False, "all_ones", signed=False),
}
_FLOAT_FORMATS = {
    F16: FloatFormat(5, 10, 15, True, "ieee"),
    BF16: FloatFormat(8, 7, 127, True, "ieee"),
    F32: FloatFormat(8, 23, 127, True, "ieee"),
    F64: FloatFormat(11, 52, 1023, True, "ieee"),
    **_NARROW_FORMATS,
}
_FLOATING = frozenset(_FLOAT_FORMATS)
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
    S2: 2,
    S4: 4,
    U2: 2,
    U4: 4,
    F4E2M1FN: 4,
    **{t: 8 for t in _NARROW_FORMATS if t is not F4E2M1FN},
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
    S2: "i2",
    S4: "i4",
    U2: "ui2",
    U4: "ui4",
    F8E5M2: "f8E5M2",
    F8E4M3FN: "f8E4M3FN",
    F8E4M3B11FNUZ: "f8E4M3B11FNUZ",
    F8E5M2FNUZ: "f8E5M2FNUZ",
    F8E4M3FNUZ: "f8E4M3FNUZ",
    F8E4M3: "f8E4M3",
    F8E3M4: "f8E3M4",
    F4E2M1FN: "f4E2M1FN",
    F8E8M0FNU: "f8E8M0FNU",
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
    S2: np.dtype(ml_dtypes.int2),
    S4: np.dtype(ml_dtypes.int4),
    U2: np.dtype(ml_dtypes.uint2),
    U4: np.dtype(ml_dtypes.uint4),
    F8E5M2: np.dtype(ml_dtypes.float8_e5m2),
    F8E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
    F8E4M3B11FNUZ: np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    F8E5M2FNUZ: np.dtype(ml_dtypes.float8_e5m2fnuz),
    F8E4M3FNUZ: np.dtype(ml_dtypes.float8_e4m3fnuz),
    F8E4M3: np.dtype(ml_dtypes.float8_e4m3),
    F8E3M4: np.dtype(ml_dtypes.float8_e3m4),
    F4E2M1FN: np.dtype(ml_dtypes.float4_e2m1fn),
    F8E8M0FNU: np.dtype(ml_dtypes.float8_e8m0fnu),
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
    **{_MLIR_NAME[t]: t for t in _NARROW_FORMATS},
}
for _bits, _s, _u in ((2, S2, U2), (4, S4, U4), (8, S8, U8), (16, S16, U16), (32, S32, U32),
                      (64, S64, U64)):
    MLIR_ELEMENT_TYPES[f"i{_bits}"] = _s
    MLIR_ELEMENT_TYPES[f"si{_bits}"] = _s
    MLIR_ELEMENT_TYPES[f"ui{_bits}"] = _u
del _bits, _s, _u


def dtype_of(t: Any) -> np.dtype:
    """The numpy dtype storing elements of type ``t`` (anything :func:`type_of` accepts).

    PRED -> ``bool``, BF16 -> ``ml_dtypes.bfloat16``, C64 -> ``complex64``, S4 ->
    ``ml_dtypes.int4``, F8E5M2 -> ``ml_dtypes.float8_e5m2``...
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
