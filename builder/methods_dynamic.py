"""Bounded dynamic shapes (issue #16): set_dimension_size, remove_dynamic_dimension_size,
dynamic_reshape, and what every other op does with a dynamic operand.

The mechanism (docs/architecture.md, "Bounded dynamic shapes"): the IR is static. A
dynamic value is a `DynamicView`, an XlaOp whose Shape has dynamic dimensions
(``f32[<=10]``) over a recorded static op, the padded array; the builder records beside it
one s32 scalar XlaOp per dynamic dimension, its runtime size. Views never become operands
of recorded ops, so the graph (what is emitted, what tests/reference.py interprets) is
static throughout; only a multi-result op's results may carry dynamic shapes.
`Recorder.emit` hands any op with a dynamic operand to `_emit_dynamic`, which emits the op
on the padded arrays and returns a view where XLA's shape inference makes the result
dynamic. Ops that must not see the padding get it masked first by ordinary ops
(iota < size, select): a reduction with its init value, a contraction with zero. An op not
handled here raises ShapeError, never a silent answer.
Imports `dialect`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialect.element_types import PrimitiveType
from ..dialect.errors import ShapeError
from ..dialect.ops_dynamic import check_dimension
from ..dialect.registry import OpDef, lookup
from ..dialect.shape import Shape
from . import args
from .computation import XlaComputation
from .dynamic_computation import DynamicResultComputation
from .recorder import Recorder
from .xla_op import XlaOp

Sizes = tuple[XlaOp | None, ...]  # per dimension: the runtime size, None where static

# Ops computed element by element on the padded arrays: the padding holds garbage the
# consumers mask, the result has the operands' dynamic dimensions.
_ELEMENTWISE_FAMILIES = frozenset({"unary", "binary", "compare"})
_ELEMENTWISE_OPS = frozenset({"select", "clamp", "convert", "reduce_precision", "map", "bitcast_convert"})


class DynamicMethods(Recorder):
    """Bounded dynamism: the runtime sizes of dynamic dimensions, tracked beside the values."""

    # -- the ops ---------------------------------------------------------------------------------

    def set_dimension_size(self, operand: XlaOp, val: XlaOp, dimension: int) -> XlaOp:
        """`operand` with dimension `dimension` dynamic, of runtime size `val` (an s32 scalar);
        its size stays the bound. Reductions and contractions ignore the padding beyond `val`
        (spec#set_dimension_size); a size outside [0, bound] is clamped."""
        name = "set_dimension_size"
        operand = self.check_operand(name, operand)
        val = self.as_op(val) if not isinstance(val, XlaOp) else self.check_operand(name, val)
        dimension = args.integer(name, dimension, "dimension")
        check_dimension(name, operand.shape, dimension)
        bound = operand.shape.dimensions[dimension]
        known = _constant_value(val)
        if known is not None and not 0 <= known <= bound:
            raise ShapeError(name, [operand.shape, val.shape], f"size {known} is outside [0, {bound}], "
                             f"the bound of dimension {dimension}")
        # Checked by the shape rule before the clamp could reject a wrong type less clearly.
        lookup(name).infer(operand.shape.with_dynamic_dimensions(None), val.shape, dimension=dimension)
        size = val if known is not None else self.clamp(0, val, bound)
        padded = self.emit(name, [self._static(operand), val], {"dimension": dimension})
        sizes = list(self._sizes(operand))
        sizes[dimension] = size
        return self._make_dynamic(padded, tuple(sizes))

    def remove_dynamic_dimension_size(self, operand: XlaOp, dimension: int) -> XlaOp:
        """`operand` with dimension `dimension` static again, of its bound; the padding holds
        what the padded array held there (XLA's RemoveDynamicDimension)."""
        name = "remove_dynamic_dimension_size"
        operand = self.check_operand(name, operand)
        dimension = args.integer(name, dimension, "dimension")
        check_dimension(name, operand.shape, dimension)
        sizes = list(self._sizes(operand))
        sizes[dimension] = None
        return self._make_dynamic(self._static(operand), tuple(sizes))

    def dynamic_reshape(self, operand: XlaOp, dim_sizes: Sequence[XlaOp],
                        new_size_bounds: Sequence[int], dims_are_dynamic: Sequence[bool]) -> XlaOp:
        """Reshape of the operand's valid region to the runtime `dim_sizes` (s32 scalars), in
        row-major order, padded with zeros to `new_size_bounds`; dimension i is dynamic where
        `dims_are_dynamic[i]` (spec#dynamic_reshape). A static dimension's size must be its
        bound; the sizes' product must be the operand's element count (else undefined, as XLA)."""
        name = "dynamic_reshape"
        operand = self.check_operand(name, operand)
        if isinstance(dim_sizes, XlaOp):
            raise ShapeError(name, [], "dim_sizes must be a list of s32 scalar XlaOps, one per dimension")
        sizes = [self.check_operand(name, s) for s in dim_sizes]
        bounds = args.ints(name, new_size_bounds, "new_size_bounds")
        flags = [args.flag(name, f, "dims_are_dynamic") for f in dims_are_dynamic]
        if not len(sizes) == len(bounds) == len(flags):
            raise ShapeError(name, [operand.shape], f"dim_sizes ({len(sizes)}), new_size_bounds "
                             f"({len(bounds)}) and dims_are_dynamic ({len(flags)}) must have one "
                             "entry per output dimension")
        for i, (size, bound, dynamic) in enumerate(zip(sizes, bounds, flags)):
            known = _constant_value(size)
            if known is not None and not (0 <= known <= bound if dynamic else known == bound):
                raise ShapeError(name, [operand.shape, size.shape], f"dim_sizes[{i}] is {known}, "
                                 f"but dimension {i} is {'<=' if dynamic else ''}{bound}")
        input_sizes = [s if s is not None else self.constant(np.int32(d))
                       for s, d in zip(self._sizes(operand), operand.shape.dimensions)]
        lookup(name).infer(operand.shape.with_dynamic_dimensions(None), tuple(s.shape for s in input_sizes),
                           tuple(s.shape for s in sizes), new_size_bounds=bounds)
        # A static dimension is its bound; a dynamic one's size is kept in [0, bound], as
        # set_dimension_size keeps it, so masks, slices and get_dimension_size agree.
        sizes = [(s if _constant_value(s) is not None else self.clamp(0, s, b)) if f
                 else self.constant(np.int32(b)) for s, b, f in zip(sizes, bounds, flags)]
        out = self.emit(name, [self._static(operand), input_sizes, sizes],
                        {"new_size_bounds": bounds})
        return self._make_dynamic(out, tuple(s if f else None for s, f in zip(sizes, flags)))

    def build(self, root: XlaOp | Sequence[XlaOp] | None = None) -> XlaComputation:
        """As Recorder.build; a root with dynamic dimensions returns the padded array sliced
        to its runtime sizes when called, as XLA returns a dynamic literal."""
        if root is None and self.ops:
            root = self.ops[-1]
        if isinstance(root, (list, tuple)):
            root = self.tuple(list(root))
        if isinstance(root, XlaOp) and root.builder is self and root.shape.is_dynamic():
            sizes = [s for s in self._leaf_sizes(root) if s is not None]
            packed = self.tuple([self._static(root), *sizes])
            return DynamicResultComputation.of(self, packed, root.shape)
        return super().build(root)

    # -- what other ops do with dynamic operands ------------------------------------------------

    def _emit_dynamic(self, opdef: OpDef, operands: Sequence[Any], attrs: dict[str, Any]) -> XlaOp:
        name = opdef.name
        statics = [tuple(self._static(o) for o in x) if isinstance(x, tuple) else self._static(x)
                   for x in operands]
        if opdef.family in _ELEMENTWISE_FAMILIES or name in _ELEMENTWISE_OPS:
            return self._elementwise(opdef, operands, statics, attrs)
        handler = getattr(self, f"_dynamic_{name}", None)
        if handler is None:
            raise _not_yet(name, operands)
        return handler(operands, statics, attrs)

    def _elementwise(self, opdef: OpDef, operands: Sequence[XlaOp], statics: list[Any],
                     attrs: dict[str, Any]) -> XlaOp:
        result = self.emit(opdef, statics, attrs)
        flat = [o for x in operands for o in (x if isinstance(x, tuple) else (x,))]  # map's
        sizes: list[XlaOp | None] = [None] * result.shape.rank
        for operand in flat:
            if operand.shape.rank != result.shape.rank:
                if operand.shape.is_dynamic():  # a bitcast_convert changing the width
                    raise _not_yet(opdef.name, operands)
                continue  # a scalar operand (clamp's bounds, a broadcast pred)
            for d, size in enumerate(self._sizes(operand)):
                sizes[d] = _agree(opdef.name, operands, d, sizes[d], size)
        return self._make_dynamic(result, tuple(sizes))

    def _dynamic_get_dimension_size(self, operands: Sequence[XlaOp], statics: list[Any],
                                    attrs: dict[str, Any]) -> XlaOp:
        (operand,) = operands
        dimension = attrs["dimension"]
        if 0 <= dimension < operand.shape.rank and operand.shape.is_dynamic_dimension(dimension):
            return self._sizes(operand)[dimension]
        return self.emit("get_dimension_size", statics, attrs)

    def _dynamic_tuple(self, operands: Sequence[Any], statics: list[Any],
                       attrs: dict[str, Any]) -> XlaOp:
        (elements,) = operands
        result = self.emit("tuple", statics, attrs)
        view = DynamicView(self, Shape.tuple([e.shape for e in elements]), result)
        self._dynamic_table()[view.uid] = [self._entry(e) for e in elements]
        self.ops.append(view)
        return view

    def _dynamic_get_tuple_element(self, operands: Sequence[XlaOp], statics: list[Any],
                                   attrs: dict[str, Any]) -> XlaOp:
        (operand,) = operands
        result = self.emit("get_tuple_element", statics, attrs)
        element = operand.shape.tuple_shapes[attrs["index"]]
        if not element.is_dynamic():
            return result
        entry = self._entry(operand)[attrs["index"]]
        if element.is_array():
            return self._make_dynamic(result, entry)
        view = DynamicView(self, element, result)  # a nested tuple
        self._dynamic_table()[view.uid] = entry
        self.ops.append(view)
        return view

    def _dynamic_concatenate(self, operands: Sequence[Any], statics: list[Any],
                             attrs: dict[str, Any]) -> XlaOp:
        (inputs,) = operands
        dimension = attrs["dimension"]
        result = self.emit("concatenate", statics, attrs)
        sizes: list[XlaOp | None] = [None] * result.shape.rank
        for x in inputs:
            for d, size in enumerate(self._sizes(x)):
                if d == dimension and size is not None:
                    raise ShapeError("concatenate", _shapes(operands), f"concatenating along dynamic "
                                     f"dimension {d} is not supported yet")
                sizes[d] = _agree("concatenate", operands, d, sizes[d], size)
        return self._make_dynamic(result, tuple(sizes))

    def _dynamic_reverse(self, operands: Sequence[XlaOp], statics: list[Any],
                         attrs: dict[str, Any]) -> XlaOp:
        (operand,) = operands
        sizes = self._sizes(operand)
        if any(sizes[d] is not None for d in attrs["dimensions"]):
            raise ShapeError("reverse", [operand.shape], "reversing a dynamic dimension is not "
                             "supported yet (the valid region would move to the end)")
        return self._make_dynamic(self.emit("reverse", statics, attrs), sizes)

    def _dynamic_reshape(self, operands: Sequence[XlaOp], statics: list[Any],
                         attrs: dict[str, Any]) -> XlaOp:
        """Only a dynamic major dimension, whose valid region is a prefix of the row-major
        array: it stays a prefix if the new minor dimensions divide the old ones
        ([<=10,6] -> [<=60], [<=20,3], [<=10,2,3]); anything else needs dynamic_reshape."""
        (operand,) = operands
        sizes = self._sizes(operand)
        new_sizes = attrs["new_sizes"]
        old_minor = int(np.prod(operand.shape.dimensions[1:], dtype=np.int64))
        new_minor = int(np.prod(new_sizes[1:], dtype=np.int64))
        if any(s is not None for s in sizes[1:]) or not new_sizes or new_minor == 0 or \
                old_minor % new_minor:
            raise ShapeError("reshape", [operand.shape], f"reshape of {operand.shape} to "
                             f"{list(new_sizes)} with dynamic dimensions is not supported; only a "
                             "dynamic major dimension whose new minor dimensions divide the old "
                             "ones is; use dynamic_reshape")
        result = self.emit("reshape", statics, attrs)
        factor = old_minor // new_minor
        size = sizes[0] if factor == 1 else self.mul(sizes[0], self.constant(np.int32(factor)))
        return self._make_dynamic(result, (size, *(None,) * (len(new_sizes) - 1)))

    def _dynamic_broadcast_in_dim(self, operands: Sequence[XlaOp], statics: list[Any],
                                  attrs: dict[str, Any]) -> XlaOp:
        (operand,) = operands
        result = self.emit("broadcast_in_dim", statics, attrs)
        sizes: list[XlaOp | None] = [None] * result.shape.rank
        for i, (size, out) in enumerate(zip(self._sizes(operand), attrs["broadcast_dimensions"])):
            if size is not None:
                if operand.shape.dimensions[i] != result.shape.dimensions[out]:
                    raise ShapeError("broadcast_in_dim", [operand.shape], f"dynamic dimension {i} "
                                     "cannot be expanded (a size-1 bound broadcast); "
                                     "remove_dynamic_dimension_size first")
                sizes[out] = size
        return self._make_dynamic(result, tuple(sizes))

    def _dynamic_transpose(self, operands: Sequence[XlaOp], statics: list[Any],
                           attrs: dict[str, Any]) -> XlaOp:
        (operand,) = operands
        result = self.emit("transpose", statics, attrs)
        sizes = self._sizes(operand)
        return self._make_dynamic(result, tuple(sizes[p] for p in attrs["permutation"]))

    def _dynamic_slice(self, operands: Sequence[XlaOp], statics: list[Any],
                       attrs: dict[str, Any]) -> XlaOp:
        (operand,) = operands
        result = self.emit("slice", statics, attrs)
        sizes = self._sizes(operand)
        for d, size in enumerate(sizes):
            whole = (attrs["start_indices"][d], attrs["limit_indices"][d], attrs["strides"][d]) == (
                0, operand.shape.dimensions[d], 1)
            if size is not None and not whole:
                raise ShapeError("slice", [operand.shape], f"slicing dynamic dimension {d} is not "
                                 "supported yet (only its whole bound, stride 1)")
        return self._make_dynamic(result, sizes)

    def _dynamic_reduce(self, operands: Sequence[Any], statics: list[Any],
                        attrs: dict[str, Any]) -> XlaOp:
        inputs, inits = operands
        reduced = set(attrs["dimensions"])
        sizes = self._common_sizes("reduce", inputs)
        masked_dims = {d: s for d, s in enumerate(sizes) if s is not None and d in reduced}
        masked = tuple(self._mask(x, masked_dims, init) for x, init in zip(statics[0], statics[1]))
        result = self.emit("reduce", [masked, statics[1]], attrs)
        return self._dynamic_results(result, tuple(s for d, s in enumerate(sizes) if d not in reduced))

    def _dynamic_sort(self, operands: Sequence[Any], statics: list[Any],
                      attrs: dict[str, Any]) -> XlaOp:
        """Rows along a static dimension sort independently: the others stay dynamic."""
        (inputs,) = operands
        sizes = self._common_sizes("sort", inputs)
        if sizes[attrs["dimension"]] is not None:
            raise ShapeError("sort", _shapes(operands), f"sorting along dynamic dimension "
                             f"{attrs['dimension']} is not supported yet (the padding would sort in)")
        return self._dynamic_results(self.emit("sort", statics, attrs), sizes)

    def _dynamic_pad(self, operands: Sequence[XlaOp], statics: list[Any],
                     attrs: dict[str, Any]) -> XlaOp:
        operand = operands[0]
        sizes = self._sizes(operand)
        configs = zip(attrs["edge_padding_low"], attrs["edge_padding_high"], attrs["interior_padding"])
        for d, (size, config) in enumerate(zip(sizes, configs)):
            if size is not None and config != (0, 0, 0):
                raise ShapeError("pad", _shapes(operands), f"padding dynamic dimension {d} is not "
                                 "supported yet")
        return self._make_dynamic(self.emit("pad", statics, attrs), sizes)

    def _dynamic_convolution(self, operands: Sequence[XlaOp], statics: list[Any],
                             attrs: dict[str, Any]) -> XlaOp:
        """Only a dynamic batch dimension of the input: batch elements convolve independently."""
        lhs, rhs = operands
        sizes = self._sizes(lhs)
        batch = attrs["input_batch_dimension"]
        if rhs.shape.is_dynamic() or any(s is not None for d, s in enumerate(sizes) if d != batch) \
                or attrs["batch_group_count"] != 1:
            raise ShapeError("convolution", _shapes(operands), "a convolution takes a dynamic "
                             "dimension only as the input's batch dimension (batch_group_count 1)")
        result = self.emit("convolution", statics, attrs)
        out = [None] * result.shape.rank
        out[attrs["output_batch_dimension"]] = sizes[batch]
        return self._make_dynamic(result, tuple(out))

    def _dynamic_dot_general(self, operands: Sequence[XlaOp], statics: list[Any],
                             attrs: dict[str, Any]) -> XlaOp:
        lhs, rhs = operands
        lhs_sizes, rhs_sizes = self._sizes(lhs), self._sizes(rhs)
        lhs_masks: dict[int, XlaOp] = {}
        rhs_masks: dict[int, XlaOp] = {}
        # A dynamic contracting dimension: both sides zero beyond the size, so the padding of
        # neither (not even inf/nan) reaches the sum.
        for lc, rc in zip(attrs["lhs_contracting_dimensions"], attrs["rhs_contracting_dimensions"]):
            size = _agree("dot_general", operands, lc, lhs_sizes[lc], rhs_sizes[rc])
            if size is not None:
                lhs_masks[lc] = rhs_masks[rc] = size
        lhs_static, rhs_static = statics
        zero_l = self.constant(np.zeros((), lhs.shape.dtype))
        zero_r = self.constant(np.zeros((), rhs.shape.dtype))
        result = self.emit("dot_general", [self._mask(lhs_static, lhs_masks, zero_l),
                                           self._mask(rhs_static, rhs_masks, zero_r)], attrs)
        lb, rb = attrs["lhs_batch_dimensions"], attrs["rhs_batch_dimensions"]
        out = [_agree("dot_general", operands, a, lhs_sizes[a], rhs_sizes[b]) for a, b in zip(lb, rb)]
        contracted_l = set(lb) | set(attrs["lhs_contracting_dimensions"])
        contracted_r = set(rb) | set(attrs["rhs_contracting_dimensions"])
        out += [s for d, s in enumerate(lhs_sizes) if d not in contracted_l]
        out += [s for d, s in enumerate(rhs_sizes) if d not in contracted_r]
        return self._make_dynamic(result, tuple(out))

    # -- the bookkeeping -------------------------------------------------------------------------

    def _common_sizes(self, op: str, inputs: Sequence[XlaOp]) -> list[XlaOp | None]:
        """The sizes of same-shaped operands (a variadic op's), which must agree."""
        sizes: list[XlaOp | None] = [None] * inputs[0].shape.rank
        for x in inputs:
            for d, size in enumerate(self._sizes(x)):
                if d < len(sizes):
                    sizes[d] = _agree(op, list(inputs), d, sizes[d], size)
        return sizes

    def _dynamic_results(self, op: XlaOp, sizes: Sizes) -> XlaOp:
        """A multi-result op whose results all have `sizes`: their shapes are made dynamic in
        place, as `results()` makes them XlaOps from the op's tuple shape."""
        if any(s is not None for s in sizes):
            op.shape = Shape.tuple([_dynamic_shape(s, sizes) for s in op.shape.tuple_shapes])
            self._dynamic_table()[op.uid] = [tuple(sizes)] * len(op.shape.tuple_shapes)
        return op

    def _dynamic_table(self) -> dict[int, Any]:
        """uid -> Sizes of a dynamic op; for a multi-result op, one Sizes per result."""
        return self.__dict__.setdefault("_dynamic_sizes", {})

    def _sizes(self, op: XlaOp) -> Sizes:
        if not op.shape.is_array() or not op.shape.is_dynamic():
            return (None,) * (op.shape.rank if op.shape.is_array() else 0)
        table = self._dynamic_table()
        if op.uid in table:
            return table[op.uid]
        if op.source is not None and op.source.uid in table:
            return table[op.source.uid][op.index]
        raise ShapeError("dynamic", [op.shape], f"{op!r} has a dynamic dimension of no known "
                         "runtime size (a parameter with a dynamic shape is not supported yet; "
                         "pass the padded array and its size, then set_dimension_size)")

    def _entry(self, op: XlaOp) -> Any:
        """What the table holds for `op`: Sizes for an array, a list of entries for a tuple;
        None for a static value."""
        if not op.shape.is_dynamic():
            return None
        if op.shape.is_array():
            return self._sizes(op)
        return self._dynamic_table()[op.uid]

    def _leaf_sizes(self, op: XlaOp) -> list[XlaOp | None]:
        """The sizes of every array leaf of `op`, depth-first: what the entry returns."""
        def walk(shape: Shape, entry: Any) -> list[XlaOp | None]:
            if shape.is_tuple():
                return [s for i, e in enumerate(shape.tuple_shapes)
                        for s in walk(e, None if entry is None else entry[i])]
            if shape.is_token():
                return []
            return list(entry) if entry is not None else [None] * shape.rank

        return walk(op.shape, self._entry(op))

    def _make_dynamic(self, op: XlaOp, sizes: Sizes) -> XlaOp:
        """A view of `op` (recorded, static) with the dimensions that have a size dynamic."""
        if not any(s is not None for s in sizes):
            return op
        view = DynamicView(self, _dynamic_shape(op.shape, sizes), op)
        self._dynamic_table()[view.uid] = sizes
        self.ops.append(view)  # build() without a root returns the last op: this one
        return view

    def _static(self, op: XlaOp) -> XlaOp:
        """The padded array: the recorded static op behind `op`."""
        if not op.shape.is_dynamic():
            return op
        if isinstance(op, DynamicView):
            return op.padded
        if op.source is None:
            raise ShapeError("dynamic", [op.shape], f"{op!r} has a dynamic dimension of no known "
                             "runtime size")
        # A result of a multi-result op with dynamic dimensions: the same result, static.
        views = self.__dict__.setdefault("_static_results", {})
        if op.uid not in views:
            views[op.uid] = XlaOp(self, _static_shape(op.shape), source=op.source, index=op.index,
                                  location=op.location)
        return views[op.uid]

    def _mask(self, x: XlaOp, sizes: dict[int, XlaOp], fill: XlaOp) -> XlaOp:
        """`x` (static) with `fill` (a scalar) wherever index d >= sizes[d]."""
        if not sizes:
            return x
        bounds = x.shape.dimensions
        inside = None
        for d, size in sizes.items():
            iota = self.iota(Shape.array(PrimitiveType.S32, bounds), d)
            below = self.lt(iota, self.broadcast_in_dim(size, bounds, []))
            inside = below if inside is None else self.and_(inside, below)
        return self.select(inside, x, self.broadcast_in_dim(fill, bounds, []))


class DynamicView(XlaOp):
    """A value with dynamic dimensions: the recorded static op `padded` seen with a dynamic
    shape. The builder replaces it by `padded` wherever it is an operand; it is never
    emitted itself."""

    __slots__ = ("padded",)

    def __init__(self, builder: Any, shape: Shape, padded: XlaOp) -> None:
        super().__init__(builder, shape, location=padded.location)
        self.padded = padded

    def __repr__(self) -> str:
        what = padded.opdef.name if (padded := self.padded).opdef else "parameter"
        return f"XlaOp({what}: {self.shape})"


def _dynamic_shape(shape: Shape, sizes: Sizes) -> Shape:
    return shape.with_dynamic_dimensions([s is not None for s in sizes])


def _static_shape(shape: Shape) -> Shape:
    if shape.is_tuple():
        return Shape.tuple([_static_shape(s) for s in shape.tuple_shapes])
    return shape.with_dynamic_dimensions(None) if shape.is_array() else shape


def _constant_value(op: XlaOp) -> int | None:
    """The value of a scalar integer constant, None for anything computed at run time."""
    if op.opdef is not None and op.opdef.name == "constant" and op.shape.is_array() and \
            op.shape.rank == 0 and op.shape.element_type.is_integral:
        return int(op.attrs["value"])
    return None


def _agree(op: str, operands: Sequence[Any], d: int, a: XlaOp | None, b: XlaOp | None) -> XlaOp | None:
    """The size of a dimension two operands share: either one's (they must agree at run time,
    as in XLA); constants that differ are an error now."""
    if a is None or b is None or a is b:
        return a if a is not None else b
    ka, kb = _constant_value(a), _constant_value(b)
    if ka is not None and kb is not None and ka != kb:
        raise ShapeError(op, _shapes(operands), f"the operands' dynamic sizes of dimension {d} "
                         f"differ ({ka} and {kb})")
    return a


def _shapes(operands: Sequence[Any]) -> list[Shape]:
    flat: list[Shape] = []
    for o in operands:
        flat.extend(x.shape for x in (o if isinstance(o, tuple) else (o,)))
    return flat


def _not_yet(name: str, operands: Sequence[Any]) -> ShapeError:
    shapes = _shapes(operands)
    dynamic = next(str(s) for s in shapes if s.is_dynamic())
    return ShapeError(name, shapes, f"{name} does not accept a dynamic dimension yet (operand "
                      f"{dynamic}); remove_dynamic_dimension_size first to use the padded array")
