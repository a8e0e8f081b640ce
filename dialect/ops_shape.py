"""Ops of the shape family (see the issue on data movement, reductions and dot products).

Reshape, transpose, reverse, slice, concatenate, pad, iota, get_dimension_size,
dynamic_slice and dynamic_update_slice, with XLA's shape rules (seeds 001/003/004
and ../shared/SEMANTICS.md 5.D/5.I). Every data-movement op accepts every array
element type. Builder-only sugar (broadcast, collapse, reshape with a collapse
order, `x[...]`) lives in `builder.methods_shape` and emits these ops.
Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .element_types import PrimitiveType, type_of
from .errors import ShapeError
from .registry import ELEMENT_TYPE, I64_ARRAY, INT, OpDef, Operand, define
from .shape import Shape


def _require_array(op: str, shapes: Sequence[Shape]) -> None:
    for s in shapes:
        if not s.is_array():
            raise ShapeError(op, shapes, f"operands must be arrays, got {s}")


def _one_per_dim(op: str, operand: Shape, name: str, values: Sequence[int]) -> None:
    if len(values) != operand.rank:
        raise ShapeError(op, [operand], f"{name} {tuple(values)} must have one entry per operand "
                         f"dimension ({operand.rank})")


def _dims_in_range(op: str, operand: Shape, name: str, dims: Sequence[int]) -> None:
    for d in dims:
        if not 0 <= d < operand.rank:
            raise ShapeError(op, [operand], f"{name} {tuple(dims)}: dimension {d} is out of range "
                             f"for rank {operand.rank}")
    if len(set(dims)) != len(dims):
        raise ShapeError(op, [operand], f"{name} {tuple(dims)} repeat a dimension")


def infer_reshape(operand: Shape, *, new_sizes: tuple[int, ...]) -> Shape:
    op = "reshape"
    _require_array(op, [operand])
    if any(d < 0 for d in new_sizes):
        raise ShapeError(op, [operand], f"new_sizes {tuple(new_sizes)} has a negative size")
    if math.prod(new_sizes) != operand.numel:
        raise ShapeError(op, [operand], f"new_sizes {tuple(new_sizes)} hold {math.prod(new_sizes)} "
                         f"elements, the operand {operand.numel}; reshape keeps the element count")
    return Shape.array(operand.element_type, new_sizes)


def check_permutation(op: str, operand: Shape, name: str, permutation: Sequence[int]) -> None:
    """ShapeError unless `permutation` is a permutation of the operand's dimensions."""
    if sorted(permutation) != list(range(operand.rank)):
        raise ShapeError(op, [operand], f"{name} {tuple(permutation)} is not a permutation of "
                         f"the operand's dimensions 0..{operand.rank - 1}")


def infer_transpose(operand: Shape, *, permutation: tuple[int, ...]) -> Shape:
    _require_array("transpose", [operand])
    check_permutation("transpose", operand, "permutation", permutation)
    # input_dims[permutation[i]] == output_dims[i]
    return operand.with_dims(operand.dimensions[p] for p in permutation)


def infer_reverse(operand: Shape, *, dimensions: tuple[int, ...]) -> Shape:
    _require_array("reverse", [operand])
    _dims_in_range("reverse", operand, "dimensions", dimensions)
    return operand.with_dims(operand.dimensions)


