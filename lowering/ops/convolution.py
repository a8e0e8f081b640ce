"""Lowering of `convolution` to linalg's named convolution ops, or one linalg.generic.

Steps:

1. Convert the operands to the accumulation type (`dot.accumulation_type`:
   f16/bf16 accumulate in f32, narrower-than-operand floats in the operand's
   width; the sum is rounded once at the end).
2. Build the padded base `P`: lhs with its `lhs_dilation - 1` zero holes and
   the (low, high) padding, as copies: a strided `tensor.insert_slice` into a
   constant zero tensor, then a `tensor.extract_slice` for what negative
   padding removes. After this step only strides and rhs dilation remain.
3. Convolve `P` with the kernel into a zero-filled accumulator:
   - a 1x1 unit-stride unpadded channels-last f32 convolution is the matmul
     [N * spatial, C] x [C, O] on views of lhs and the kernel (`_pointwise`), which
     the "tiled" stage schedules as one (packed kernel, split across cores);
   - a 2-D f32-accumulated convolution without groups or lhs dilation, large
     enough for the "tiled" stage's schedule, in any other layout, with strides
     and/or kernel dilations: `_nhwc` (step 3a') makes it one `conv_2d_nhwc_hwcf`
     with those strides and dilations (the scheduled form) on a padded NHWC copy
     of lhs, and transposes the result back (lowering/ops/transpose_tiles.py); it
     pads the NHWC copy itself, so this path starts from lhs rather than P;
   - a named op where the layouts fit and every stride is 1:
     `conv_{1,2,3}d_n..c_..cf` / `conv_2d_nhwc_fhwc` / `conv_{1,2,3}d_nc.._fc..`
     without groups; `depthwise_conv_*` (channel multiplier and plain forms);
     `conv_2d_ngchw_gfchw` / `conv_2d_nhwgc_gfhwc` for other feature groups.
     The kernel is transposed to the op's layout when it differs (kernels are
     small); group dimensions are split out with `tensor.expand_shape` and
     folded back with `tensor.collapse_shape` (views, no copies).
   - otherwise (other layouts, batch groups, strides, pred) one linalg.generic
     whose indexing maps place every operand dimension directly (no
     transposes), with reduction loops over the kernel's input features and
     window. Groups get a loop of their own, shared by the split dimensions. A
     strided spatial dimension of P is split into (position, phase) so that
     `P[y * s + w]` reads `P'[y + w floordiv s, w mod s]`: no access is strided
     along a parallel loop (see `_named`). The reduction loops sit just
     outside the output's minor dimension, so the innermost loop runs along
     contiguous output memory (the loop the vectorizer takes).
4. Round to the result type if the accumulation type differs.

pred convolutions are or-of-ands on pred's byte storage (as dot_general); the
named ops multiply-add, so pred always takes the generic. Imports `dialect`
and the lowering modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ...dialect.element_types import PrimitiveType
from ...dialect.ops_conv import CONV_FIELDS, ConvDimensionNumbers, dilated
from ...dialect.shape import Shape
from ..patterns.framework import OpView, lowers, signless_type
from ..scalar import conversion
from ..scalar.arithmetic import Elem
from . import transpose_tiles
from .dot import accumulation_type, multiply_add
from .elementwise import generic

P = PrimitiveType
Role = str | tuple[str, int]  # "n", "g", "i", "j", or ("y"|"k"|"s"|"p", spatial index)


def _index(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def _value(result: ir.Value | ir.OpView | ir.Operation | ir.OpResultList) -> ir.Value:
    """The value of a single-result op builder (they return the op, its result or its
    result list)."""
    if isinstance(result, ir.Value):
        return result
    if isinstance(result, ir.OpResultList):
        return result[0]
    return result.results[0]


def _tensor_type(dims: Sequence[int], t: PrimitiveType) -> ir.RankedTensorType:
    """The storage tensor type of `dims` x `t` (i8 for pred, signless integers)."""
    return ir.RankedTensorType(signless_type(ir.RankedTensorType.get(list(dims), Elem(t).type)))


def _zero(t: PrimitiveType) -> ir.Value:
    """A zero scalar in t's storage type (arith.constant wants a Python float for floats)."""
    if t == P.PRED:
        return arith.constant(ir.IntegerType.get_signless(8), 0)
    return Elem(t).const(0 if t.is_integral else 0.0)


