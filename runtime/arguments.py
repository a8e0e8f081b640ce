"""Argument checking and memref descriptors for the compiled entry point.

A memref descriptor is `{allocated, aligned, offset, sizes[r], strides[r]}` of
int64s; all of one call's descriptors live in one numpy int64 buffer, so a
call allocates nothing but that buffer and the result arrays. Imports `dialect`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dialect.errors import ArgumentError
from ..dialect.shape import Shape


@dataclass(frozen=True)
class LeafSpec:
    """One array the entry point reads or writes: its shape and the layout it was compiled for."""

    shape: Shape
    dtype: np.dtype
    dims: tuple[int, ...]
    byte_strides: tuple[int, ...]  # the strides the compiled code assumes
    order: str  # "C", "F" or "K" (any other layout: allocate then view)

    @classmethod
    def of(cls, shape: Shape) -> LeafSpec:
        mtm = shape.layout.minor_to_major if shape.layout else ()
        order = "C" if shape.has_default_layout() else ("F" if mtm == tuple(range(shape.rank)) else "K")
        return cls(shape, shape.dtype, shape.dimensions, tuple(shape.byte_strides()), order)

    @property
    def scalar_type(self) -> type:
        return self.dtype.type

    @property
    def words(self) -> int:
        return 3 + 2 * len(self.dims)

    def allocate(self) -> np.ndarray:
        if self.order in ("C", "F"):
            return np.empty(self.dims, self.dtype, order=self.order)
        # A general minor_to_major: allocate the physical order, then view it logically.
        major_to_minor = tuple(reversed(self.shape.layout.minor_to_major))
        base = np.empty(tuple(self.dims[d] for d in major_to_minor), self.dtype)
        return base.transpose(np.argsort(major_to_minor))


_PY_SCALARS = (bool, int, float, complex)


def coerce(spec: LeafSpec, value: Any, where: str, any_strides: bool = False) -> np.ndarray:
    """`value` as an array the compiled code can read in place, or ArgumentError."""
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, np.generic):
        array = np.asarray(value)
    elif isinstance(value, _PY_SCALARS):
        return _python_scalar(spec, value, where)
    else:
        raise ArgumentError(f"{where}: expected a numpy array or scalar of {spec.shape}, "
                            f"got {type(value).__name__}")
    if array.dtype != spec.dtype:
        raise ArgumentError(f"{where}: expected dtype {spec.dtype} for {spec.shape}, got "
                            f"{array.dtype}")
    if array.shape != spec.dims:
        raise ArgumentError(f"{where}: expected shape {spec.dims} for {spec.shape}, got "
                            f"{array.shape}")
    if array.strides != spec.byte_strides and not (any_strides and strides_fit(array)):
        array = _relayout(spec, array)
    return array


def strides_fit(array: np.ndarray) -> bool:
    """Whether a memref descriptor can describe `array` in place (whole-element strides)."""
    return all(s % array.itemsize == 0 for s in array.strides)


def _python_scalar(spec: LeafSpec, value: Any, where: str) -> np.ndarray:
    if spec.dims:
        raise ArgumentError(f"{where}: expected an array of shape {spec.dims} for {spec.shape}, "
                            f"got a Python {type(value).__name__}")
    t = spec.shape.element_type
    if isinstance(value, complex) and not t.is_complex:
        raise ArgumentError(f"{where}: a complex value cannot be passed for {spec.shape}")
    if isinstance(value, float) and (t.is_integral or t.is_pred):
        if not float(value).is_integer():
            raise ArgumentError(f"{where}: {value!r} is not exactly representable as {t}")
    try:
        with np.errstate(all="raise"):
            array = np.array(value, dtype=spec.dtype)
    except (OverflowError, FloatingPointError, ValueError) as e:
        raise ArgumentError(f"{where}: {value!r} does not fit {t}: {e}") from None
    if (t.is_integral or t.is_pred) and not isinstance(value, bool) and int(array) != value:
        raise ArgumentError(f"{where}: {value!r} does not fit {t}")
    return array


def _relayout(spec: LeafSpec, array: np.ndarray) -> np.ndarray:
    """A copy of `array` in the layout the code was compiled for (views with other strides)."""
    out = spec.allocate()
    out[...] = array
    return out
