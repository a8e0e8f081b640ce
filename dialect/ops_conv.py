"""Ops of the conv family: `convolution` (StableHLO's name; every builder form emits it).

Semantics (seeds 001/004 ConvGeneralDilated, SEMANTICS.md 5.G, StableHLO's
convolution for what the seeds leave open):

- `lhs` holds the base area: a batch dimension, a feature dimension and n
  spatial dimensions, in the positions `ConvDimensionNumbers` gives; `rhs`
  holds the kernel (output-feature, input-feature and n spatial dimensions);
  the result has a batch, a feature and n spatial dimensions. XLA's default
  (no dimension numbers) is lhs/result `[batch, feature, spatial...]` and rhs
  `[output_feature, input_feature, spatial...]` (seed 000's constants).
- The base area is dilated first (`lhs_dilation - 1` zero holes between
  elements: the transposed convolution), then padded by `padding`'s (low,
  high) zeros per spatial dimension; negative padding removes elements
  (from the dilated base). The window is dilated by `rhs_dilation` (atrous)
  and moves by `window_strides`; the result has one element per valid
  window position: `(padded - dilated_window) // stride + 1`, or 0.
- `feature_group_count` G splits the input features and the kernel's output
  features into G consecutive groups; group g of the output convolves group
  g of the input (the kernel's input-feature size is C / G). Depthwise is
  G == C. `batch_group_count` B splits the lhs batch into B consecutive
  groups instead and pairs group g with the g-th block of output features;
  the output batch is N / B (the weight-gradient form). At most one of the
  two may exceed 1.
- "SAME"/"VALID" padding and `window_reversal` are builder sugar; the op
  only sees explicit (low, high) pairs and an unreversed kernel.
- Element types follow dot_general (`ops_dot`): lhs and rhs agree unless
  `preferred_element_type` is given, which must be a widening XLA accepts.
  pred convolutions are or-of-ands, integer ones wrap, complex ones do not
  conjugate. `precision_config` is recorded, with no numeric effect on CPU.

Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from . import ops_dot
from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import ELEMENT_TYPE, I64_ARRAY, INT, PAIRS, STR, OpDef, Operand, define
from .shape import Shape

OP = "convolution"


def _int(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise ShapeError("ConvDimensionNumbers", [], f"{what} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ShapeError("ConvDimensionNumbers", [], f"{what} must be an int, got {value!r}") from None


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ShapeError("ConvDimensionNumbers", [], f"{what} must be a sequence of ints, got {value!r}")
    return tuple(_int(v, what) for v in value)


def _as_tuple(value: Any) -> tuple[Any, ...] | None:
    try:
        return tuple(value)
    except TypeError:
        return None


@dataclass(frozen=True)
class ConvDimensionNumbers:
    """Where the batch, feature and spatial dimensions of lhs, rhs and the result are.

    Field names as in XLA's ConvolutionDimensionNumbers proto. Spatial
    dimension k of lhs, of the kernel and of the result correspond to each
    other. Stored as Python ints / tuples of ints: hashable, equal by value.
    """

    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple[int, ...]
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple[int, ...]
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple[int, ...]

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            norm = _ints(value, f.name) if f.name.endswith("spatial_dimensions") else _int(value, f.name)
            object.__setattr__(self, f.name, norm)

    @property
    def num_spatial(self) -> int:
        return len(self.input_spatial_dimensions)

    @classmethod
    def default(cls, num_spatial: int) -> ConvDimensionNumbers:
        """XLA's default: lhs/result [batch, feature, spatial...], rhs [out, in, spatial...]."""
        spatial = tuple(range(2, 2 + num_spatial))
        return cls(0, 1, spatial, 1, 0, spatial, 0, 1, spatial)

    @classmethod
    def from_layouts(cls, lhs: str, rhs: str, out: str) -> ConvDimensionNumbers:
        """From layout strings as jax writes them: `("NHWC", "HWIO", "NHWC")`.

        lhs and out use N (batch) and C (feature), rhs O (output feature) and I
        (input feature); every other letter is a spatial dimension, the same
        letters in all three. Spatial dimension k is the k-th such letter of
        the rhs string (jax's `conv_general_permutations`).
        """
        specs = (lhs, rhs, out)
        pairs = (("N", "C"), ("O", "I"), ("N", "C"))
        for spec, (a, b) in zip(specs, pairs):
            if not isinstance(spec, str):
                raise ShapeError("ConvDimensionNumbers", [], f"layouts must be strings, got {spec!r}")
            if spec.count(a) != 1 or spec.count(b) != 1:
                raise ShapeError("ConvDimensionNumbers", [], f"layout {spec!r} must contain {a} and "
                                 f"{b} exactly once")
            if len(set(spec)) != len(spec):
                raise ShapeError("ConvDimensionNumbers", [], f"layout {spec!r} repeats a letter")
        spatial_sets = [set(spec) - set(pair) for spec, pair in zip(specs, pairs)]
        if not spatial_sets[0] == spatial_sets[1] == spatial_sets[2]:
            raise ShapeError("ConvDimensionNumbers", [], f"layouts {specs} must name the same "
                             "spatial dimensions")
        order = [c for c in rhs if c not in "OI"]
        lhs_sp = tuple(lhs.index(c) for c in order)
        out_sp = tuple(out.index(c) for c in order)
        rhs_sp = tuple(rhs.index(c) for c in order)
        return cls(lhs.index("N"), lhs.index("C"), lhs_sp, rhs.index("I"), rhs.index("O"), rhs_sp,
                   out.index("N"), out.index("C"), out_sp)

    @classmethod
    def of(cls, value: Any, num_spatial: int) -> ConvDimensionNumbers:
        """An instance; None (XLA's default for `num_spatial` spatial dimensions); three
        layout strings; jax's `(lhs_spec, rhs_spec, out_spec)` of int tuples (batch/out
        feature first, then feature/in feature, then the spatial dimensions); or a
        mapping with the field names."""
        if isinstance(value, cls):
            return value
        if value is None:
            return cls.default(num_spatial)
        if isinstance(value, Mapping):
            names = [f.name for f in fields(cls)]
            if set(value) != set(names):
                raise ShapeError(OP, [], f"conv dimension numbers need exactly the keys {names}, "
                                 f"got {sorted(value)}")
            return cls(**value)
        # jax's lax.ConvDimensionNumbers is a named tuple of the three specs.
        specs = None if isinstance(value, (str, bytes)) else _as_tuple(value)
        if specs is None or len(specs) != 3:
            raise ShapeError(OP, [], "dimension_numbers must be a ConvDimensionNumbers, three layout "
                             f"strings such as ('NHWC', 'HWIO', 'NHWC') or jax's (lhs_spec, rhs_spec, "
                             f"out_spec), got {value!r}")
        if all(isinstance(s, str) for s in specs):
            return cls.from_layouts(*specs)
        lhs, rhs, out = (_ints(s, "a spec") for s in specs)
        for spec in (lhs, rhs, out):
            if len(spec) < 2:
                raise ShapeError(OP, [], f"each spec needs at least 2 entries, got {specs!r}")
        return cls(lhs[0], lhs[1], lhs[2:], rhs[1], rhs[0], rhs[2:], out[0], out[1], out[2:])

    def as_dict(self) -> dict[str, int | tuple[int, ...]]:
        """The op's nine attributes (one per field, same names)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


CONV_FIELDS = tuple(f.name for f in fields(ConvDimensionNumbers))


def dilated(size: int, dilation: int) -> int:
    """The extent of `size` elements with `dilation - 1` holes between them."""
    return 0 if size == 0 else (size - 1) * dilation + 1


def output_size(size: int, kernel: int, stride: int, low: int, high: int, lhs_dilation: int,
                rhs_dilation: int) -> int:
    """The number of window positions along one spatial dimension (StableHLO's C26)."""
    padded = low + dilated(size, lhs_dilation) + high
    window = dilated(kernel, rhs_dilation)
    if padded <= 0 or window > padded:
        return 0
    return (padded - window) // stride + 1


def _check_permutation(shapes: list[Shape], rank: int, what: str, dims: Sequence[int]) -> None:
    for d in dims:
        if not 0 <= d < rank:
            raise ShapeError(OP, shapes, f"{what} dimension {d} is out of range for rank {rank}")
    if len(set(dims)) != len(dims):
        raise ShapeError(OP, shapes, f"{what} dimensions {tuple(dims)} repeat a dimension")


def _check_dimension_numbers(lhs: Shape, rhs: Shape, d: ConvDimensionNumbers) -> None:
    shapes = [lhs, rhs]
    n = lhs.rank - 2
    for what, spatial in (("input", d.input_spatial_dimensions), ("kernel", d.kernel_spatial_dimensions),
                          ("output", d.output_spatial_dimensions)):
        if len(spatial) != n:
            raise ShapeError(OP, shapes, f"{what}_spatial_dimensions {spatial} must have {n} entries "
                             f"(rank {lhs.rank} - 2)")
    _check_permutation(shapes, lhs.rank, "input",
                       (d.input_batch_dimension, d.input_feature_dimension, *d.input_spatial_dimensions))
    _check_permutation(shapes, rhs.rank, "kernel",
                       (d.kernel_input_feature_dimension, d.kernel_output_feature_dimension,
                        *d.kernel_spatial_dimensions))
    _check_permutation(shapes, lhs.rank, "output",
                       (d.output_batch_dimension, d.output_feature_dimension,
                        *d.output_spatial_dimensions))


def _check_element_types(lhs: Shape, rhs: Shape, preferred: PrimitiveType, preferred_given: bool) -> None:
    """dot_general's rules (XLA applies the same MaybeUpcast to both ops)."""
    shapes = [lhs, rhs]
    lt, rt = lhs.element_type, rhs.element_type
    if lt != rt and not preferred_given:
        raise ShapeError(OP, shapes, f"lhs and rhs must have the same element type (got {lt} and {rt}); "
                         "convert one with convert_element_type or pass preferred_element_type")
    try:
        ops_dot.check_preferred_type(shapes, lt, preferred)
        ops_dot.check_preferred_type(shapes, rt, preferred)
    except ShapeError as e:  # the same rule, named for this op
        raise ShapeError(OP, shapes, e.rule) from None


def infer_convolution(lhs: Shape, rhs: Shape, *, window_strides: tuple[int, ...],
                      padding: tuple[tuple[int, int], ...], lhs_dilation: tuple[int, ...],
                      rhs_dilation: tuple[int, ...], input_batch_dimension: int,
                      input_feature_dimension: int, input_spatial_dimensions: tuple[int, ...],
                      kernel_input_feature_dimension: int, kernel_output_feature_dimension: int,
                      kernel_spatial_dimensions: tuple[int, ...], output_batch_dimension: int,
                      output_feature_dimension: int, output_spatial_dimensions: tuple[int, ...],
                      feature_group_count: int, batch_group_count: int, precision_config: str,
                      preferred_element_type: Any, preferred_given: bool = True) -> Shape:
    """XLA's InferConvolveShape with StableHLO's constraints C1-C28. `preferred_given`
    is builder-only, as for dot_general: text parsed from MLIR states its result type."""
    shapes = [lhs, rhs]
    for s in shapes:
        if not s.is_array():
            raise ShapeError(OP, shapes, f"operands must be arrays, got {s}")
    if lhs.rank != rhs.rank:
        raise ShapeError(OP, shapes, f"lhs and rhs must have the same rank, got {lhs.rank} and {rhs.rank}")
    if lhs.rank < 2:
        raise ShapeError(OP, shapes, "operands need a batch/feature pair of dimensions (rank >= 2)")
    d = ConvDimensionNumbers(input_batch_dimension, input_feature_dimension, input_spatial_dimensions,
                             kernel_input_feature_dimension, kernel_output_feature_dimension,
                             kernel_spatial_dimensions, output_batch_dimension,
                             output_feature_dimension, output_spatial_dimensions)
    _check_dimension_numbers(lhs, rhs, d)
    n = lhs.rank - 2
    for name, values in (("window_strides", window_strides), ("padding", padding),
                         ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(values) != n:
            raise ShapeError(OP, shapes, f"{name} has {len(values)} entries but there are {n} spatial "
                             "dimensions")
    for name, values in (("window stride", window_strides), ("lhs dilation", lhs_dilation),
                         ("rhs dilation", rhs_dilation)):
        for i, value in enumerate(values):
            if value < 1:
                raise ShapeError(OP, shapes, f"{name} {i} must be >= 1, got {value}")
    for name, count in (("feature_group_count", feature_group_count),
                        ("batch_group_count", batch_group_count)):
        if count < 1:
            raise ShapeError(OP, shapes, f"{name} must be >= 1, got {count}")
    if feature_group_count > 1 and batch_group_count > 1:
        raise ShapeError(OP, shapes, f"feature_group_count ({feature_group_count}) and "
                         f"batch_group_count ({batch_group_count}) cannot both exceed 1")
    batch = lhs.dimensions[d.input_batch_dimension]
    features = lhs.dimensions[d.input_feature_dimension]
    kernel_in = rhs.dimensions[d.kernel_input_feature_dimension]
    kernel_out = rhs.dimensions[d.kernel_output_feature_dimension]
    if features % feature_group_count:
        raise ShapeError(OP, shapes, f"the input feature size {features} is not a multiple of "
                         f"feature_group_count {feature_group_count}")
    if features // feature_group_count != kernel_in:
        raise ShapeError(OP, shapes, f"the kernel's input feature size ({kernel_in}) must be the input "
                         f"feature size ({features}) / feature_group_count ({feature_group_count})")
    if kernel_out % feature_group_count:
        raise ShapeError(OP, shapes, f"the kernel's output feature size {kernel_out} is not a multiple "
                         f"of feature_group_count {feature_group_count}")
    if batch % batch_group_count:
        raise ShapeError(OP, shapes, f"the input batch size {batch} is not a multiple of "
                         f"batch_group_count {batch_group_count}")
    if kernel_out % batch_group_count:
        raise ShapeError(OP, shapes, f"the kernel's output feature size {kernel_out} is not a multiple "
                         f"of batch_group_count {batch_group_count}")
    for k, kd in enumerate(d.kernel_spatial_dimensions):
        if rhs.dimensions[kd] < 1:  # XLA: "Window ... has a non-positive dimension"
            raise ShapeError(OP, shapes, f"kernel spatial dimension {kd} (spatial {k}) must not be empty")
    levels = precision_config.split(",") if isinstance(precision_config, str) else []
    if len(levels) != 2 or any(level not in ops_dot.PRECISIONS for level in levels):
        raise ShapeError(OP, shapes, f"precision_config must be two of {ops_dot.PRECISIONS} separated "
                         f"by a comma, got {precision_config!r}")
    preferred = PrimitiveType(preferred_element_type)
    _check_element_types(lhs, rhs, preferred, preferred_given)
    dims = [0] * lhs.rank
    dims[d.output_batch_dimension] = batch // batch_group_count
    dims[d.output_feature_dimension] = kernel_out
    for k in range(n):
        low, high = padding[k]
        dims[d.output_spatial_dimensions[k]] = output_size(
            lhs.dimensions[d.input_spatial_dimensions[k]], rhs.dimensions[d.kernel_spatial_dimensions[k]],
            window_strides[k], low, high, lhs_dilation[k], rhs_dilation[k])
    return Shape.array(preferred, tuple(dims))


def normalize_precision(precision_config: Any) -> str:
    """dot_general's precision normalisation, with errors naming this op."""
    try:
        return ops_dot.normalize_precision(precision_config)
    except ShapeError as e:
        raise ShapeError(OP, [], e.rule) from None


define(OpDef("convolution", (Operand("lhs"), Operand("rhs")),
             {"window_strides": I64_ARRAY, "padding": PAIRS, "lhs_dilation": I64_ARRAY,
              "rhs_dilation": I64_ARRAY,
              **{name: (I64_ARRAY if name.endswith("spatial_dimensions") else INT)
                 for name in CONV_FIELDS},
              "feature_group_count": INT, "batch_group_count": INT,
              "precision_config": STR, "preferred_element_type": ELEMENT_TYPE},
             infer_convolution,
             doc="Windowed sums of products of a base area and a kernel, with dilations, padding, "
                 "feature and batch groups (spec#convolution)."))