def _zeros(dims: Sequence[int], t: PrimitiveType) -> ir.Value:
    init = tensor.EmptyOp(list(dims), _tensor_type(dims, t).element_type).result
    return _value(linalg.fill(_zero(t), outs=[init]))


def _convert(value: ir.Value, shape: Shape, dst: PrimitiveType) -> ir.Value:
    if shape.element_type == dst:
        return value
    s, d = Elem(shape.element_type), Elem(dst)
    return generic([value], [shape], shape.with_element_type(dst), _tensor_type(shape.dimensions, dst),
                   lambda x: conversion.convert(s, d, x))


def _expand(value: ir.Value, dims: Sequence[int], dim: int, parts: tuple[int, int]) -> ir.Value:
    """`value` (of `dims`) with dimension `dim` split into `parts` (a view)."""
    return _expand_all(value, dims, {dim: parts})


def _expand_all(value: ir.Value, dims: Sequence[int], parts: dict[int, tuple[int, int]]) -> ir.Value:
    """`value` (of `dims`) with every dimension in `parts` split in two (one view)."""
    new: list[int] = []
    reassociation: list[list[int]] = []
    for i, size in enumerate(dims):
        group = list(parts.get(i, (size,)))
        reassociation.append(list(range(len(new), len(new) + len(group))))
        new.extend(group)
    element = ir.RankedTensorType(value.type).element_type
    return tensor.expand_shape(ir.RankedTensorType.get(new, element), value, reassociation, [], new)


def _collapse(value: ir.Value, dims: Sequence[int], dim: int) -> ir.Value:
    """`value` with dimensions `dim` and `dim + 1` merged (the inverse of `_expand`)."""
    new = list(dims[:dim]) + [dims[dim] * dims[dim + 1]] + list(dims[dim + 2:])
    reassociation = [[i] for i in range(dim)] + [[dim, dim + 1]] + [[i] for i in range(dim + 2, len(dims))]
    element = ir.RankedTensorType(value.type).element_type
    return tensor.collapse_shape(ir.RankedTensorType.get(new, element), value, reassociation)


def _transpose(value: ir.Value, dims: Sequence[int], permutation: Sequence[int]) -> ir.Value:
    if list(permutation) == list(range(len(dims))):
        return value
    element = ir.RankedTensorType(value.type).element_type
    init = tensor.EmptyOp([dims[p] for p in permutation], element).result
    return _value(linalg.transpose(value, outs=[init], permutation=list(permutation)))


@dataclass
class _Conv:
    """The op's attributes and shapes, with the layouts spelled as role strings:
    lhs/out use N, C and spatial digits, rhs O, I and spatial digits ("N01C", "01IO")."""

    d: ConvDimensionNumbers
    strides: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    lhs_dilation: tuple[int, ...]
    rhs_dilation: tuple[int, ...]
    groups: int  # feature_group_count
    batch_groups: int  # batch_group_count
    lhs: Shape
    rhs: Shape
    out: Shape

    @classmethod
    def of(cls, v: OpView) -> _Conv:
        a = v.attrs
        return cls(ConvDimensionNumbers(*(a[name] for name in CONV_FIELDS)), a["window_strides"],
                   a["padding"], a["lhs_dilation"], a["rhs_dilation"], a["feature_group_count"],
                   a["batch_group_count"], v.shapes["lhs"], v.shapes["rhs"], v.result_shape)

    @property
    def n(self) -> int:
        return len(self.strides)

    @staticmethod
    def _layout(rank: int, first: tuple[int, str], second: tuple[int, str],
                spatial: Sequence[int]) -> str:
        roles = [""] * rank
        roles[first[0]], roles[second[0]] = first[1], second[1]
        for k, dim in enumerate(spatial):
            roles[dim] = str(k)
        return "".join(roles)

    @property
    def lhs_layout(self) -> str:
        d = self.d
        return self._layout(self.lhs.rank, (d.input_batch_dimension, "N"), (d.input_feature_dimension, "C"),
                            d.input_spatial_dimensions)

    @property
    def rhs_layout(self) -> str:
        d = self.d
        return self._layout(self.rhs.rank, (d.kernel_output_feature_dimension, "O"),
                            (d.kernel_input_feature_dimension, "I"), d.kernel_spatial_dimensions)

    @property
    def out_layout(self) -> str:
        d = self.d
        return self._layout(self.out.rank, (d.output_batch_dimension, "N"),
                            (d.output_feature_dimension, "C"), d.output_spatial_dimensions)

    def stride(self, k: int) -> int:
        """Spatial dimension k's stride where it matters: 1 when there is one window position."""
        return self.strides[k] if self.out.dimensions[self.d.output_spatial_dimensions[k]] > 1 else 1

    def high_padding(self, k: int) -> int:
        """Spatial dimension k's high padding, plus the zeros that round P up to a multiple
        of a stride > 1 (never read by a window) so that it splits into phases."""
        low, high = self.padding[k]
        base = self.lhs.dimensions[self.d.input_spatial_dimensions[k]]
        return high + (-(low + dilated(base, self.lhs_dilation[k]) + high)) % self.stride(k)

    def padded_dims(self) -> list[int]:
        """The dimensions of P, the dilated and padded lhs."""
        dims = list(self.lhs.dimensions)
        for k, dim in enumerate(self.d.input_spatial_dimensions):
            dims[dim] = self.padding[k][0] + dilated(dims[dim], self.lhs_dilation[k]) + self.high_padding(k)
        return dims


