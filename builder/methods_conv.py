"""ConvMethods: the XlaBuilder methods of the convolution family. Imports `dialect` and
`builder.recorder`.

`conv_general_dilated` emits the dialect's `convolution`; the seeds' `conv`,
`conv_with_general_padding`, `conv_with_general_dimensions` and `conv_general` are
thin forms of it. "SAME"/"VALID" padding becomes explicit (low, high) pairs
(`builder.args.padding`: XLA's MakePadding, on the lhs-dilated base when
lhs_dilation is given) and `window_reversal` a `rev` of the kernel's spatial
dimensions, so the op only sees explicit pairs. Batch norm is in
`builder.methods_batch_norm`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialect.element_types import PrimitiveType, type_of
from ..dialect.errors import ShapeError
from ..dialect.ops_conv import ConvDimensionNumbers, normalize_precision
from ..dialect.registry import lookup
from . import args
from .recorder import Recorder
from .xla_op import XlaOp

OP = "convolution"


def _spatial(operand: XlaOp, dims: Sequence[int]) -> list[int]:
    """Sizes of the listed dimensions (0 for an out-of-range one, reported by the shape rule)."""
    return [operand.shape.dimensions[d] if 0 <= d < operand.shape.rank else 0 for d in dims]


def _preferred(lhs: XlaOp, rhs: XlaOp, preferred_element_type: Any) -> PrimitiveType:
    if preferred_element_type is None:
        return lhs.shape.element_type  # only read when lhs and rhs agree (see the shape rule)
    try:
        return type_of(preferred_element_type)
    except ShapeError:
        raise ShapeError(OP, [lhs.shape, rhs.shape], f"preferred_element_type "
                         f"{preferred_element_type!r} is not an element type") from None


class ConvMethods(Recorder):
    """conv_general_dilated and the seeds' thin forms of it."""

    def conv_general_dilated(self, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                             padding: str | Sequence[tuple[int, int]],
                             lhs_dilation: Sequence[int] | None = None,
                             rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                             feature_group_count: int = 1, batch_group_count: int = 1,
                             precision_config: Any = None, preferred_element_type: Any = None,
                             window_reversal: Sequence[bool] | None = None) -> XlaOp:
        """Convolution with every option (seed 001 ConvGeneralDilated, spec#convolution).

        `padding`: (low, high) per spatial dimension (negative removes elements),
        or "SAME"/"VALID". `dimension_numbers`: a ConvDimensionNumbers, layout
        strings such as ("NHWC", "HWIO", "NHWC"), jax's (lhs_spec, rhs_spec,
        out_spec), or None for XLA's [batch, feature, spatial...] /
        [out_feature, in_feature, spatial...]. `window_reversal` (seed 001's last
        argument): one bool per spatial dimension, reversing the kernel there.
        """
        lhs = self.check_operand(OP, lhs)
        rhs = self.check_operand(OP, rhs)
        for s in (lhs.shape, rhs.shape):
            if not s.is_array():
                raise ShapeError(OP, [lhs.shape, rhs.shape], f"operands must be arrays, got {s}")
        num_spatial = max(lhs.shape.rank - 2, 0)
        dnums = ConvDimensionNumbers.of(dimension_numbers, num_spatial)
        strides = args.ints(OP, window_strides, "window_strides")
        n = len(strides)
        lhs_dil = (1,) * n if lhs_dilation is None else args.ints(OP, lhs_dilation, "lhs_dilation")
        rhs_dil = (1,) * n if rhs_dilation is None else args.ints(OP, rhs_dilation, "rhs_dilation")
        pads = args.padding(OP, padding, "padding", _spatial(lhs, dnums.input_spatial_dimensions),
                        _spatial(rhs, dnums.kernel_spatial_dimensions), strides, lhs_dil, rhs_dil)
        attrs = {
            "window_strides": strides, "padding": pads, "lhs_dilation": lhs_dil, "rhs_dilation": rhs_dil,
            **dnums.as_dict(),
            "feature_group_count": args.integer(OP, feature_group_count, "feature_group_count"),
            "batch_group_count": args.integer(OP, batch_group_count, "batch_group_count"),
            "precision_config": normalize_precision(precision_config),
            "preferred_element_type": _preferred(lhs, rhs, preferred_element_type),
            "preferred_given": preferred_element_type is not None,
        }
        if window_reversal is not None:
            flags = list(window_reversal)
            if len(flags) != dnums.num_spatial or not all(isinstance(f, (bool, np.bool_)) for f in flags):
                raise ShapeError(OP, [lhs.shape, rhs.shape], f"window_reversal {flags} needs one bool per "
                                 f"spatial dimension ({dnums.num_spatial})")
            flipped = [d for d, f in zip(dnums.kernel_spatial_dimensions, flags) if f]
            if flipped:
                lookup(OP).infer(lhs.shape, rhs.shape, **attrs)  # report a bad convolution as such
                # Reversing the lhs window (StableHLO) or the kernel gives the same sums.
                rhs = self.rev(rhs, flipped)
        return self.emit(OP, [lhs, rhs], attrs)

    def conv(self, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
             padding: str | Sequence[tuple[int, int]], feature_group_count: int = 1,
             batch_group_count: int = 1, precision_config: Any = None,
             preferred_element_type: Any = None) -> XlaOp:
        """Seed 001's Conv: XLA's default dimension numbers, no dilation; padding "SAME"/"VALID"
        (explicit pairs are accepted as well)."""
        return self.conv_general_dilated(lhs, rhs, window_strides, padding, None, None, None,
                                    feature_group_count, batch_group_count, precision_config,
                                    preferred_element_type)

    def conv_with_general_padding(self, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                                  padding: str | Sequence[tuple[int, int]], feature_group_count: int = 1,
                                  batch_group_count: int = 1, precision_config: Any = None,
                                  preferred_element_type: Any = None, *,
                                  lhs_dilation: Sequence[int] | None = None,
                                  rhs_dilation: Sequence[int] | None = None) -> XlaOp:
        """Seed 001's ConvWithGeneralPadding: explicit (low, high) pairs, default dimension
        numbers. Seed 003's form also took dilations; here they are keyword-only, since the
        current seed puts feature_group_count in that position."""
        return self.conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                    None, feature_group_count, batch_group_count, precision_config,
                                    preferred_element_type)

    def conv_with_general_dimensions(self, lhs: XlaOp, rhs: XlaOp,
                                     window_strides: Sequence[int], padding: str | Sequence[tuple[int, int]],
                                     dimension_numbers: Any, feature_group_count: int = 1,
                                     batch_group_count: int = 1, precision_config: Any = None,
                                     preferred_element_type: Any = None) -> XlaOp:
        """Seed 001's ConvWithGeneralDimensions: "SAME"/"VALID" padding, explicit dimension numbers."""
        return self.conv_general_dilated(lhs, rhs, window_strides, padding, None, None,
                                    dimension_numbers, feature_group_count, batch_group_count,
                                    precision_config, preferred_element_type)

    def conv_general(self, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int],
                     padding: str | Sequence[tuple[int, int]], dimension_numbers: Any,
                     feature_group_count: int = 1, batch_group_count: int = 1,
                     precision_config: Any = None, preferred_element_type: Any = None) -> XlaOp:
        """Seed 001's ConvGeneral: explicit padding pairs and dimension numbers, no dilation."""
        return self.conv_general_dilated(lhs, rhs, window_strides, padding, None, None,
                                    dimension_numbers, feature_group_count, batch_group_count,
                                    precision_config, preferred_element_type)
