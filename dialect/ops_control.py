"""Computations and control flow: call, composite_call, map, while, conditional (case), scan,
optimization_barrier.

A sub-computation reaches a shape rule as its program shape
`(parameter_shapes, result_shape)`. Imports `dialect.registry`,
`dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import BOOL, I64_ARRAY, INT, STR, OpDef, Operand, define
from .shape import Shape

ProgramShape = tuple[list[Shape], Shape]


def _plain(shape: Shape) -> Shape:
    """The shape without layouts, inside tuples too: XLA compares computation shapes so."""
    return shape.with_default_layout() if shape.is_array() or shape.is_tuple() else shape


def _same(a: Shape, b: Shape) -> bool:
    return _plain(a) == _plain(b)


def _show(shapes: list[Shape]) -> str:
    return "(" + ", ".join(map(str, shapes)) + ")"


def infer_call(operands: tuple[Shape, ...], *, to_apply: ProgramShape) -> Shape:
    params, result = to_apply
    if len(params) != len(operands) or not all(map(_same, params, operands)):
        raise ShapeError("call", list(operands), f"the computation takes {_show(params)}")
    return _plain(result)


def infer_composite_call(operands: tuple[Shape, ...], *, to_apply: ProgramShape, name: str,
                         composite_attributes: str, version: int) -> Shape:
    if not name:
        raise ShapeError("composite_call", list(operands), "the composite needs a name (e.g. "
                         "\"foo.bar\")")
    if version < 0:
        raise ShapeError("composite_call", list(operands), f"version must be >= 0, got {version}")
    params, result = to_apply
    if len(params) != len(operands) or not all(map(_same, params, operands)):
        raise ShapeError("composite_call", list(operands),
                         f"the decomposition takes {_show(params)}")
    return _plain(result)


def infer_map(operands: tuple[Shape, ...], *, dimensions: tuple[int, ...],
              computation: ProgramShape) -> Shape:
    shapes = list(operands)
    if not shapes:
        raise ShapeError("map", [], "map needs at least one operand")
    first = shapes[0]
    for s in shapes:
        if not s.is_array() or s.dimensions != first.dimensions:
            raise ShapeError("map", shapes, "operands must be arrays of the same dimensions")
    if tuple(dimensions) != tuple(range(first.rank)):
        raise ShapeError("map", shapes, f"dimensions {tuple(dimensions)} must be all of the "
                         f"operands' dimensions in order, {tuple(range(first.rank))}")
    params, result = computation
    scalars = [Shape.array(s.element_type, ()) for s in shapes]
    if len(params) != len(scalars) or not all(map(_same, params, scalars)):
        raise ShapeError("map", shapes, f"the computation takes {_show(params)}; it must take "
                         f"one scalar per operand {_show(scalars)}")
    if not result.is_array() or result.rank != 0:
        raise ShapeError("map", shapes, f"the computation must return a scalar, not {result}")
    return Shape.array(result.element_type, first.dimensions)


def infer_while(init: Shape, *, cond: ProgramShape, body: ProgramShape) -> Shape:
    cond_params, cond_result = cond
    body_params, body_result = body
    if len(cond_params) != 1 or not _same(cond_params[0], init):
        raise ShapeError("while", [init], f"the condition takes {_show(cond_params)}, "
                         f"not the loop state {init}")
    if cond_result != Shape.array(PrimitiveType.PRED, ()):
        raise ShapeError("while", [init], f"the condition must return pred[], not {cond_result}")
    if len(body_params) != 1 or not _same(body_params[0], init):
        raise ShapeError("while", [init], f"the body takes {_show(body_params)}, "
                         f"not the loop state {init}")
    if not _same(body_result, init):
        raise ShapeError("while", [init], f"the body returns {body_result}; the loop state "
                         f"{init} must keep its shape")
    return _plain(init)


def infer_case(index: Shape, operands: tuple[Shape, ...], *,
               branches: list[ProgramShape]) -> Shape:
    shapes = [index, *operands]
    if not index.is_array() or index.rank != 0 or index.element_type not in (
            PrimitiveType.PRED, PrimitiveType.S32):
        raise ShapeError("conditional", shapes, "the branch index must be a pred[] or s32[] scalar")
    if not branches:
        raise ShapeError("conditional", shapes, "at least one branch computation is needed")
    if index.element_type == PrimitiveType.PRED and len(branches) != 2:
        raise ShapeError("conditional", shapes, "a pred branch index needs exactly two branches "
                         "(true_computation, false_computation)")
    if len(operands) != len(branches):
        raise ShapeError("conditional", shapes, f"{len(branches)} branches need as many operands, "
                         f"got {len(operands)}")
    result = None
    for i, ((params, branch_result), operand) in enumerate(zip(branches, operands, strict=True)):
        if len(params) != 1 or not _same(params[0], operand):
            raise ShapeError("conditional", shapes, f"branch {i} takes {_show(params)}, but its "
                             f"operand is {operand}")
        if result is not None and not _same(branch_result, result):
            raise ShapeError("conditional", shapes, f"branch {i} returns {branch_result}, branch 0 "
                             f"returns {result}: all branches must return the same shape")
        result = result or branch_result
    assert result is not None
    return _plain(result)


ASSOCIATIVITY = ("", "true", "false")  # is_associative: XLA's tri-state, "" = unspecified


def scan_parameters(inputs: tuple[Shape, ...] | list[Shape], inits: tuple[Shape, ...] | list[Shape],
                    scan_dimension: int) -> list[Shape]:
    """The shapes to_apply must take: one element of each input (the input without its scan
    dimension), then the carries; a ShapeError for inputs that cannot be scanned."""
    shapes = [*inputs, *inits]
    if not inputs:
        raise ShapeError("scan", shapes, "scan needs at least one input: the inputs' scan "
                         "dimension gives the number of steps")
    for s in shapes:
        if not s.is_array():
            raise ShapeError("scan", shapes, f"inputs and inits must be arrays, got {s}")
    for s in inputs:
        if not 0 <= scan_dimension < s.rank:
            raise ShapeError("scan", shapes, f"scan_dimension {scan_dimension} is out of range "
                             f"for input {s} of rank {s.rank}")
    steps = inputs[0].dimensions[scan_dimension]
    for s in inputs:
        if s.dimensions[scan_dimension] != steps:
            raise ShapeError("scan", shapes, f"every input must have the same size along "
                             f"scan_dimension {scan_dimension}: {inputs[0]} has {steps}, {s} has "
                             f"{s.dimensions[scan_dimension]}")
    elements = [Shape.array(s.element_type, tuple(s.dimensions[:scan_dimension])
                            + tuple(s.dimensions[scan_dimension + 1:])) for s in inputs]
    return [*elements, *(_plain(s) for s in inits)]


def infer_scan(inputs: tuple[Shape, ...], inits: tuple[Shape, ...], *, to_apply: ProgramShape,
               scan_dimension: int, is_reverse: bool, is_associative: str) -> Shape:
    """(outputs..., final carries...): output j is the body's output j of every step, stacked
    along `scan_dimension`; the carries have the inits' shapes."""
    shapes = [*inputs, *inits]

    def fail(rule: str) -> ShapeError:
        return ShapeError("scan", shapes, rule)

    if is_associative not in ASSOCIATIVITY:
        raise fail(f"is_associative must be true, false or unspecified, got {is_associative!r}")
    expected = scan_parameters(inputs, inits, scan_dimension)
    steps = inputs[0].dimensions[scan_dimension]
    params, result = to_apply
    if len(params) != len(expected) or not all(map(_same, params, expected)):
        raise fail(f"to_apply takes {_show(params)}; it must take one element of each input "
                   f"then the carries, {_show(expected)}")
    results = list(result.tuple_shapes) if result.is_tuple() else [result]
    if len(results) < len(inits):
        raise fail(f"to_apply returns {result}: it must return its outputs then {len(inits)} "
                   f"new carries")
    outputs, carries = results[:len(results) - len(inits)], results[len(results) - len(inits):]
    for carry, init in zip(carries, inits):
        if not _same(carry, init):
            raise fail(f"to_apply returns the carry {carry} for the init {init}: a carry must "
                       f"keep its shape")
    stacked = []
    for out in outputs:
        if not out.is_array():
            raise fail(f"to_apply's outputs must be arrays, got {out}")
        if scan_dimension > out.rank:
            raise fail(f"scan_dimension {scan_dimension} is out of range for the output "
                       f"{out}: the steps are stacked along it")
        dims = tuple(out.dimensions)
        stacked.append(Shape.array(out.element_type,
                                   dims[:scan_dimension] + (steps,) + dims[scan_dimension:]))
    return Shape.tuple([*stacked, *(_plain(s) for s in inits)])