# -- step 2: the padded base ---------------------------------------------------------------------

def _zero_block(dims: Sequence[int], t: PrimitiveType) -> ir.Value:
    """A constant zero tensor (a splat: small in the IR, zero-initialised memory)."""
    tensor_type = _tensor_type(dims, t)
    text = "(0.0, 0.0)" if t.is_complex else "0" if t.is_integral or t == P.PRED else "0.0"
    return arith.ConstantOp(tensor_type, ir.Attribute.parse(f"dense<{text}> : {tensor_type}")).result


def _padded_input(c: _Conv, lhs: ir.Value, t: PrimitiveType) -> ir.Value:
    """P: lhs with its dilation holes and padding.

    lhs is inserted with strides into a constant zero tensor large enough for the
    positive padding, then what negative padding removes is cropped; pure cropping is a
    single extract_slice. Both bufferize to copies. A zero tensor made by linalg.fill
    would be an affine loop nest, which affine-loop-fusion moves past the copy of lhs
    into it (see lowering/ops/reduce.py); a per-element padding generic would be fused into
    the convolution's loop nest and recomputed for every window position.
    """
    spatial = c.d.input_spatial_dimensions
    changed = [k for k in range(c.n)
               if c.padding[k][0] != 0 or c.high_padding(k) != 0 or c.lhs_dilation[k] != 1]
    if not changed:
        return lhs
    dims = c.padded_dims()
    full = list(c.lhs.dimensions)
    inner_offsets, crop_offsets, strides = [0] * len(full), [0] * len(full), [1] * len(full)
    for k in changed:
        low, high = c.padding[k][0], c.high_padding(k)
        dim = spatial[k]
        full[dim] = max(low, 0) + dilated(full[dim], c.lhs_dilation[k]) + max(high, 0)
        inner_offsets[dim], crop_offsets[dim] = max(low, 0), max(-low, 0)
        strides[dim] = c.lhs_dilation[k]
    if full == list(c.lhs.dimensions):  # only cropping
        result = lhs
    elif t.is_complex:
        # The Python bindings cannot build a complex constant: read lhs per element instead.
        return _gathered(c, lhs, t, dims, changed)
    else:
        result = _zero_block(full, t)
        if c.lhs.numel:
            result = tensor.InsertSliceOp(lhs, result, [], [], [], inner_offsets, list(c.lhs.dimensions),
                                          strides).result
    if full != dims:
        result = tensor.ExtractSliceOp(_tensor_type(dims, t), result, [], [], [], crop_offsets, dims,
                                       [1] * len(dims)).result
    return result


