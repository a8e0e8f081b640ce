"""ShapeMethods: the XlaBuilder methods of the shape family. Imports `dialect` and
`builder.recorder`.

User input (lists, numpy ints) is normalised by `builder.args` before `emit`.
Sugar emits existing ops: `broadcast` is a `broadcast_in_dim`, `collapse` and
`reshape` with a collapse order are a (transpose +) `reshape`, and `x[...]`
(`index`) is slice + reverse + reshape.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError
from ..dialect.ops_shape import check_permutation
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import Scalar, XlaOp


def _array_operand(self: ShapeMethods, op: str, operand: Any) -> XlaOp:
    operand = self.check_operand(op, operand)
    if not operand.shape.is_array():
        raise ShapeError(op, [operand.shape], "the operand must be an array")
    return operand


def _start_indices(self: ShapeMethods, op: str, start_indices: Any) -> list[XlaOp]:
    """start_indices as a list of scalar XlaOps.

    Also accepted: one rank-1 XlaOp (seed 003's form), split into scalars, and
    Python/numpy ints, made constants of the element type of the XlaOps in the
    list (s32 when there are none).
    """
    if isinstance(start_indices, XlaOp):
        index = self.check_operand(op, start_indices)
        if index.shape.is_array() and index.shape.rank == 1:
            n = index.shape.dimensions[0]
            return [self.reshape(self.slice(index, (i,), (i + 1,)), ()) for i in range(n)]
        return [index]
    if isinstance(start_indices, (list, tuple)) or (
            isinstance(start_indices, np.ndarray) and start_indices.ndim == 1):
        items = list(start_indices)
    else:
        raise ShapeError(op, [], f"start_indices must be a list of scalar XlaOps, got {start_indices!r}")
    like = next((i for i in items if isinstance(i, XlaOp)), None)
    result = []
    for item in items:
        if isinstance(item, XlaOp):
            result.append(item)
            continue
        value = args.integer(op, item, "a start index")
        integral = like is not None and like.shape.is_array() and like.shape.element_type.is_integral
        dtype = like.shape.dtype if integral else np.dtype(np.int32)
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:  # never wrap a Python int silently
            raise ShapeError(op, [], f"start index {value} does not fit the index type {dtype}")
        result.append(self.constant(np.array(value, dtype)))
    return result


# -- x[...] -------------------------------------------------------------------------------------


def _static_index(shape: Shape, item: Any) -> int:
    unsupported = ShapeError("index", [shape], f"unsupported index {item!r}: only ints, slices, "
                             "'...' and None (basic indexing with static values)")
    if isinstance(item, (XlaOp, bool, np.bool_)):
        raise unsupported
    try:
        return operator.index(item)
    except TypeError:
        raise unsupported from None


def _index_plan(shape: Shape, index: Any) -> tuple[list[tuple[int, int, int]], list[int], list[int]]:
    """numpy basic indexing of `shape` as (start, limit, stride) per dimension, the dimensions
    to reverse, and the result dimensions (ints drop theirs, None adds a 1)."""
    items = index if isinstance(index, tuple) else (index,)
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise ShapeError("index", [shape], "an index can only have a single ellipsis ('...')")
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > shape.rank:
        raise ShapeError("index", [shape], f"too many indices: {used} for an array of rank {shape.rank}")
    if Ellipsis not in items:
        items = (*items, Ellipsis)
    bounds: list[tuple[int, int, int]] = []
    reverse: list[int] = []
    out_dims: list[int] = []
    dim = 0
    for item in items:
        if item is Ellipsis:
            for _ in range(shape.rank - used):
                size = shape.dimensions[dim]
                bounds.append((0, size, 1))
                out_dims.append(size)
                dim += 1
            continue
        if item is None:
            out_dims.append(1)
            continue
        size = shape.dimensions[dim]
        if isinstance(item, builtins.slice):
            try:
                start, stop, step = item.indices(size)
            except (TypeError, ValueError) as e:  # a zero step, non-int bounds
                raise ShapeError("index", [shape], f"unsupported slice {item!r}: {e}") from None
            n = len(range(start, stop, step))
            if n == 0:
                bounds.append((0, 0, 1))
            elif step > 0:
                bounds.append((start, start + (n - 1) * step + 1, step))
            else:
                # Take the same elements in increasing order, then reverse the dimension.
                low = start + (n - 1) * step
                bounds.append((low, start + 1, -step))
                if n > 1:
                    reverse.append(dim)
            out_dims.append(n)
        else:
            i = _static_index(shape, item)
            if not -size <= i < size:
                raise ShapeError("index", [shape], f"index {i} is out of range for dimension {dim} "
                                 f"of size {size}")
            i %= size
            bounds.append((i, i + 1, 1))
        dim += 1
    return bounds, reverse, out_dims


class ShapeMethods(Recorder):
    """Shape and data-movement methods: reshapes, slices, padding, iota, dynamic slices, `x[...]`."""

    def broadcast(self, operand: XlaOp, broadcast_sizes: Sequence[int]) -> XlaOp:
        """New major dimensions of the given sizes: output[i..., j...] = operand[j...]."""
        operand = _array_operand(self, "broadcast", operand)
        sizes = args.ints("broadcast", broadcast_sizes, "broadcast_sizes")
        if any(s < 0 for s in sizes):
            raise ShapeError("broadcast", [operand.shape], f"broadcast_sizes {sizes} has a negative size")
        rank = operand.shape.rank
        return self.broadcast_in_dim(operand, sizes + operand.shape.dimensions,
                                     tuple(range(len(sizes), len(sizes) + rank)))

    def broadcast_in_dim(self, operand: XlaOp, out_dim_size: Sequence[int],
                         broadcast_dimensions: Sequence[int]) -> XlaOp:
        """`operand`'s dimension i becomes output dimension broadcast_dimensions[i] of an array
        of `out_dim_size`; the other output dimensions repeat it (spec#broadcast_in_dim)."""
        name = "broadcast_in_dim"
        return self.emit(name, [operand], {
            "out_dim_size": args.ints(name, out_dim_size, "out_dim_size"),
            "broadcast_dimensions": args.ints(name, broadcast_dimensions, "broadcast_dimensions")})

    def reshape(self, operand: XlaOp, new_sizes: Sequence[int] | Shape,
                dimensions: Sequence[int] | None = None) -> XlaOp:
        """Row-major reshape; `dimensions` (a permutation) transposes the operand first (D2/D17).

        `new_sizes` may also be a Shape of the operand's element type (seed 001's
        `Reshape(shape, operand)`).
        """
        operand = _array_operand(self, "reshape", operand)
        if isinstance(new_sizes, Shape):
            if not new_sizes.is_array() or new_sizes.element_type != operand.shape.element_type:
                raise ShapeError("reshape", [operand.shape], f"the target shape {new_sizes} must be an "
                                 "array of the operand's element type")
            args.static_shape("reshape", new_sizes, "target shape", hint="use dynamic_reshape")
            sizes = new_sizes.dimensions
        else:
            sizes = args.ints("reshape", new_sizes, "new_sizes")
        if dimensions is not None:
            perm = args.ints("reshape", dimensions, "dimensions")
            check_permutation("reshape", operand.shape, "dimensions", perm)
            # XLA's builder does the same: Reshape(v, dims, sizes) = Reshape(Transpose(v, dims), sizes).
            if perm != tuple(range(operand.shape.rank)):
                operand = self.transpose(operand, perm)
        return self.emit("reshape", [operand], {"new_sizes": sizes})

    def collapse(self, operand: XlaOp, dimensions: Sequence[int]) -> XlaOp:
        """Merge an in-order, consecutive run of dimensions into one (a reshape)."""
        operand = _array_operand(self, "collapse", operand)
        dims = args.ints("collapse", dimensions, "dimensions")
        shape = operand.shape
        for d in dims:
            if not 0 <= d < shape.rank:
                raise ShapeError("collapse", [shape], f"dimension {d} is out of range for rank {shape.rank}")
        if any(b != a + 1 for a, b in zip(dims, dims[1:])):
            raise ShapeError("collapse", [shape], f"dimensions {dims} must be an in-order, consecutive "
                             "run such as {0, 1} or {1, 2}; use reshape(operand, new_sizes, dimensions) "
                             "for any other collapse order")
        if len(dims) <= 1:
            return operand  # nothing to merge (XLA returns the operand too)
        first, last = dims[0], dims[-1]
        merged = int(np.prod(shape.dimensions[first:last + 1], dtype=np.int64))
        new_sizes = shape.dimensions[:first] + (merged,) + shape.dimensions[last + 1:]
        return self.emit("reshape", [operand], {"new_sizes": new_sizes})

    def transpose(self, operand: XlaOp, permutation: Sequence[int]) -> XlaOp:
        """input_dims[permutation[i]] == output_dims[i]."""
        return self.emit("transpose", [operand],
                          {"permutation": args.ints("transpose", permutation, "permutation")})

    def rev(self, operand: XlaOp, dimensions: Sequence[int]) -> XlaOp:
        """Reverse the order of the elements along `dimensions`."""
        return self.emit("reverse", [operand], {"dimensions": args.ints("rev", dimensions, "dimensions")})

    def slice(self, operand: XlaOp, start_indices: Sequence[int],  # noqa: A001
              limit_indices: Sequence[int], strides: Sequence[int] | None = None) -> XlaOp:
        """operand[start:limit:stride] per dimension; strides default to 1."""
        operand = _array_operand(self, "slice", operand)
        start = args.ints("slice", start_indices, "start_indices")
        limit = args.ints("slice", limit_indices, "limit_indices")
        step = (1,) * operand.shape.rank if strides is None else args.ints("slice", strides, "strides")
        return self.emit("slice", [operand], {"start_indices": start, "limit_indices": limit,
                                               "strides": step})

    def concat_in_dim(self, operands: Sequence[XlaOp], dimension: int) -> XlaOp:
        """Concatenate one or more arrays along `dimension`."""
        if isinstance(operands, XlaOp):
            operands = [operands]
        return self.emit("concatenate", [list(operands)],
                          {"dimension": args.integer("concat_in_dim", dimension, "dimension")})

    def pad(self, operand: XlaOp, padding_value: XlaOp | Scalar,
            padding_config: Sequence[Sequence[int]]) -> XlaOp:
        """Pad each dimension by (low, high, interior); negative low/high crop."""
        config = []
        for entry in padding_config:
            triple = args.ints("pad", entry, "each padding_config entry")
            if len(triple) != 3:
                raise ShapeError("pad", [], f"each padding_config entry must be (low, high, interior), "
                                 f"got {tuple(entry)}")
            config.append(triple)
        padding_value = self.as_op(padding_value, like=operand if isinstance(operand, XlaOp) else None)
        return self.emit("pad", [operand, padding_value], {
            "edge_padding_low": tuple(c[0] for c in config),
            "edge_padding_high": tuple(c[1] for c in config),
            "interior_padding": tuple(c[2] for c in config)})

    def iota(self, shape: Shape, iota_dimension: int) -> XlaOp:
        """An array of `shape` holding 0, 1, 2... along `iota_dimension`."""
        if not isinstance(shape, Shape) or not shape.is_array():
            raise ShapeError("iota", [], f"expected an array xm.Shape, got {shape!r}")
        args.static_shape("iota", shape)
        return self.emit("iota", [], {
            "dimensions": shape.dimensions, "element_type": shape.element_type,
            "iota_dimension": args.integer("iota", iota_dimension, "iota_dimension")})

    def get_dimension_size(self, operand: XlaOp, dimension: int) -> XlaOp:
        """The size of `dimension` as an s32 scalar."""
        return self.emit("get_dimension_size", [operand],
                          {"dimension": args.integer("get_dimension_size", dimension, "dimension")})

    def dynamic_slice(self, operand: XlaOp, start_indices: Sequence[XlaOp],
                      slice_sizes: Sequence[int]) -> XlaOp:
        """A slice of static `slice_sizes` at runtime `start_indices`, each clamped to
        [0, dim - size] (SEMANTICS D4/D5)."""
        starts = _start_indices(self, "dynamic_slice", start_indices)
        return self.emit("dynamic_slice", [operand, starts],
                          {"slice_sizes": args.ints("dynamic_slice", slice_sizes, "slice_sizes")})

    def dynamic_update_slice(self, operand: XlaOp, update: XlaOp,
                             start_indices: Sequence[XlaOp]) -> XlaOp:
        """`operand` with `update` written at runtime `start_indices`, each clamped to
        [0, dim - update_dim] (SEMANTICS D4/D11)."""
        starts = _start_indices(self, "dynamic_update_slice", start_indices)
        return self.emit("dynamic_update_slice", [operand, update, starts])

    def index(self, operand: XlaOp, index: Any) -> XlaOp:
        """`operand[index]` with numpy's basic indexing: ints (negative count from the end),
        slices with any step, `...` and None."""
        operand = _array_operand(self, "index", operand)
        shape = operand.shape
        bounds, reverse, out_dims = _index_plan(shape, index)
        result = operand
        starts, limits, strides = (tuple(b[k] for b in bounds) for k in range(3))
        if starts != (0,) * shape.rank or limits != shape.dimensions or strides != (1,) * shape.rank:
            result = self.slice(result, starts, limits, strides)
        if reverse:
            result = self.rev(result, reverse)
        if tuple(out_dims) != result.shape.dimensions:
            result = self.reshape(result, out_dims)
        return result
