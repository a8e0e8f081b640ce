"""Lowerings of the shape family. Imports `dialect` and the lowering modules.

Named ops where they fit: `tensor.collapse_shape`/`expand_shape` for reshape,
`linalg.transpose` (vector tiles when the minor dimension moves,
lowering/ops/transpose_tiles.py), `tensor.extract_slice`/`insert_slice` (static or dynamic
offsets, with strides) for slices and padding, `tensor.concat`, `linalg.fill`;
`linalg.generic` for reverse and iota. Dynamic start indices are clamped in
64-bit integers before they become `index` values, so no slice can leave its
tensor (SEMANTICS D4/D5/D11).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ...dialect.element_types import PrimitiveType
from ...dialect.shape import Shape
from ..patterns.framework import OpView, lowers
from ..scalar import conversion
from ..scalar.arithmetic import Elem
from . import transpose_tiles
from .elementwise import generic
from .linear_algebra import reassociation

DYNAMIC = ir.ShapedType.get_dynamic_stride_or_offset


def _element_type(v: OpView) -> ir.Type:
    return ir.RankedTensorType(v.result_type).element_type


def _empty(dims: Sequence[int], element_type: ir.Type) -> ir.Value:
    return tensor.EmptyOp(list(dims), element_type).result


def _value(result: ir.Value | ir.OpView) -> ir.Value:
    """The value of a single-result op builder (some return the op, some its result)."""
    return result if isinstance(result, ir.Value) else result.result


def _tensor_type(dims: Sequence[int], element_type: ir.Type) -> ir.Type:
    return ir.RankedTensorType.get(list(dims), element_type)


def _extract_slice(source: ir.Value, result_type: ir.Type, offsets: Sequence[int | ir.Value],
                   sizes: Sequence[int], strides: Sequence[int]) -> ir.Value:
    """tensor.extract_slice; an ir.Value in `offsets` is a dynamic offset."""
    dynamic = [o for o in offsets if isinstance(o, ir.Value)]
    static = [DYNAMIC() if isinstance(o, ir.Value) else o for o in offsets]
    return tensor.ExtractSliceOp(result_type, source, dynamic, [], [], static, list(sizes),
                                 list(strides)).result


def _insert_slice(source: ir.Value, dest: ir.Value, offsets: Sequence[int | ir.Value],
                  sizes: Sequence[int], strides: Sequence[int]) -> ir.Value:
    """tensor.insert_slice; an ir.Value in `offsets` is a dynamic offset."""
    dynamic = [o for o in offsets if isinstance(o, ir.Value)]
    static = [DYNAMIC() if isinstance(o, ir.Value) else o for o in offsets]
    return tensor.InsertSliceOp(source, dest, dynamic, [], [], static, list(sizes),
                                list(strides)).result


# -- reshape ----------------------------------------------------------------------------------


def _reshape_groups(src: Sequence[int], dst: Sequence[int]) -> tuple[list[list[int]], list[list[int]]]:
    """Reassociation groups turning `src` into `dst` through one collapse and one expand.

    The groups pair the shortest runs of src and dst dimensions with equal
    products; size-1 dimensions left over at the end join the last group. For
    zero-size arrays products do not identify runs, so everything is one group.
    """
    if math.prod(src) == 0:
        return [list(range(len(src)))], [list(range(len(dst)))]
    src_groups: list[list[int]] = []
    dst_groups: list[list[int]] = []
    i = j = 0
    while i < len(src) and j < len(dst):
        sg, dg = [i], [j]
        ps, pd = src[i], dst[j]
        i, j = i + 1, j + 1
        while ps != pd:
            if ps < pd:
                sg.append(i)
                ps *= src[i]
                i += 1
            else:
                dg.append(j)
                pd *= dst[j]
                j += 1
        src_groups.append(sg)
        dst_groups.append(dg)
    # Only size-1 dimensions remain on either side.
    if src_groups:
        src_groups[-1].extend(range(i, len(src)))
        dst_groups[-1].extend(range(j, len(dst)))
    return src_groups, dst_groups


@lowers("reshape")
def lower_reshape(v: OpView) -> ir.Value:
    src, dst = v.shapes["operand"].dimensions, v.result_shape.dimensions
    value = v.args["operand"]
    if src == dst:
        return value
    elem = _element_type(v)
    src_groups, dst_groups = _reshape_groups(src, dst)
    middle = [math.prod(src[d] for d in g) for g in src_groups]
    if len(middle) != len(src):
        value = tensor.CollapseShapeOp(_tensor_type(middle, elem), value,
                                       reassociation(src_groups)).result
    if len(middle) != len(dst):
        value = tensor.ExpandShapeOp(_tensor_type(dst, elem), value, reassociation(dst_groups),
                                     [], list(dst)).result
    return value


# -- transpose, reverse -----------------------------------------------------------------------


@lowers("transpose")
def lower_transpose(v: OpView) -> ir.Value:
    perm = list(v.attrs["permutation"])
    if perm == sorted(perm):
        return v.args["operand"]
    tiled = transpose_tiles.tiled(v.args["operand"], v.shapes["operand"].dimensions, perm)
    if tiled is not None:
        return tiled
    init = _empty(v.result_shape.dimensions, _element_type(v))
    return _value(linalg.transpose(v.args["operand"], outs=[init], permutation=perm))


@lowers("reverse")
def lower_reverse(v: OpView) -> ir.Value:
    """A generic reading the operand at n - 1 - i along the reversed dimensions."""
    shape = v.shapes["operand"]
    # Reversing a dimension of size <= 1 changes nothing.
    dims = {d for d in v.attrs["dimensions"] if shape.dimensions[d] > 1}
    if not dims:
        return v.args["operand"]
    operand = v.args["operand"]
    if shape.rank - 1 not in dims:
        # Outer dimensions only: a reversed indexing map, which vectorizes along the last one.
        exprs = []
        for d in range(shape.rank):
            index = ir.AffineDimExpr.get(d)
            if d in dims:
                index = ir.AffineAddExpr.get(ir.AffineConstantExpr.get(shape.dimensions[d] - 1),
                                             ir.AffineMulExpr.get(index, ir.AffineConstantExpr.get(-1)))
            exprs.append(index)
        in_map = ir.AffineMap.get(shape.rank, 0, exprs)
        return generic([operand], [shape], v.result_shape, v.result_type, lambda x: x,
                       input_maps=[in_map])

    # The innermost dimension is reversed: affine-super-vectorize (LLVM 22) vectorizes an
    # access `n - 1 - d` along the innermost loop as if it were `d` (wrong results), so the
    # element is read with tensor.extract at computed indices, which it leaves scalar.
    def body() -> ir.Value:
        indices = []
        for d in range(shape.rank):
            index = linalg.IndexOp(d).result
            if d in dims:
                index = arith.subi(arith.constant(ir.IndexType.get(), shape.dimensions[d] - 1), index)
            indices.append(index)
        return tensor.extract(operand, indices)

    return generic([], [], v.result_shape, v.result_type, body)


# -- slice, concatenate, pad ------------------------------------------------------------------


@lowers("slice")
def lower_slice(v: OpView) -> ir.Value:
    shape, out = v.shapes["operand"], v.result_shape
    if out.dimensions == shape.dimensions:
        return v.args["operand"]
    if out.numel == 0:
        # An empty slice may start at the end of its dimension, an offset memref.subview's
        # verifier rejects as out of bounds; there is nothing to read anyway.
        return _empty(out.dimensions, _element_type(v))
    return _extract_slice(v.args["operand"], v.result_type, v.attrs["start_indices"],
                          out.dimensions, v.attrs["strides"])


@lowers("concatenate")
def lower_concatenate(v: OpView) -> ir.Value:
    dim = v.attrs["dimension"]
    # Empty operands add nothing, and one at the end would be inserted at an offset equal to
    # the dimension's size, which memref.subview's verifier rejects after bufferization.
    inputs = [x for x, s in zip(v.args["inputs"], v.shapes["inputs"]) if s.numel]
    if not inputs:
        return _empty(v.result_shape.dimensions, _element_type(v))
    if len(inputs) == 1:
        return inputs[0]
    # Each operand inserted into one destination (not tensor.concat, which bufferizes into
    # a buffer of its own): `output_tensors` can then make a returned concatenation's
    # destination the output buffer (4 x [256,1024] f32 on axis 0: 581 -> 290 us).
    result = _empty(v.result_shape.dimensions, _element_type(v))
    offset = 0
    for x in inputs:
        sizes = ir.RankedTensorType(x.type).shape
        offsets = [offset if d == dim else 0 for d in range(len(sizes))]
        result = _insert_slice(x, result, offsets, sizes, [1] * len(sizes))
        offset += sizes[dim]
    return result


@lowers("pad")
def lower_pad(v: OpView) -> ir.Value:
    """Interior-dilate and edge-pad with non-negative amounts by a strided insert into a
    filled tensor, then crop what negative edge padding removes."""
    shape, out = v.shapes["operand"], v.result_shape
    lows, highs = v.attrs["edge_padding_low"], v.attrs["edge_padding_high"]
    interiors = v.attrs["interior_padding"]
    elem = _element_type(v)
    if not any(lows) and not any(highs) and not any(interiors):
        return v.args["operand"]
    if out.numel == 0:
        return _empty(out.dimensions, elem)
    full = [max(lo, 0) + n + max(n - 1, 0) * i + max(hi, 0)
            for n, lo, hi, i in zip(shape.dimensions, lows, highs, interiors)]
    value = tensor.extract(v.args["padding_value"], [])
    result = _value(linalg.fill(value, outs=[_empty(full, elem)]))
    if shape.numel:
        result = _insert_slice(v.args["operand"], result, [max(lo, 0) for lo in lows],
                               shape.dimensions, [i + 1 for i in interiors])
    if any(lo < 0 or hi < 0 for lo, hi in zip(lows, highs)):
        result = _extract_slice(result, v.result_type, [max(-lo, 0) for lo in lows],
                                out.dimensions, [1] * out.rank)
    return result


# -- iota, get_dimension_size -----------------------------------------------------------------


@lowers("iota")
def lower_iota(v: OpView) -> ir.Value:
    out = v.result_shape
    dim = v.attrs["iota_dimension"]
    dst = Elem(out.element_type)
    i64 = Elem(PrimitiveType.S64)

    def body() -> ir.Value:
        index = linalg.IndexOp(dim).result
        if dst.t.is_integral:  # computed in the element type, wrapping like XLA's integer iota
            return arith.index_cast(dst.type, index)
        # Float and complex iota: ConvertElementType of an integer iota (seeds 001/004).
        return conversion.convert(i64, dst, arith.index_cast(i64.type, index))

    return generic([], [], out, v.result_type, body)


@lowers("get_dimension_size")
def lower_get_dimension_size(v: OpView) -> ir.Value:
    size = v.shapes["operand"].dimensions[v.attrs["dimension"]]
    i32 = ir.IntegerType.get_signless(32)
    result_type = _tensor_type([], i32)
    return arith.ConstantOp(result_type, ir.DenseElementsAttr.get_splat(
        result_type, ir.IntegerAttr.get(i32, size))).result


# -- dynamic_slice, dynamic_update_slice ------------------------------------------------------


def _clamped_starts(v: OpView, operand: Shape, sizes: Sequence[int]) -> list[int | ir.Value]:
    """Each start index clamped to [0, dim - size] (SEMANTICS D4/D5), as an `index` value;
    a static 0 where the slice spans the whole dimension."""
    i64 = ir.IntegerType.get_signless(64)
    starts: list[int | ir.Value] = []
    for value, index_shape, dim, size in zip(v.args["start_indices"], v.shapes["start_indices"],
                                             operand.dimensions, sizes):
        largest = dim - size
        if largest == 0:
            starts.append(0)
            continue
        t = index_shape.element_type
        x = tensor.extract(value, [])
        # Widen to 64 bits with the index's own signedness (a u8 200 stays 200), then clamp:
        # signed compares for signed types, an unsigned min for unsigned ones (never < 0).
        if t.bit_width < 64:
            x = (arith.extsi if t.is_signed_int else arith.extui)(i64, x)
        hi = arith.constant(i64, largest)
        if t.is_signed_int:
            x = arith.minsi(arith.maxsi(x, arith.constant(i64, 0)), hi)
        else:
            x = arith.minui(x, hi)
        starts.append(arith.index_cast(ir.IndexType.get(), x))
    return starts


@lowers("dynamic_slice")
def lower_dynamic_slice(v: OpView) -> ir.Value:
    operand, out = v.shapes["operand"], v.result_shape
    if out.dimensions == operand.dimensions:
        return v.args["operand"]  # every start clamps to 0
    if out.numel == 0:
        return _empty(out.dimensions, _element_type(v))
    starts = _clamped_starts(v, operand, out.dimensions)
    return _extract_slice(v.args["operand"], v.result_type, starts, out.dimensions, [1] * out.rank)


@lowers("dynamic_update_slice")
def lower_dynamic_update_slice(v: OpView) -> ir.Value:
    operand, update = v.shapes["operand"], v.shapes["update"]
    if update.dimensions == operand.dimensions:
        return v.args["update"]  # every start clamps to 0: the update replaces everything
    if update.numel == 0:
        return v.args["operand"]
    starts = _clamped_starts(v, operand, update.dimensions)
    return _insert_slice(v.args["update"], v.args["operand"], starts, update.dimensions,
                         [1] * update.rank)
