"""Shared pieces of the narrow-type tests (tests/test_narrow_*.py): the types, every bit
pattern of one as a numpy array, and the check that no memory holds sub-byte elements."""

from __future__ import annotations

import re

import numpy as np

import xlamlir as xm

P = xm.PrimitiveType
SUB_BYTE_INTS = (P.S2, P.S4, P.U2, P.U4)
NARROW_FLOATS = (P.F8E5M2, P.F8E4M3FN, P.F8E4M3B11FNUZ, P.F8E5M2FNUZ, P.F8E4M3FNUZ, P.F8E4M3,
                 P.F8E3M4, P.F4E2M1FN, P.F8E8M0FNU)
NARROW = SUB_BYTE_INTS + NARROW_FLOATS

# A memref or vector in memory of a type narrower than a byte, or of a narrow float type.
_NOT_BYTES = re.compile(r"memref<[^>]*x(?:i2|i4|f8E\w+|f4E\w+)>|memref<(?:i2|i4|f8E\w+|f4E\w+)>")


def all_bits(t: xm.PrimitiveType) -> np.ndarray:
    """Every bit pattern of `t`, one per element (canonical: high bits zero)."""
    return np.arange(1 << t.bit_width, dtype=np.uint8).view(xm.dtype_of(t))


def bits_of(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint8)


def compile_checked(computation: xm.XlaComputation) -> xm.Executable:
    """Compile, and check that no buffer holds elements narrower than a byte (LLVM packs
    them bit by bit, numpy stores one per byte)."""
    exe = xm.compile(computation)
    for stage, text in exe.stages.items():
        found = _NOT_BYTES.search(text)
        assert found is None, f"stage {stage} has a buffer of narrow elements: {found.group()}"
    return exe


def run(build, arrays) -> np.ndarray:
    """Compile `build(b, *params)`, one parameter per array, and run it on the arrays."""
    b = xm.XlaBuilder("t")
    params = [b.parameter(i, xm.Shape.array(xm.type_of(a.dtype), a.shape)) for i, a in enumerate(arrays)]
    return compile_checked(b.build(build(b, *params)))(*arrays)