def infer_slice(operand: Shape, *, start_indices: tuple[int, ...], limit_indices: tuple[int, ...],
                strides: tuple[int, ...]) -> Shape:
    op = "slice"
    _require_array(op, [operand])
    for name, values in (("start_indices", start_indices), ("limit_indices", limit_indices),
                         ("strides", strides)):
        _one_per_dim(op, operand, name, values)
    out = []
    for d, (start, limit, stride, size) in enumerate(
            zip(start_indices, limit_indices, strides, operand.dimensions)):
        if start < 0:
            raise ShapeError(op, [operand], f"start index {start} of dimension {d} is negative")
        if limit > size:
            raise ShapeError(op, [operand], f"limit index {limit} of dimension {d} exceeds its "
                             f"size {size}")
        if start > limit:  # start == limit is an empty slice (SEMANTICS D10)
            raise ShapeError(op, [operand], f"start index {start} of dimension {d} is greater "
                             f"than its limit index {limit}")
        if stride <= 0:
            raise ShapeError(op, [operand], f"stride {stride} of dimension {d} must be positive")
        out.append(-(-(limit - start) // stride))  # ceil((limit - start) / stride)
    return operand.with_dims(out)


def infer_concatenate(inputs: tuple[Shape, ...], *, dimension: int) -> Shape:
    op = "concatenate"
    if not inputs:
        raise ShapeError(op, inputs, "needs at least one operand")
    _require_array(op, inputs)
    first = inputs[0]
    if first.rank == 0:
        raise ShapeError(op, inputs, "rank-0 operands cannot be concatenated (there is no "
                         "dimension to concatenate along)")
    if not 0 <= dimension < first.rank:
        raise ShapeError(op, inputs, f"dimension {dimension} is out of range for rank {first.rank}")
    total = 0
    for i, s in enumerate(inputs):
        if s.rank != first.rank:
            raise ShapeError(op, inputs, f"operand {i} has rank {s.rank}, operand 0 rank "
                             f"{first.rank}; all operands must have the same rank")
        if s.element_type != first.element_type:
            raise ShapeError(op, inputs, f"operand {i} has element type {s.element_type}, "
                             f"operand 0 {first.element_type}; all must be the same")
        for d, (a, b) in enumerate(zip(s.dimensions, first.dimensions)):
            if d != dimension and a != b:
                raise ShapeError(op, inputs, f"operand {i} differs from operand 0 in dimension "
                                 f"{d} ({a} vs {b}); only dimension {dimension} may differ")
        total += s.dimensions[dimension]
    dims = list(first.dimensions)
    dims[dimension] = total
    return first.with_dims(dims)


def infer_pad(operand: Shape, padding_value: Shape, *, edge_padding_low: tuple[int, ...],
              edge_padding_high: tuple[int, ...], interior_padding: tuple[int, ...]) -> Shape:
    op = "pad"
    shapes = [operand, padding_value]
    _require_array(op, shapes)
    if padding_value.rank != 0:
        raise ShapeError(op, shapes, "padding_value must be a scalar")
    if padding_value.element_type != operand.element_type:
        raise ShapeError(op, shapes, "padding_value must have the operand's element type")
    for name, values in (("edge_padding_low", edge_padding_low),
                         ("edge_padding_high", edge_padding_high),
                         ("interior_padding", interior_padding)):
        if len(values) != operand.rank:
            raise ShapeError(op, shapes, f"padding_config needs one (low, high, interior) per "
                             f"operand dimension ({operand.rank}), {name} has {len(values)}")
    out = []
    for d, (size, low, high, interior) in enumerate(
            zip(operand.dimensions, edge_padding_low, edge_padding_high, interior_padding)):
        if interior < 0:
            raise ShapeError(op, shapes, f"interior padding {interior} of dimension {d} is negative")
        # Interior padding comes first; negative edge padding then removes elements (seed 004).
        n = low + high + size + max(size - 1, 0) * interior
        if n < 0:
            raise ShapeError(op, shapes, f"padding ({low}, {high}, {interior}) gives dimension {d} "
                             f"(size {size}) the negative size {n}")
        out.append(n)
    return operand.with_dims(out)


IOTA_TYPES = frozenset(t for t in PrimitiveType
                       if t.is_integral or t.is_floating or t.is_complex)


def infer_iota(*, dimensions: tuple[int, ...], element_type: Any, iota_dimension: int) -> Shape:
    op = "iota"
    try:
        t = type_of(element_type)
    except ShapeError:
        raise ShapeError(op, [], f"not an element type: {element_type!r}") from None
    if t not in IOTA_TYPES:
        # XLA's verifier: integral, floating point or complex only (no pred, token, tuple).
        raise ShapeError(op, [], f"iota of element type {t} is not supported (integer, floating "
                         "point or complex types only)")
    if any(d < 0 for d in dimensions):
        raise ShapeError(op, [], f"dimensions {tuple(dimensions)} has a negative size")
    if not dimensions:
        raise ShapeError(op, [], "iota needs a shape of rank >= 1")
    if not 0 <= iota_dimension < len(dimensions):
        raise ShapeError(op, [], f"iota_dimension {iota_dimension} is out of range for rank "
                         f"{len(dimensions)}")
    return Shape.array(t, dimensions)


def infer_get_dimension_size(operand: Shape, *, dimension: int) -> Shape:
    _require_array("get_dimension_size", [operand])
    if not 0 <= dimension < operand.rank:
        raise ShapeError("get_dimension_size", [operand], f"dimension {dimension} is out of "
                         f"range for rank {operand.rank}")
    return Shape.array(PrimitiveType.S32, ())


def _check_start_indices(op: str, shapes: Sequence[Shape], operand: Shape,
                         start_indices: tuple[Shape, ...]) -> None:
    if len(start_indices) != operand.rank:
        raise ShapeError(op, shapes, f"got {len(start_indices)} start indices for an operand of "
                         f"rank {operand.rank}; there must be one per dimension")
    for i, s in enumerate(start_indices):
        if not s.is_array() or s.rank != 0:
            raise ShapeError(op, shapes, f"start index {i} must be a scalar, got {s}")
        if not s.element_type.is_integral:
            raise ShapeError(op, shapes, f"start index {i} has element type {s.element_type}; "
                             "start indices must be integers")
        if s.element_type != start_indices[0].element_type:
            raise ShapeError(op, shapes, "start indices must all have the same element type, got "
                             f"{start_indices[0].element_type} and {s.element_type}")


def infer_dynamic_slice(operand: Shape, start_indices: tuple[Shape, ...], *,
                        slice_sizes: tuple[int, ...]) -> Shape:
    op = "dynamic_slice"
    shapes = [operand, *start_indices]
    _require_array(op, [operand])
    _check_start_indices(op, shapes, operand, start_indices)
    _one_per_dim(op, operand, "slice_sizes", slice_sizes)
    for d, (size, dim) in enumerate(zip(slice_sizes, operand.dimensions)):
        if size < 0:
            raise ShapeError(op, shapes, f"slice size {size} of dimension {d} is negative")
        if size > dim:
            raise ShapeError(op, shapes, f"slice size {size} of dimension {d} exceeds its size {dim}")
    return operand.with_dims(slice_sizes)


def infer_dynamic_update_slice(operand: Shape, update: Shape,
                               start_indices: tuple[Shape, ...]) -> Shape:
    op = "dynamic_update_slice"
    shapes = [operand, update, *start_indices]
    _require_array(op, [operand, update])
    if update.rank != operand.rank:
        raise ShapeError(op, shapes, f"update has rank {update.rank}, the operand "
                         f"{operand.rank}; they must be equal")
    if update.element_type != operand.element_type:
        raise ShapeError(op, shapes, "update must have the operand's element type")
    _check_start_indices(op, shapes, operand, start_indices)
    for d, (u, dim) in enumerate(zip(update.dimensions, operand.dimensions)):
        if u > dim:  # start + update <= operand size (SEMANTICS D11)
            raise ShapeError(op, shapes, f"update dimension {d} (size {u}) exceeds the "
                             f"operand's (size {dim})")
    return operand.with_dims(operand.dimensions)


define(OpDef("reshape", (Operand("operand"),), {"new_sizes": I64_ARRAY}, infer_reshape,
             doc="Row-major reshape to new_sizes (spec#reshape).", builders={"reshape": {}}))
define(OpDef("transpose", (Operand("operand"),), {"permutation": I64_ARRAY}, infer_transpose,
             doc="Permute dimensions (spec#transpose).", builders={"transpose": {}}))
define(OpDef("reverse", (Operand("operand"),), {"dimensions": I64_ARRAY}, infer_reverse,
             doc="Reverse the listed dimensions (spec#reverse).", builders={"rev": {}}))
define(OpDef("slice", (Operand("operand"),),
             {"start_indices": I64_ARRAY, "limit_indices": I64_ARRAY, "strides": I64_ARRAY},
             infer_slice, doc="Static strided slice (spec#slice).", builders={"slice": {}}))
define(OpDef("concatenate", (Operand("inputs", variadic=True),), {"dimension": INT},
             infer_concatenate, doc="Concatenate along a dimension (spec#concatenate).",
             builders={"concat_in_dim": {}}))
define(OpDef("pad", (Operand("operand"), Operand("padding_value")),
             {"edge_padding_low": I64_ARRAY, "edge_padding_high": I64_ARRAY,
              "interior_padding": I64_ARRAY},
             infer_pad, doc="Edge and interior padding, negative edges crop (spec#pad).",
             builders={"pad": {}}))
define(OpDef("iota", (), {"dimensions": I64_ARRAY, "element_type": ELEMENT_TYPE,
                          "iota_dimension": INT},
             infer_iota, doc="0, 1, 2... along iota_dimension (spec#iota).", builders={"iota": {}}))
define(OpDef("get_dimension_size", (Operand("operand"),), {"dimension": INT},
             infer_get_dimension_size, doc="Size of a dimension as s32 (spec#get_dimension_size).",
             builders={"get_dimension_size": {}}))
define(OpDef("dynamic_slice", (Operand("operand"), Operand("start_indices", variadic=True)),
             {"slice_sizes": I64_ARRAY}, infer_dynamic_slice,
             doc="Slice at runtime start indices, clamped into bounds (spec#dynamic_slice).",
             builders={"dynamic_slice": {}}))
define(OpDef("dynamic_update_slice",
             (Operand("operand"), Operand("update"), Operand("start_indices", variadic=True)), {},
             infer_dynamic_update_slice,
             doc="Overwrite a slice at runtime start indices, clamped into bounds "
                 "(spec#dynamic_update_slice).",
             builders={"dynamic_update_slice": {}}))