def _gathered(c: _Conv, lhs: ir.Value, t: PrimitiveType, dims: list[int], changed: list[int]) -> ir.Value:
    """P as one parallel generic reading lhs with a guarded, clamped tensor.extract (holes
    and padding read as zero; no index leaves lhs). Correct for every case, but
    affine-loop-fusion fuses it into the convolution and recomputes it per window."""
    if c.lhs.numel == 0:  # nothing to read
        return _zeros(dims, t)
    spatial_of = {dim: k for k, dim in enumerate(c.d.input_spatial_dimensions)}

    def body() -> ir.Value:
        indices: list[ir.Value] = []
        checks: list[ir.Value] = []
        for dim, size in enumerate(c.lhs.dimensions):
            q = linalg.IndexOp(dim).result
            k = spatial_of.get(dim)
            if k not in changed:  # P's dimension is lhs's
                indices.append(q)
                continue
            ld = c.lhs_dilation[k]
            q = arith.subi(q, _index(c.padding[k][0]))
            checks.append(arith.cmpi(arith.CmpIPredicate.sge, q, _index(0)))
            checks.append(arith.cmpi(arith.CmpIPredicate.slt, q, _index(dilated(size, ld))))
            if ld > 1:
                checks.append(arith.cmpi(arith.CmpIPredicate.eq, arith.remsi(q, _index(ld)), _index(0)))
                q = arith.divsi(q, _index(ld))
            indices.append(arith.minsi(arith.maxsi(q, _index(0)), _index(size - 1)))
        valid = checks[0]
        for check in checks[1:]:
            valid = arith.andi(valid, check)
        return arith.select(valid, tensor.extract(lhs, indices), _zero(t))

    return generic([], [], Shape.array(t, tuple(dims)), _tensor_type(dims, t), body)


# -- step 3a: named ops ------------------------------------------------------------------------------

# lhs layout -> {kernel layout: named op}, without groups (lhs and output share the layout).
_PLAIN: dict[str, dict[str, Callable]] = {
    "N0C": {"0IO": linalg.conv_1d_nwc_wcf},
    "NC0": {"OI0": linalg.conv_1d_ncw_fcw},
    "N01C": {"01IO": linalg.conv_2d_nhwc_hwcf, "O01I": linalg.conv_2d_nhwc_fhwc},
    "NC01": {"OI01": linalg.conv_2d_nchw_fchw},
    "N012C": {"012IO": linalg.conv_3d_ndhwc_dhwcf},
    "NC012": {"OI012": linalg.conv_3d_ncdhw_fcdhw},
}
# Depthwise, channels last: lhs layout -> (op with a channel multiplier, op without).
_DEPTHWISE_LAST = {
    "N0C": (linalg.depthwise_conv_1d_nwc_wcm, linalg.depthwise_conv_1d_nwc_wc),
    "N01C": (linalg.depthwise_conv_2d_nhwc_hwcm, linalg.depthwise_conv_2d_nhwc_hwc),
    "N012C": (linalg.depthwise_conv_3d_ndhwc_dhwcm, linalg.depthwise_conv_3d_ndhwc_dhwc),
}
# Depthwise, channels first (no channel multiplier form exists): lhs layout -> op.
_DEPTHWISE_FIRST = {"NC0": linalg.depthwise_conv_1d_ncw_cw, "NC01": linalg.depthwise_conv_2d_nchw_chw,
                    "NC012": linalg.depthwise_conv_3d_ncdhw_cdhw}
# Other feature groups (2 spatial dimensions only): lhs layout -> (op, the kernel layout its
# kernel is split from, position of the group dimension in lhs and the output).
_GROUPED = {"NC01": (linalg.conv_2d_ngchw_gfchw, "OI01", 1), "N01C": (linalg.conv_2d_nhwgc_gfhwc, "O01I", 3)}


def _kernel_as(rhs: ir.Value, c: _Conv, layout: str) -> ir.Value:
    """The kernel transposed from its own layout to `layout` (same letters)."""
    return _relayout(rhs, c.rhs.dimensions, [c.rhs_layout.index(ch) for ch in layout])


def _dims_as(c: _Conv, layout: str) -> list[int]:
    return [c.rhs.dimensions[c.rhs_layout.index(ch)] for ch in layout]


