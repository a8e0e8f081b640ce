"""Ops of the fft family: `fft`.

Semantics (seed 004 Fft, SEMANTICS.md 5.F, XLA's InferFftShape):

- `fft(operand) {fft_type, fft_length}` transforms the trailing
  `len(fft_length)` (1, 2 or 3) dimensions; the others are batch dimensions.
- FFT / IFFT: complex (c64/c128) in and out, shape unchanged, the trailing
  dimensions equal to fft_length; IFFT scales by 1 / prod(fft_length).
- RFFT: f32/f64 in, c64/c128 out; the innermost transformed dimension
  becomes fft_length[-1] // 2 + 1 (the non-negative frequencies; it stays 0
  when fft_length[-1] is 0).
- IRFFT: c64/c128 in (the innermost dimension holding fft_length[-1] // 2 + 1
  frequencies), f32/f64 out with that dimension expanded to fft_length[-1]:
  the other half of the spectrum is the conjugate mirror of the given one,
  which is why fft_length is needed (16 and 17 give the same RFFT shape).
- Any length is allowed, not only powers of two.

Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import I64_ARRAY, STR, OpDef, Operand, define
from .shape import Shape

P = PrimitiveType
FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")
_COMPLEX_OF = {P.F32: P.C64, P.F64: P.C128}
_REAL_OF = {P.C64: P.F32, P.C128: P.F64}


def infer_fft(operand: Shape, *, fft_type: str, fft_length: tuple[int, ...]) -> Shape:
    op = "fft"
    shapes = [operand]
    if fft_type not in FFT_TYPES:
        raise ShapeError(op, shapes, f"fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    if not operand.is_array():
        raise ShapeError(op, shapes, f"the operand must be an array, got {operand}")
    lengths = tuple(fft_length)
    if not 1 <= len(lengths) <= 3:
        raise ShapeError(op, shapes, f"fft_length must have 1 to 3 entries (the transformed axes), "
                         f"got {list(lengths)}")
    if any(n < 0 for n in lengths):
        raise ShapeError(op, shapes, f"fft_length entries must be >= 0, got {list(lengths)}")
    k = len(lengths)
    if operand.rank < k:
        raise ShapeError(op, shapes, f"an operand of rank {operand.rank} has fewer dimensions than the "
                         f"{k} transformed ones")
    t = operand.element_type
    dims = operand.dimensions
    trailing = dims[operand.rank - k:]
    if fft_type == "RFFT":
        if t not in _COMPLEX_OF:
            raise ShapeError(op, shapes, f"RFFT takes an f32 or f64 operand, got {t}")
        if trailing != lengths:
            raise ShapeError(op, shapes, f"the transformed dimensions {list(trailing)} must equal "
                             f"fft_length {list(lengths)}")
        last = lengths[-1] // 2 + 1 if lengths[-1] else 0
        return Shape.array(_COMPLEX_OF[t], dims[:-1] + (last,))
    if t not in _REAL_OF:
        raise ShapeError(op, shapes, f"{fft_type} takes a c64 or c128 operand, got {t}")
    if fft_type == "IRFFT":
        expected = lengths[:-1] + ((lengths[-1] // 2 + 1,) if lengths[-1] else (trailing[-1],))
        if trailing != expected:
            raise ShapeError(op, shapes, f"IRFFT of fft_length {list(lengths)} takes trailing dimensions "
                             f"{list(expected)} (the last holds fft_length[-1] // 2 + 1 frequencies), "
                             f"got {list(trailing)}")
        return Shape.array(_REAL_OF[t], dims[:-1] + (lengths[-1],))
    if trailing != lengths:
        raise ShapeError(op, shapes, f"the transformed dimensions {list(trailing)} must equal "
                         f"fft_length {list(lengths)}")
    return operand.with_default_layout()


define(OpDef("fft", (Operand("operand"),), {"fft_type": STR, "fft_length": I64_ARRAY}, infer_fft,
             doc="Forward/inverse, complex/real Fourier transforms of the trailing axes (spec#fft)."))
