"""Ops of the reduce family: reduce, reduce_window and select_and_scatter.

The shape rules follow XLA's ShapeInference (InferReduceShape,
InferReduceWindowShape, InferSelectAndScatterShape and VerifyReducerShape):
a sub-computation arrives as its program shape `(parameter shapes, result
shape)`. reduce and reduce_window are variadic and multi-result: N operands,
N scalar init values and a computation `(acc_0..acc_{N-1}, x_0..x_{N-1}) ->
(r_0..r_{N-1})`; the op has one MLIR result per operand. Padding reaches the
dialect as explicit `(low, high)` pairs; "SAME"/"VALID" are builder sugar.
Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import I64_ARRAY, PAIRS, OpDef, Operand, define
from .shape import Shape

ProgramShape = tuple[Sequence[Shape], Shape]


def _require_arrays(op: str, shapes: Sequence[Shape], what: str) -> None:
    for s in shapes:
        if not s.is_array():
            raise ShapeError(op, shapes, f"{what} must be arrays, got {s}")


def _is_scalar_of(s: Shape, t: PrimitiveType) -> bool:
    return s.is_array() and s.rank == 0 and s.element_type == t


def verify_reducer(op: str, shapes: Sequence[Shape], computation: ProgramShape,
                   init_values: Sequence[Shape], element_types: Sequence[PrimitiveType],
                   role: str = "computation") -> None:
    """XLA's VerifyReducerShape: `(acc..., x...) -> acc or (acc...)`, every acc of its
    init value's type (a scalar), every x of its input's element type."""
    n = len(init_values)
    params, result = list(computation[0]), computation[1]
    if len(params) != 2 * n:
        raise ShapeError(op, shapes, f"the {role} must take {2 * n} parameters "
                         f"({n} accumulators, then {n} elements), but takes {len(params)}")
    if result.is_tuple():
        leaves = list(result.tuple_shapes)
        if len(leaves) != n:
            raise ShapeError(op, shapes, f"the {role} must return {n} value(s), "
                             f"but returns a tuple of {len(leaves)}")
    elif n != 1:
        raise ShapeError(op, shapes, f"the {role} must return a tuple of {n} scalars, "
                         f"but returns {result}")
    else:
        leaves = [result]
    for i, leaf in enumerate(leaves):
        if not leaf.is_array() or leaf.rank != 0:
            raise ShapeError(op, shapes, f"the {role} must return scalars, but result {i} is {leaf}")
    for i, init in enumerate(init_values):
        acc = leaves[i]
        if not _is_scalar_of(params[i], acc.element_type):
            raise ShapeError(op, shapes, f"the {role}'s parameter {i} ({params[i]}) differs from "
                             f"its result {i} ({acc})")
        if init.element_type != acc.element_type:
            raise ShapeError(op, shapes, f"the {role}'s accumulator {i} is {acc} but init value "
                             f"{i} is {init}")
        x = params[n + i]
        if not _is_scalar_of(x, element_types[i]):
            raise ShapeError(op, shapes, f"the {role}'s parameter {n + i} ({x}) must be a scalar "
                             f"of input {i}'s element type {element_types[i]}")


def check_variadic(op: str, inputs: Sequence[Shape], init_values: Sequence[Shape]) -> list[Shape]:
    """The common rules of reduce and reduce_window: N >= 1 arrays of equal dimensions
    and N scalar init values of their element types."""
    shapes = list(inputs) + list(init_values)
    if not inputs:
        raise ShapeError(op, shapes, "needs at least one operand")
    if len(init_values) != len(inputs):
        raise ShapeError(op, shapes, f"needs one init value per operand: {len(inputs)} operand(s), "
                         f"{len(init_values)} init value(s)")
    _require_arrays(op, shapes, "operands and init values")
    for s in inputs[1:]:
        if s.dimensions != inputs[0].dimensions:
            raise ShapeError(op, shapes, f"all operands must have the same dimensions, got "
                             f"{inputs[0].dimensions} and {s.dimensions}")
    for i, (x, init) in enumerate(zip(inputs, init_values)):
        if init.rank != 0:
            raise ShapeError(op, shapes, f"init value {i} must be a scalar, got {init}")
        if init.element_type != x.element_type:
            raise ShapeError(op, shapes, f"init value {i} ({init}) must have operand {i}'s "
                             f"element type {x.element_type}")
    return shapes


# -- reduce ------------------------------------------------------------------------------------

def infer_reduce(inputs: tuple[Shape, ...], init_values: tuple[Shape, ...], *,
                 dimensions: tuple[int, ...], computation: ProgramShape) -> Shape:
    op = "reduce"
    shapes = check_variadic(op, inputs, init_values)
    rank = inputs[0].rank
    for d in dimensions:
        if not 0 <= d < rank:
            raise ShapeError(op, shapes, f"dimension {d} to reduce is out of range for rank {rank}")
    if len(set(dimensions)) != len(dimensions):
        raise ShapeError(op, shapes, f"dimensions to reduce {dimensions} repeat a dimension")
    verify_reducer(op, shapes, computation, init_values, [s.element_type for s in inputs])
    kept = tuple(n for d, n in enumerate(inputs[0].dimensions) if d not in dimensions)
    return Shape.tuple([Shape.array(s.element_type, kept) for s in inputs])


# -- windows -----------------------------------------------------------------------------------

def dilated(size: int, dilation: int) -> int:
    """XLA's DilatedBound: the extent of `size` elements with `dilation - 1` holes between."""
    return 0 if size == 0 else (size - 1) * dilation + 1


