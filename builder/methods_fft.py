"""FftMethods: XlaBuilder.fft. Imports `dialect` and `builder.recorder`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError
from ..dialect.ops_fft import FFT_TYPES
from . import args
from .recorder import Recorder
from .xla_op import XlaOp


def _fft_type(value: Any) -> str:
    """"FFT"/"IFFT"/"RFFT"/"IRFFT" in any case, or an enum member with that `.name`
    (jax's lax.FftType.RFFT)."""
    name = getattr(value, "name", value)
    if isinstance(name, str) and name.upper() in FFT_TYPES:
        return name.upper()
    raise ShapeError("fft", [], f"fft_type must be one of {FFT_TYPES}, got {value!r}")


def _lengths(value: Any) -> tuple[int, ...]:
    """fft_length: a sequence of ints, or one int for a 1-D transform."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return (int(value),)
    return args.ints("fft", value, "fft_length")


class FftMethods(Recorder):
    """fft."""

    def fft(self, operand: XlaOp, fft_type: Any, fft_length: Sequence[int]) -> XlaOp:
        """Fourier transform of the trailing len(fft_length) axes (spec#fft): "FFT"/"IFFT"
        complex to complex (IFFT scaled by 1/n), "RFFT" real to the n // 2 + 1 non-negative
        frequencies of the last axis, "IRFFT" back to fft_length real values. Any length."""
        operand = self.check_operand("fft", operand)
        return self.emit("fft", [operand], {"fft_type": _fft_type(fft_type),
                                            "fft_length": _lengths(fft_length)})