def infer_optimization_barrier(operand: Shape) -> Shape:
    return _plain(operand)


define(OpDef("call", (Operand("operands", variadic=True),), {}, infer_call,
             doc="Call a computation (spec#call).", computations=("to_apply",)))
define(OpDef("composite_call", (Operand("operands", variadic=True),),
             {"name": STR, "composite_attributes": STR, "version": INT}, infer_composite_call,
             doc="A named composite op: means a call of its decomposition; name, attributes and "
                 "version are kept for backends (spec#composite).", computations=("to_apply",)))
define(OpDef("map", (Operand("operands", variadic=True),), {"dimensions": I64_ARRAY}, infer_map,
             doc="Apply a scalar computation elementwise (spec#map).",
             computations=("computation",)))
define(OpDef("while", (Operand("init"),), {}, infer_while,
             doc="Loop while the condition holds (spec#while).", computations=("cond", "body")))
define(OpDef("case", (Operand("index"), Operand("branch_operands", variadic=True)), {}, infer_case,
             doc="Run one branch chosen by an index or a predicate (spec#case).",
             computations=("branches",)))
define(OpDef("scan", (Operand("inputs", variadic=True), Operand("inits", variadic=True)),
             {"scan_dimension": INT, "is_reverse": BOOL, "is_associative": STR}, infer_scan,
             results=None, computations=("to_apply",),
             doc="Apply to_apply along scan_dimension to each input element and the carries; the "
                 "outputs of every step stacked, then the final carries (seed: Scan)."))
define(OpDef("optimization_barrier", (Operand("operand"),), {}, infer_optimization_barrier,
             doc="Identity that blocks moving work across it (spec#optimization_barrier)."))