def _named(c: _Conv, padded: ir.Value, rhs: ir.Value, t: PrimitiveType) -> ir.Value | None:
    """The convolution as a named linalg op, or None when none fits.

    Only for unit strides (where there is more than one window position): the pipeline's
    affine-super-vectorize reads a strided access `x[2 * i + k]` along the loop it
    vectorizes as if it were `x[i + k]` (see the report), and which loop it picks depends
    on how affine-loop-fusion merges the nest with its neighbours. The generic path splits
    strided dimensions into phases instead, so that no access is strided.
    """
    layout = c.lhs_layout
    if (t == P.PRED or c.batch_groups != 1 or layout != c.out_layout
            or any(c.stride(k) > 1 for k in range(c.n))):
        return None
    attrs = {"strides": [1] * c.n, "dilations": list(c.rhs_dilation)}
    out_dims = list(c.out.dimensions)
    digits = "".join(str(k) for k in range(c.n))
    features = c.lhs.dimensions[c.d.input_feature_dimension]
    kernel_in = c.rhs.dimensions[c.d.kernel_input_feature_dimension]
    kernel_out = c.rhs.dimensions[c.d.kernel_output_feature_dimension]
    g = c.groups
    if g == 1 and layout in _PLAIN:
        ops = _PLAIN[layout]
        kernel_layout = c.rhs_layout if c.rhs_layout in ops else next(iter(ops))
        kernel = _kernel_as(rhs, c, kernel_layout)
        return _value(ops[kernel_layout](padded, kernel, outs=[_zeros(out_dims, t)], **attrs))
    if g == features and kernel_in == 1 and layout in _DEPTHWISE_LAST:
        # Kernel [spatial..., 1, C * M] -> [spatial..., C * M] -> [spatial..., C, M].
        multiplier = kernel_out // features
        kdims = _dims_as(c, digits + "IO")
        kernel = _collapse(_kernel_as(rhs, c, digits + "IO"), kdims, c.n)
        with_multiplier, without = _DEPTHWISE_LAST[layout]
        if multiplier == 1:
            return _value(without(padded, kernel, outs=[_zeros(out_dims, t)], **attrs))
        kernel = _expand(kernel, kdims[:c.n] + [kernel_out], c.n, (features, multiplier))
        split = out_dims[:-1] + [features, multiplier]
        result = with_multiplier(padded, kernel, outs=[_zeros(split, t)], **attrs)
        return _collapse(_value(result), split, c.n + 1)
    if g == features and kernel_in == 1 and kernel_out == features and layout in _DEPTHWISE_FIRST:
        kernel = _collapse(_kernel_as(rhs, c, "OI" + digits), _dims_as(c, "OI" + digits), 0)
        return _value(_DEPTHWISE_FIRST[layout](padded, kernel, outs=[_zeros(out_dims, t)], **attrs))
    if g > 1 and layout in _GROUPED:
        op, kernel_layout, at = _GROUPED[layout]
        group_out = kernel_out // g
        kernel = _expand(_kernel_as(rhs, c, kernel_layout), _dims_as(c, kernel_layout), 0, (g, group_out))
        grouped = _expand(padded, c.padded_dims(), at, (g, kernel_in))
        split = out_dims[:at] + [g, group_out] + out_dims[at + 1:]
        result = op(grouped, kernel, outs=[_zeros(split, t)], **attrs)
        return _collapse(_value(result), split, at)
    return None


# -- step 3a': big 2-D f32 convolutions as NHWC/HWIO convolutions -------------------------

# The flops from which the "tiled" stage schedules a conv_2d_nhwc_hwcf (its MIN_FLOPS,
# lowering/passes/schedules.py, which ops/ may not import): below, the relayout costs more
# than it saves.
SCHEDULED_MIN_FLOPS = 2 * 64**3


def _pad_nhwc(x: ir.Value, dims: list[int], padding: Sequence[tuple[int, int]],
              t: PrimitiveType) -> ir.Value:
    """x (NHWC) padded with zeros (low, high) along H and W, as `_padded_input` does: a
    copy into a constant zero block (the "tiled" stage makes the block a vectorized fill),
    then a crop for negative padding."""
    full = [dims[0], *(max(low, 0) + dims[1 + k] + max(high, 0) for k, (low, high) in enumerate(padding)),
            dims[3]]
    result = x
    if full != dims:
        offsets = [0, *(max(low, 0) for low, _ in padding), 0]
        result = tensor.InsertSliceOp(x, _zero_block(full, t), [], [], [], offsets, dims, [1] * 4).result
    padded = [dims[0], *(low + dims[1 + k] + high for k, (low, high) in enumerate(padding)), dims[3]]
    if padded != full:
        offsets = [0, *(max(-low, 0) for low, _ in padding), 0]
        result = tensor.ExtractSliceOp(_tensor_type(padded, t), result, [], [], [], offsets, padded,
                                       [1] * 4).result
    return result


