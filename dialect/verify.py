"""The verifier of xhlo ops, for built modules and modules given as text.

xhlo ops are unregistered in MLIR (`dialect.context`), so MLIR's verifier
skips them: this checks each against its registry entry (known op, operands
per group, every attribute present and of its kind, no regions) and, for text,
re-runs its shape rule, which checks shapes, dtypes and attribute values
exactly as the builder would have. Imports the other `dialect` modules.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from . import python_module  # noqa: F401  (the bindings' module for xhlo ops: no import per op)
from .attributes import OPERAND_SEGMENTS, attribute_values, needs_segment_sizes, operand_groups
from .entry_layouts import LAYOUT_ATTR, with_entry_layouts
from .errors import CompileError, ShapeError, XlaError
from .registry import DIALECT, ENTRY, REGISTRY, OpDef
from .shape import Shape
from .type_shapes import shape_of_type

__all__ = ["LAYOUT_ATTR", "program_shape_of", "verify_module", "verify_op"]


_shape = shape_of_type


def verify_op(op: ir.Operation, shape_rule: bool = True) -> None:
    """Raise ShapeError naming the op when `op` does not fit its registry entry; with
    `shape_rule`, also when its result types are not the inferred ones."""
    opdef = _opdef(op)
    try:
        groups = operand_groups(opdef, op)
        attrs = attribute_values(opdef, op)
        _check_structure(opdef, op)
    except ValueError as e:
        raise ShapeError(opdef.full_name, [], str(e)) from None
    if not shape_rule:
        return
    shapes = [[_shape(v.type) for v in g] if isinstance(g, list) else _shape(g.type)
              for g in groups.values()]
    shapes = [tuple(s) if isinstance(s, list) else s for s in shapes]
    for name in opdef.computations:
        symbols = attrs[name]
        attrs[name] = ([_callee_program_shape(op, s) for s in symbols] if isinstance(symbols, list)
                       else _callee_program_shape(op, symbols))
    results = [_shape(r.type) for r in op.results]
    if opdef.name == "constant":
        attrs["shape"] = results[0]  # a constant's type is its result's; the rule checks the data
    inferred = opdef.infer(*shapes, **attrs)
    expected = list(inferred.tuple_shapes) if opdef.results is None else [inferred]
    expected = [s.with_default_layout() if s.is_array() else s for s in expected]
    if results != expected:
        raise ShapeError(opdef.name, [s for s in shapes if isinstance(s, Shape)],
                         f"result type {', '.join(map(str, results))} does not match the "
                         f"inferred {', '.join(map(str, expected))}")


def _opdef(op: ir.Operation) -> OpDef:
    name = op.name.removeprefix(DIALECT + ".")
    if name not in REGISTRY:
        raise ShapeError(op.name, [], f"unknown op: the {DIALECT} dialect has no op {name!r}")
    return REGISTRY[name]


def _check_structure(opdef: OpDef, op: ir.Operation) -> None:
    """What the registry fixes besides operands and attribute kinds."""
    if opdef.results is not None and len(op.results) != opdef.results:
        raise ValueError(f"has {opdef.results} result{'s' * (opdef.results != 1)}, got "
                         f"{len(op.results)}")
    if len(op.regions):
        raise ValueError("takes no regions (sub-computations are functions named by symbol)")
    if len(op.successors):
        raise ValueError("takes no successor blocks")
    known = set(opdef.attrs) | set(opdef.computations)
    if needs_segment_sizes(opdef):
        known.add(OPERAND_SEGMENTS)
    # Discardable attributes of other dialects (`name.with_dot`) are allowed, as MLIR does.
    unknown = sorted(n for n in op.attributes if n not in known and "." not in n)
    if unknown:
        expected = ", ".join(sorted(known)) or "none"
        raise ValueError(f"unknown attribute{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
                         f"(it takes: {expected})")


def _callee_program_shape(op: ir.Operation, symbol: str) -> tuple[list[Shape], Shape]:
    """Program shape of the private function `symbol` of the module holding `op`."""
    parent = op
    while parent.parent is not None:
        parent = parent.parent
    for f in parent.regions[0].blocks[0].operations:
        if f.operation.name == "func.func" and ir.StringAttr(f.attributes["sym_name"]).value == symbol:
            ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
            if len(ftype.results) != 1:
                raise ShapeError(op.name, [], f"computation @{symbol} must return one value")
            return [_shape(t) for t in ftype.inputs], _shape(ftype.results[0])
    raise ShapeError(op.name, [], f"no function @{symbol} in the module")


def _check_terminators(f: Any, errors: list[str]) -> None:
    """MLIR lets an unregistered op end a block (it might be a terminator): an xhlo op
    never is one, so a function block ending with one lost its `func.return`."""
    for block in f.regions[0].blocks:
        ops = block.operations
        last = ops[len(ops) - 1] if len(ops) else None
        if last is not None and last.operation.name.startswith(DIALECT + "."):
            errors.append(f"{last.location}: {last.operation.name} ends a block of "
                          f"@{ir.StringAttr(f.attributes['sym_name']).value}: the block has no "
                          "terminator (func.return)")
            return


def verify_module(module: ir.Module, shape_rules: bool = True) -> None:
    """Raise CompileError naming the op and its location for the first op that is wrong.

    A built module's shapes were inferred as it was built: `shape_rules=False` checks the
    rest (ops known, operand groups, attributes); text gets everything, and its entry
    signature is checked."""
    errors: list[str] = []
    context = module.context

    def visit(op: Any) -> ir.WalkResult:
        if not op.name.startswith(DIALECT + "."):
            if not context.is_registered_operation(op.name):
                errors.append(f"{op.location}: unknown op {op.name!r} (neither {DIALECT} nor a "
                              "dialect of upstream MLIR)")
                return ir.WalkResult.INTERRUPT
            if op.name == "func.func":
                _check_terminators(op, errors)
            return ir.WalkResult.INTERRUPT if errors else ir.WalkResult.ADVANCE
        try:
            verify_op(op, shape_rules)
        except (XlaError, KeyError, ValueError, TypeError) as e:
            errors.append(f"{op.location}: {e}")
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if errors:
        raise CompileError(f"invalid module: {errors[0]}", "hlo", errors[0])
    if shape_rules:
        program_shape_of(module)


def _entry(module: ir.Module) -> Any:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == ENTRY:
            return op
    raise CompileError(f"the module has no function @{ENTRY}", "hlo")


def program_shape_of(module: ir.Module) -> tuple[list[Shape], Shape]:
    """Parameter shapes and result shape (with layouts) of the module's entry function."""
    f = _entry(module)
    ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    arg_attrs = f.attributes["arg_attrs"] if "arg_attrs" in f.attributes else None
    res_attrs = f.attributes["res_attrs"] if "res_attrs" in f.attributes else None
    if len(ftype.results) != 1:
        raise CompileError(f"@{ENTRY} must return exactly one value (use a tuple)", "hlo")
    try:
        params = [with_entry_layouts(_shape(t), arg_attrs, i) for i, t in enumerate(ftype.inputs)]
        if any(leaf.is_token() for p in params for leaf in (p.flatten() if p.is_tuple() else [p])):
            raise ShapeError("main", params, "the entry computation cannot take a token parameter; "
                             "make one with create_token()")
        result = with_entry_layouts(_shape(ftype.results[0]), res_attrs, 0)
    except ShapeError as e:
        raise CompileError(f"unsupported entry signature: {e}", "hlo") from None
    return params, result
