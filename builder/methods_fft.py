"""Hand-written XlaBuilder methods of the fft family. Imports `dialect` and `builder`.

Every function in METHODS becomes a method of XlaBuilder (see builder/__init__.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError
from ..dialect.ops_fft import FFT_TYPES
from .builder import XlaBuilder
from .xla_op import XlaOp


def _fft_type(value: Any) -> str:
    """"FFT"/"IFFT"/"RFFT"/"IRFFT" in any case, or an enum member with that `.name`
    (jax's lax.FftType.RFFT)."""
    name = getattr(value, "name", value)
    if isinstance(name, str) and name.upper() in FFT_TYPES:
        return name.upper()
    raise ShapeError("fft", [], f"fft_type must be one of {FFT_TYPES}, got {value!r}")


def _lengths(value: Any) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return (int(value),)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise ShapeError("fft", [], f"fft_length must be a sequence of ints, got {value!r}")
    out = []
    for n in value:
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            raise ShapeError("fft", [], f"fft_length must be a sequence of ints, got {value!r}")
        out.append(int(n))
    return tuple(out)


def fft(self: XlaBuilder, operand: XlaOp, fft_type: Any, fft_length: Sequence[int]) -> XlaOp:
    """Fourier transform of the trailing len(fft_length) axes (spec#fft): "FFT"/"IFFT"
    complex to complex (IFFT scaled by 1/n), "RFFT" real to the n // 2 + 1 non-negative
    frequencies of the last axis, "IRFFT" back to fft_length real values. Any length."""
    operand = self._check_operand("fft", operand)
    return self._emit("fft", [operand], {"fft_type": _fft_type(fft_type), "fft_length": _lengths(fft_length)})


METHODS: dict[str, Callable[..., Any]] = {"fft": fft}