def strided(bound: int, window: int, stride: int) -> int:
    """XLA's StridedBound: the number of window positions of `window` in `bound` at `stride`."""
    return 0 if window > bound else (bound - window) // stride + 1


def window_output_dims(op: str, shapes: Sequence[Shape], dims: Sequence[int], *,
                       window_dimensions: Sequence[int], window_strides: Sequence[int],
                       base_dilations: Sequence[int], window_dilations: Sequence[int],
                       padding: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """XLA's InferWindowOutputShape (negative padding rejected, as for reduce_window)."""
    rank = len(dims)
    fields = {"window_dimensions": window_dimensions, "window_strides": window_strides,
              "base_dilations": base_dilations, "window_dilations": window_dilations,
              "padding": padding}
    for name, values in fields.items():
        if len(values) != rank:
            raise ShapeError(op, shapes, f"{name} has {len(values)} entries but the operand has "
                             f"rank {rank}")
    out = []
    for i in range(rank):
        size, stride = window_dimensions[i], window_strides[i]
        low, high = padding[i]
        if size <= 0:
            raise ShapeError(op, shapes, f"window dimension {i} must be positive, got {size}")
        if stride <= 0:
            raise ShapeError(op, shapes, f"window stride {i} must be positive, got {stride}")
        if base_dilations[i] < 1:
            raise ShapeError(op, shapes, f"base dilation {i} must be >= 1, got {base_dilations[i]}")
        if window_dilations[i] < 1:
            raise ShapeError(op, shapes, f"window dilation {i} must be >= 1, got {window_dilations[i]}")
        if low < 0 or high < 0:
            raise ShapeError(op, shapes, f"padding {i} ({low}, {high}) must not be negative")
        bound = low + dilated(dims[i], base_dilations[i]) + high
        out.append(strided(bound, dilated(size, window_dilations[i]), stride))
    return tuple(out)


def infer_reduce_window(inputs: tuple[Shape, ...], init_values: tuple[Shape, ...], *,
                        window_dimensions: tuple[int, ...], window_strides: tuple[int, ...],
                        base_dilations: tuple[int, ...], window_dilations: tuple[int, ...],
                        padding: tuple[tuple[int, int], ...], computation: ProgramShape) -> Shape:
    op = "reduce_window"
    shapes = check_variadic(op, inputs, init_values)
    verify_reducer(op, shapes, computation, init_values, [s.element_type for s in inputs])
    out = window_output_dims(op, shapes, inputs[0].dimensions, window_dimensions=window_dimensions,
                             window_strides=window_strides, base_dilations=base_dilations,
                             window_dilations=window_dilations, padding=padding)
    return Shape.tuple([Shape.array(s.element_type, out) for s in inputs])


def check_select_and_scatter_operands(operand: Shape, source: Shape, init_value: Shape,
                                      ) -> list[Shape]:
    """Arrays, a scalar init value, and one element type for all three."""
    op = "select_and_scatter"
    shapes = [operand, source, init_value]
    _require_arrays(op, shapes, "operand, source and init value")
    t = operand.element_type
    if init_value.rank != 0:
        raise ShapeError(op, shapes, f"the init value must be a scalar, got {init_value}")
    if init_value.element_type != t:
        raise ShapeError(op, shapes, f"the init value ({init_value}) must have the operand's "
                         f"element type {t}")
    if source.element_type != t:
        raise ShapeError(op, shapes, f"the source ({source}) must have the operand's element type {t}")
    return shapes


def infer_select_and_scatter(operand: Shape, source: Shape, init_value: Shape, *,
                             window_dimensions: tuple[int, ...], window_strides: tuple[int, ...],
                             padding: tuple[tuple[int, int], ...], select: ProgramShape,
                             scatter: ProgramShape) -> Shape:
    op = "select_and_scatter"
    shapes = check_select_and_scatter_operands(operand, source, init_value)
    t = operand.element_type
    params, result = list(select[0]), select[1]
    if len(params) != 2:
        raise ShapeError(op, shapes, f"the select computation must take 2 parameters, "
                         f"but takes {len(params)}")
    for i, p in enumerate(params):
        if not _is_scalar_of(p, t):
            raise ShapeError(op, shapes, f"the select computation's parameter {i} ({p}) must be "
                             f"a scalar of the operand's element type {t}")
    if not _is_scalar_of(result, PrimitiveType.PRED):
        raise ShapeError(op, shapes, f"the select computation must return pred[], not {result}")
    verify_reducer(op, shapes, scatter, [init_value], [t], role="scatter computation")
    rank = operand.rank
    out = window_output_dims(op, shapes, operand.dimensions, window_dimensions=window_dimensions,
                             window_strides=window_strides, base_dilations=(1,) * rank,
                             window_dilations=(1,) * rank, padding=padding)
    if source.dimensions != out:
        raise ShapeError(op, shapes, f"the source must have the shape of the window-reduced "
                         f"operand, {Shape.array(t, out)}, got {source}")
    return operand.with_dims(operand.dimensions)


define(OpDef("reduce", (Operand("inputs", variadic=True), Operand("init_values", variadic=True)),
             {"dimensions": I64_ARRAY}, infer_reduce, results=None, computations=("computation",),
             doc="Reduce N arrays over a set of dimensions with one computation (spec#reduce)."))
define(OpDef("reduce_window", (Operand("inputs", variadic=True),
                               Operand("init_values", variadic=True)),
             {"window_dimensions": I64_ARRAY, "window_strides": I64_ARRAY,
              "base_dilations": I64_ARRAY, "window_dilations": I64_ARRAY, "padding": PAIRS},
             infer_reduce_window, results=None, computations=("computation",),
             doc="Reduce every window of N arrays (spec#reduce_window)."))
define(OpDef("select_and_scatter", (Operand("operand"), Operand("source"), Operand("init_value")),
             {"window_dimensions": I64_ARRAY, "window_strides": I64_ARRAY, "padding": PAIRS},
             infer_select_and_scatter, computations=("select", "scatter"),
             doc="Scatter source values to the element each window selects (spec#select_and_scatter)."))
