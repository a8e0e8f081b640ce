"""Dense constants -> numpy arrays with their exact bits.

jaxlib converts a DenseElementsAttr to numpy only for the standard int and float types: bf16,
f16, complex and i1 fail, and a complex attribute cannot even be fetched. Those are read from
the printed literal instead: `dense<"0x...">` holds the raw little-endian bytes, the other form
lists the values (non-finite floats as their hex bit patterns).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dialect.element_types import PrimitiveType, dtype_of
from ..dialect.shape import Shape
from .types import Unsupported

_FAST = {PrimitiveType.S8, PrimitiveType.S16, PrimitiveType.S32, PrimitiveType.S64,
         PrimitiveType.U8, PrimitiveType.U16, PrimitiveType.U32, PrimitiveType.U64,
         PrimitiveType.F32, PrimitiveType.F64}
_SUB_BYTE_INTS = {dtype_of(t) for t in PrimitiveType if t.is_sub_byte_int}
_TOKEN = re.compile(r"true|false|0x[0-9A-Fa-f]+|[-+]?(?:inf|nan|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")
_DENSE = re.compile(r"dense<(.*?)>\s*:", re.S)
_RESOURCE = re.compile(r"dense_resource<([^>]+)>")


def dense_array(op: Any, shape: Shape, attr_name: str = "value",
                resources: Callable[[str], bytes | None] | None = None) -> np.ndarray:
    """The value of `op`'s dense elements attribute `attr_name`, as an array of `shape`.
    `resources(name)` gives the blob of a `dense_resource<name>` (the module's
    dialect_resources: exporters from other frameworks keep large weights there)."""
    dtype = dtype_of(shape.element_type)
    if shape.element_type in _FAST:
        try:
            array = np.array(op.attributes[attr_name])
        except Exception:  # noqa: BLE001 - unsupported by jaxlib: read the text below
            array = None
        if array is not None and array.dtype == dtype and array.size == int(np.prod(shape.dimensions)):
            return array.reshape(shape.dimensions)
    try:
        text = str(op.attributes[attr_name])
    except Exception:  # noqa: BLE001 - a complex attribute cannot be fetched: print the op
        text = op.operation.get_asm(print_generic_op_form=True)
    resource = _RESOURCE.search(text)
    if resource is not None:
        blob = resources(resource.group(1)) if resources is not None else None
        if blob is None:
            raise Unsupported(f"the constant's resource {resource.group(1)!r} is missing from the "
                              "module's dialect_resources (or elided)")
        return literal_array(f'"0x{blob[4:].hex()}"', shape)  # a blob starts with its alignment (u32)
    match = _DENSE.search(text)
    if match is None:
        raise Unsupported(f"the constant {text[:80]!r} is not a dense elements literal "
                          "(elided constants are not supported)")
    return literal_array(match.group(1).strip(), shape)


def literal_array(literal: str, shape: Shape) -> np.ndarray:
    """The array of `shape` that the body of a `dense<...>` literal denotes."""
    dtype = dtype_of(shape.element_type)
    count = int(np.prod(shape.dimensions, dtype=np.int64))
    if literal.startswith('"0x'):
        data = bytes.fromhex(literal[3:-1])
        if dtype == np.bool_:
            flat = np.frombuffer(data, np.uint8) != 0
        else:
            flat = np.frombuffer(data, dtype)
    else:
        flat = _values(_TOKEN.findall(literal), dtype)
    if flat.size == 1 and count != 1:
        flat = np.broadcast_to(flat, (count,))  # a splat
    if flat.size != count:
        raise Unsupported(f"the constant has {flat.size} elements, its type {shape} needs {count}")
    return np.array(flat).reshape(shape.dimensions)


def _values(tokens: list[str], dtype: np.dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array([t == "true" or (t != "false" and int(t, 0) != 0) for t in tokens], np.bool_)
    if dtype.kind in "iu":
        return np.array([int(t, 0) for t in tokens], dtype=object).astype(dtype)
    if dtype in _SUB_BYTE_INTS:  # ml_dtypes' int4 & co. (kind "V"): their values, wrapped
        return np.array([int(t, 0) for t in tokens], np.int64).astype(dtype)
    # Floats (bf16 is kind "V" in ml_dtypes) and the components of complex numbers.
    component = np.dtype(np.float32 if dtype == np.complex64 else np.float64) if dtype.kind == "c" \
        else dtype
    bits_type = np.dtype(f"u{component.itemsize}")
    parts = np.empty(len(tokens), component)
    for i, t in enumerate(tokens):
        if t.startswith("0x"):
            parts[i] = np.array(int(t, 16), bits_type).view(component)
        else:
            parts[i] = component.type(float(t))
    return parts.view(dtype) if dtype.kind == "c" else parts