def _nhwc(c: _Conv, lhs: ir.Value, rhs: ir.Value, t: PrimitiveType) -> ir.Value | None:
    """The convolution as one `conv_2d_nhwc_hwcf` with its strides and kernel dilations,
    the form the "tiled" stage schedules (register-tiled and vectorized); None when it
    does not apply.

    Other layouts are transposed to NHWC/HWIO and the result back (copies of the operands,
    small next to the convolution's work; measured, the NHWC kernel on a transposed copy
    beats the generic in place). The schedule reads strided and dilated windows itself,
    so there is one convolution whatever the strides (it was one per stride phase: as
    fast, at several times the compile time).
    """
    if (t != P.F32 or c.n != 2 or c.groups != 1 or c.batch_groups != 1
            or c.lhs_dilation != (1, 1)):
        return None
    d = c.d
    window = [c.rhs.dimensions[dim] for dim in d.kernel_spatial_dimensions]
    strides = [c.stride(k) for k in range(2)]
    dilations = [c.rhs_dilation[k] if window[k] > 1 else 1 for k in range(2)]
    if (c.lhs_layout == c.out_layout == "N01C" and c.rhs_layout == "01IO" and strides == [1, 1]
            and dilations == [1, 1]):
        return None  # the named path is this form already
    n, features = c.lhs.dimensions[d.input_batch_dimension], c.lhs.dimensions[d.input_feature_dimension]
    kernel_out = c.rhs.dimensions[d.kernel_output_feature_dimension]
    out_size = [c.out.dimensions[dim] for dim in d.output_spatial_dimensions]
    flops = 2 * n * kernel_out * features * out_size[0] * out_size[1] * window[0] * window[1]
    if flops < SCHEDULED_MIN_FLOPS:
        return None
    x_dims = [c.lhs.dimensions[dim] for dim in (d.input_batch_dimension, *d.input_spatial_dimensions,
                                                  d.input_feature_dimension)]
    x = _relayout(lhs, c.lhs.dimensions, [c.lhs_layout.index(ch) for ch in "N01C"])
    padded = _pad_nhwc(x, x_dims, c.padding, t)
    out_dims = [n, *out_size, kernel_out]
    total = _value(linalg.conv_2d_nhwc_hwcf(padded, _kernel_as(rhs, c, "01IO"), outs=[_zeros(out_dims, t)],
                                            strides=strides, dilations=dilations))
    return _relayout(total, out_dims, ["N01C".index(ch) for ch in c.out_layout])


def _pointwise(c: _Conv, lhs: ir.Value, rhs: ir.Value, t: PrimitiveType) -> ir.Value | None:
    """A 1x1 (every window extent 1), unit-stride, unpadded, ungrouped channels-last f32
    convolution as the matmul it is: [N * spatial, C] x [C, O] on views of both operands
    (collapse_shape, no copy), the result expanded back. The "tiled" stage then gives it
    the matmul schedule (B packed per core, column split), which beats the convolution
    schedule's one-pixel-row tiles on this shape; None when it does not apply."""
    d = c.d
    window = [c.rhs.dimensions[dim] for dim in d.kernel_spatial_dimensions]
    in_size = [c.lhs.dimensions[dim] for dim in d.input_spatial_dimensions]
    out_size = [c.out.dimensions[dim] for dim in d.output_spatial_dimensions]
    layout = c.lhs_layout
    # Operands converted to f32 (f16, bf16) stay convolutions: the "fused" stage would fold
    # the conversions into the matmul's body, which the schedule does not take.
    if (t != P.F32 or c.lhs.element_type != P.F32 or c.rhs.element_type != P.F32
            or c.groups != 1 or c.batch_groups != 1 or any(w != 1 for w in window)
            or in_size != out_size or any(x != 1 for x in c.lhs_dilation)
            or any(p != (0, 0) for p in c.padding) or layout != c.out_layout
            or layout[0] != "N" or layout[-1] != "C"):
        return None
    features = c.lhs.dimensions[d.input_feature_dimension]
    kernel_out = c.rhs.dimensions[d.kernel_output_feature_dimension]
    rows = 1
    for size in c.lhs.dimensions[:-1]:
        rows *= size
    if 2 * rows * features * kernel_out < SCHEDULED_MIN_FLOPS:
        return None
    rank = c.lhs.rank
    x = tensor.collapse_shape(_tensor_type([rows, features], t), lhs, [list(range(rank - 1)), [rank - 1]])
    # The kernel's unit spatial dimensions join either feature dimension: [I, O] or [O, I].
    kernel_layout = "".join(ch for ch in c.rhs_layout if ch in "IO")
    second = max(c.rhs_layout.index("I"), c.rhs_layout.index("O"))
    kernel_dims = [features, kernel_out] if kernel_layout == "IO" else [kernel_out, features]
    w = tensor.collapse_shape(_tensor_type(kernel_dims, t), rhs,
                              [list(range(second)), list(range(second, c.rhs.rank))])
    init = _zeros([rows, kernel_out], t)
    if kernel_layout == "IO":
        product = _value(linalg.matmul(x, w, outs=[init]))
    else:  # B stored [O, I]: the transposed-B generic the matmul schedule also takes
        m, n, k = (ir.AffineDimExpr.get(i) for i in range(3))
        maps = [ir.AffineMap.get(3, 0, pair) for pair in ([m, k], [n, k], [m, n])]
        op = linalg.GenericOp_([x, w], [init], maps, ["parallel", "parallel", "reduction"])
        block = op.regions[0].blocks[0]
        with ir.InsertionPoint(block):
            linalg.YieldOp([multiply_add(t)(*block.arguments)])
        product = op.results[0]
    return tensor.expand_shape(_tensor_type(list(c.out.dimensions), t), product,
                               [list(range(rank - 1)), [rank - 1]], [], list(c.out.dimensions))


def _relayout(value: ir.Value, dims: Sequence[int], permutation: Sequence[int]) -> ir.Value:
    """`value` transposed, by tiles of vectors where that applies (ops/transpose_tiles.py)."""
    tiled = transpose_tiles.tiled(value, dims, permutation)
    return tiled if tiled is not None else _transpose(value, dims, permutation)


# -- step 3b: the general linalg.generic ---------------------------------------------------------------

def _split(dims: Sequence[int], dim: int, parts: tuple[int, int]) -> list[int]:
    return list(dims[:dim]) + list(parts) + list(dims[dim + 1:])


def _generic(c: _Conv, padded: ir.Value, rhs: ir.Value, t: PrimitiveType) -> ir.Value:
    """The convolution as one linalg.generic, every operand read through an affine map with
    unit coefficients on the parallel loops (see the module docstring)."""
    count = max(c.groups, c.batch_groups)
    d = c.d
    kernel_out = rhs_out = c.rhs.dimensions[d.kernel_output_feature_dimension]
    # Loop roles: "n" batch, "g" group, "i" input feature, "j" output feature (within its
    # group), ("y", k) output position and ("k", k) window position along spatial dimension k.
    # P's spatial dimension k is ("s", k), or ("s", k) and ("p", k) when split into phases.
    lhs_roles: list[list[Role]] = [[] for _ in range(c.lhs.rank)]
    rhs_roles: list[list[Role]] = [[] for _ in range(c.rhs.rank)]
    out_roles: list[list[Role]] = [[] for _ in range(c.out.rank)]
    lhs_parts: dict[int, tuple[int, int]] = {}  # P dimension -> its split sizes
    lhs_dims = c.padded_dims()
    lhs_roles[d.input_batch_dimension] = ["n"]
    lhs_roles[d.input_feature_dimension] = ["i"]
    rhs_roles[d.kernel_input_feature_dimension] = ["i"]
    rhs_roles[d.kernel_output_feature_dimension] = ["j"]
    out_roles[d.output_batch_dimension] = ["n"]
    out_roles[d.output_feature_dimension] = ["j"]
    if count > 1:
        # The group index is a loop of its own: every split dimension is (group, within).
        at = d.input_feature_dimension if c.groups > 1 else d.input_batch_dimension
        lhs_roles[at] = ["g", lhs_roles[at][0]]
        lhs_parts[at] = (count, lhs_dims[at] // count)
        rhs_roles[d.kernel_output_feature_dimension] = ["g", "j"]
        out_roles[d.output_feature_dimension] = ["g", "j"]
        rhs_out = kernel_out // count
    for k in range(c.n):
        stride = c.stride(k)
        dim = d.input_spatial_dimensions[k]
        lhs_roles[dim] = [("s", k), ("p", k)] if stride > 1 else [("s", k)]
        if stride > 1:
            # P[.., y * stride + w, ..] is P'[.., y + w floordiv stride, w mod stride, ..].
            lhs_parts[dim] = (lhs_dims[dim] // stride, stride)
        rhs_roles[d.kernel_spatial_dimensions[k]] = [("k", k)]
        out_roles[d.output_spatial_dimensions[k]] = [("y", k)]
    if lhs_parts:
        padded = _expand_all(padded, lhs_dims, lhs_parts)
    if count > 1:
        rhs = _expand(rhs, c.rhs.dimensions, d.kernel_output_feature_dimension, (count, rhs_out))
    lhs_flat = [r for roles in lhs_roles for r in roles]
    rhs_flat = [r for roles in rhs_roles for r in roles]
    out_flat = [r for roles in out_roles for r in roles]
    expanded_out = list(c.out.dimensions)
    if count > 1:
        expanded_out = _split(expanded_out, d.output_feature_dimension, (count, rhs_out))
    reductions = [r for r in rhs_flat if r == "i" or (isinstance(r, tuple) and r[0] == "k")]
    # The reduction loops go just outside the output's minor dimension, whose loop then is
    # the innermost: it runs along contiguous output memory, the loop to vectorize.
    loops: list[Role] = out_flat[:-1] + reductions + out_flat[-1:]
    position = {role: i for i, role in enumerate(loops)}

    def dim_expr(role: Role) -> ir.AffineExpr:
        return ir.AffineDimExpr.get(position[role])

    def lhs_expr(role: Role) -> ir.AffineExpr:
        if not isinstance(role, tuple):
            return dim_expr(role)
        kind, k = role
        window = dim_expr(("k", k)) * c.rhs_dilation[k]
        stride = c.stride(k)
        if stride == 1:
            return dim_expr(("y", k)) + window
        if kind == "s":
            return dim_expr(("y", k)) + ir.AffineFloorDivExpr.get(window, ir.AffineConstantExpr.get(stride))
        return ir.AffineModExpr.get(window, ir.AffineConstantExpr.get(stride))

    count_loops = len(loops)
    maps = [ir.AffineMap.get(count_loops, 0, [lhs_expr(r) for r in lhs_flat]),
            ir.AffineMap.get(count_loops, 0, [dim_expr(r) for r in rhs_flat]),
            ir.AffineMap.get(count_loops, 0, [dim_expr(r) for r in out_flat])]
    iterators = ["reduction" if r in reductions else "parallel" for r in loops]
    op = linalg.GenericOp_([padded, rhs], [_zeros(expanded_out, t)], maps, iterators)
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        linalg.YieldOp([multiply_add(t)(*block.arguments)])
    result = op.results[0]
    if count > 1:
        result = _collapse(result, expanded_out, d.output_feature_dimension)
    return result


@lowers("convolution")
def lower_convolution(v: OpView) -> ir.Value:
    c = _Conv.of(v)
    out = c.out
    acc = accumulation_type(c.lhs.element_type, c.rhs.element_type, out.element_type)
    if out.numel == 0:
        return tensor.EmptyOp(list(out.dimensions), ir.RankedTensorType(v.result_type).element_type).result
    lhs = _convert(v.args["lhs"], c.lhs, acc)
    rhs = _convert(v.args["rhs"], c.rhs, acc)
    result = _pointwise(c, lhs, rhs, acc)
    if result is None:
        result = _nhwc(c, lhs, rhs, acc)
    if result is not None:
        return _convert(result, out.with_element_type(acc), out.element_type)
    padded = _padded_input(c, lhs, acc)
    result = _named(c, padded, rhs, acc)
    if result is None:
        result = _generic(c, padded, rhs, acc)
    return _convert(result, out.with_element_type(acc), out.element_type)
