"""A module of the xhlo dialect printed as XLA's HLO text (what `HloModule::ToString` shows).

`hlo_text(module_text, name=...)` parses the module (generic form, as built or as
given to `compile_mlir`) and prints every function as an HLO computation: private
functions (the sub-computations) first, callees before callers, then the `ENTRY`
computation from `@main`. Instruction names are XLA's opcode names with one
module-wide counter (`%multiply.5`); operands are printed with their shapes, array
shapes with their layouts (`f32[2,3]{1,0}`), constants of more than 10 elements as
`{...}` (XLA's default `print_large_constants=false`), and attributes in XLA's
syntax (`dimensions={1}`, `window={size=3x3 pad=1_1x1_1}`, `dim_labels=b01f_01io->b01f`,
`direction=LT`, `to_apply=%add.3`...).

Where the dialect differs from HLO, the text shows what XLA would hold instead:
- an op with several MLIR results (a variadic reduce/sort/scatter/reduce_window/
  all_reduce/reduce_scatter, rng_bit_generator) is one tuple-shaped instruction
  followed by a `get-tuple-element` per result, as XlaBuilder makes them;
- `case` prints as `conditional` (`true_computation=`/`false_computation=` for a
  pred index, `branch_computations={...}` otherwise), `while` as `while`;
- `create_token` prints as `after-all()` (XLA's CreateToken is an operand-less after-all);
- `cosh`, `atan` (XLA builds them from other ops in its client library) print as
  `custom-call`s with `custom_call_target="cosh"` / `"atan"`;
- `rng` prints as XLA's `rng(a, b), distribution=rng_uniform`; its third operand (the
  executable's rng state, implicit in XLA) is left out;
- `infeed`/`recv` results are the data alone (XLA's are `(data, token[])` tuples);
  `send`/`recv` print their channel as `channel_id=N` (or `frontend_attributes` for a
  named channel), without XLA's `send-done`/`recv-done` halves;
- `composite_call` prints as XLA's CompositeCall does: a `call` with `is_composite=true`
  and the name, attributes and version in `frontend_attributes` (`composite.name=...`);
- `all_to_all` prints XLA's `dimensions={split_dimension}` and keeps the concat
  dimension and split count in `frontend_attributes`.
- bounded dynamic shapes print as `f32[<=10]` where the module says so
  (dialect/hlo_dynamic.py; what it cannot say: docs/hlo_text.md); the entry's
  `(padded, sizes...)` packing is left out, its ROOT is the dynamic value.

Imports `dialect` modules only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
from mlir import ir

from .attributes import attribute_values, operand_groups
from .context import new_context
from .element_types import PrimitiveType, dtype_of
from .entry_layouts import with_entry_layouts
from .errors import CompileError
from .hlo_dynamic import result_shapes
from .mlir_types import shape_from_mlir_type_text
from .ops_dynamic import DYNAMIC_RESULT_ATTR
from .registry import DIALECT, REGISTRY, OpDef
from .shape import Shape

LARGE_CONSTANT = 10  # XLA prints a constant with more elements as `{...}`

# xhlo op -> HLO opcode, where the two differ (others print under their own name,
# underscores as dashes).
_OPCODES = {
    "round_nearest_afz": "round-nearest-afz", "round_nearest_even": "round-nearest-even",
    "exponential_minus_one": "exponential-minus-one", "log_plus_one": "log-plus-one",
    "count_leading_zeros": "count-leading-zeros", "bitcast_convert": "bitcast-convert",
    "broadcast_in_dim": "broadcast", "dot_general": "dot", "case": "conditional",
    "optimization_barrier": "opt-barrier", "create_token": "after-all", "popcnt": "popcnt",
}
_CUSTOM_CALL_OPS = ("cosh", "atan")  # no HLO opcode: custom-calls named for the op


def hlo_text(module_text: str, name: str = "main",
             parameter_names: list[str] | None = None) -> str:
    """The module (MLIR text in the xhlo dialect, generic form) as XLA's HLO text.

    `name` names the HloModule and its entry computation (the `@main` function);
    `parameter_names` names the entry's parameters (else `parameter.N` as XLA's
    builder does for unnamed ones). Text that does not parse raises `CompileError`.
    """
    with new_context() as ctx, ir.Location.unknown():
        try:
            module = ir.Module.parse(module_text, context=ctx)
        except Exception as e:  # noqa: BLE001  (MLIR raises its own error types)
            raise CompileError(f"as_hlo_text: the module does not parse: {e}") from None
        return _ModulePrinter(module, name, parameter_names or []).print()


def shape_text(shape: Shape, layout: bool = True) -> str:
    """`f32[2,3]{1,0}` (layout for arrays of rank >= 1 when `layout`), `f32[<=10]{0}` (a
    dynamic dimension: its bound), `(f32[], s32[2]{0})`, `token[]`: XLA's
    `ShapeUtil::HumanStringWithLayout` / `HumanString`."""
    if shape.is_tuple():
        return "(" + ", ".join(shape_text(s, layout) for s in shape.tuple_shapes) + ")"
    if shape.is_token():
        return "token[]"
    dims = ",".join(f"<={d}" if dynamic else str(d)
                    for d, dynamic in zip(shape.dimensions, shape.dynamic_dimensions))
    text = f"{shape.element_type.text_name}[{dims}]"
    if layout and shape.rank:
        minor_to_major = shape.layout.minor_to_major if shape.layout else range(shape.rank - 1, -1, -1)
        text += "{" + ",".join(map(str, minor_to_major)) + "}"
    return text


class _ModulePrinter:
    def __init__(self, module: ir.Module, name: str, parameter_names: list[str]) -> None:
        self.functions = {_symbol(op): op for op in module.body.operations
                          if op.operation.name == "func.func"}
        if "main" not in self.functions:
            raise CompileError("as_hlo_text: the module has no @main function")
        self.name = name
        self.parameter_names = parameter_names
        self.counter = iter(range(1, 1 << 62))
        self.computation_names: dict[str, str] = {}

    def print(self) -> str:
        blocks = []
        for symbol in self._post_order():
            if symbol == "main":
                continue
            self.computation_names[symbol] = f"{symbol}.{next(self.counter)}"
            blocks.append(_ComputationPrinter(self, self.functions[symbol], symbol).print())
        self.computation_names["main"] = self.name
        entry = _ComputationPrinter(self, self.functions["main"], "main")
        blocks.append("ENTRY " + entry.print())
        params = ", ".join(shape_text(s) for s in entry.parameter_shapes)
        header = (f"HloModule {self.name}, entry_computation_layout="
                  f"{{({params})->{shape_text(entry.result_shape)}}}")
        return "\n\n".join([header, *blocks]) + "\n"

    def _post_order(self) -> list[str]:
        """Every function, callees before callers (as XLA prints computations)."""
        order: list[str] = []
        seen: set[str] = set()

        def visit(symbol: str) -> None:
            if symbol in seen or symbol not in self.functions:
                return
            seen.add(symbol)
            for callee in _callees(self.functions[symbol]):
                visit(callee)
            order.append(symbol)

        for symbol in self.functions:
            if symbol != "main":
                visit(symbol)
        visit("main")
        return order


def _symbol(op: Any) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _callees(func: Any) -> Iterator[str]:
    for op in _body(func).operations:
        opdef = _opdef(op)
        if opdef is None:
            continue
        for name in opdef.computations:
            attr = op.attributes[name]
            refs = list(attr) if isinstance(attr, ir.ArrayAttr) else [attr]
            yield from (ir.FlatSymbolRefAttr(r).value for r in refs)


def _body(func: Any) -> ir.Block:
    return func.regions[0].blocks[0]


def _opdef(op: Any) -> OpDef | None:
    name = op.operation.name
    if not name.startswith(DIALECT + "."):
        return None
    return REGISTRY.get(name[len(DIALECT) + 1:])


class _ComputationPrinter:
    """One function as an HLO computation; values are named as they are printed."""

    def __init__(self, module: _ModulePrinter, func: Any, symbol: str) -> None:
        self.module = module
        self.func = func
        self.symbol = symbol
        self.values: dict[ir.Value, tuple[str, Shape]] = {}
        self.lines: list[str] = []
        fn_type = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        attrs = func.attributes
        arg_attrs = attrs["arg_attrs"] if "arg_attrs" in attrs else None
        res_attrs = attrs["res_attrs"] if "res_attrs" in attrs else None
        self.parameter_shapes = [with_entry_layouts(shape_from_mlir_type_text(str(t)), arg_attrs, i)
                                 for i, t in enumerate(fn_type.inputs)]
        results = [shape_from_mlir_type_text(str(t)) for t in fn_type.results]
        if len(results) == 1:
            self.result_shape = with_entry_layouts(results[0], res_attrs, 0)
        else:
            self.result_shape = Shape.tuple(results)
        # What the computation returns is as its type (or dynamic_result) says, whatever was
        # propagated to it: a remove_dynamic_dimension_size before it left no op.
        self.returned: dict[ir.Value, Shape | None] = {}
        self.packing: Any = None  # the entry's (result, sizes...) tuple: not XLA's, not printed
        returned = list(list(_body(func).operations)[-1].operands)
        dynamic = (ir.StringAttr(attrs[DYNAMIC_RESULT_ATTR]).value
                   if symbol == "main" and DYNAMIC_RESULT_ATTR in attrs else None)
        packing = returned[0].owner if len(returned) == 1 else None
        if dynamic is not None and not isinstance(packing, (ir.Block, type(None))) \
                and packing.name == f"{DIALECT}.tuple":
            self.packing = packing
            self.result_shape = Shape.parse(dynamic)
            self.returned[packing.operands[0]] = self.result_shape
        else:
            self.returned.update((v, None) for v in returned)

    # -- naming --------------------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        return f"{base}.{next(self.module.counter)}"

    def operand(self, value: ir.Value) -> str:
        name, shape = self.values[value]
        return f"{shape_text(shape)} %{name}"

    def emit(self, name: str, shape: Shape, rest: str) -> None:
        self.lines.append(f"%{name} = {shape_text(shape)} {rest}")

    # -- printing ------------------------------------------------------------------------------

    def print(self) -> str:
        block = _body(self.func)
        names = self.module.parameter_names if self.symbol == "main" else []
        params = []
        for i, (arg, shape) in enumerate(zip(block.arguments, self.parameter_shapes)):
            name = self.fresh(names[i] if i < len(names) and names[i] else "parameter")
            self.values[arg] = (name, shape)
            params.append(f"{name}: {shape_text(shape, layout=False)}")
            self.emit(name, shape, f"parameter({i})")
        root = None
        for op in block.operations:
            if op.operation.name == "func.return":
                returned = [self.packing.operands[0]] if self.packing is not None else list(op.operands)
                root = self._root(returned)
                continue
            if self.packing is not None and op.operation == self.packing:
                continue
            self._instruction(op)
        root_prefix = f"%{root} = "
        body = []
        for line in self.lines:
            body.append(("ROOT " if line.startswith(root_prefix) else "") + line)
        head = (f"%{self.module.computation_names[self.symbol]} ({', '.join(params)}) -> "
                f"{shape_text(self.result_shape, layout=False)}")
        return head + " {\n" + "".join(f"  {line}\n" for line in body) + "}"

    def _root(self, returned: list[ir.Value]) -> str:
        if len(returned) == 1:
            return self.values[returned[0]][0]
        name = self.fresh("tuple")
        shape = Shape.tuple([self.values[v][1] for v in returned])
        self.emit(name, shape, f"tuple({', '.join(self.operand(v) for v in returned)})")
        return name

    def _instruction(self, op: Any) -> None:
        opdef = _opdef(op)
        if opdef is None:
            raise CompileError(f"as_hlo_text: {op.operation.name} is not an xhlo op")
        groups = operand_groups(opdef, op.operation)
        attrs = attribute_values(opdef, op.operation)
        every = [v for g in groups.values() for v in (g if isinstance(g, list) else [g])]
        opcode, extra, operands = _describe(opdef.name, op, groups, attrs, every, self)
        results = list(op.results)
        shapes = result_shapes(opdef, every, attrs, lambda v: self.values[v][1],
                               [shape_from_mlir_type_text(str(r.type)) for r in results], _int_constant)
        shapes = [self._as_returned(r, s) for r, s in zip(results, shapes)]
        as_tuple = opdef.name == "rng_bit_generator" or (opdef.results is None and len(results) != 1)
        shape = Shape.tuple(shapes) if as_tuple else shapes[0]
        name = self.fresh(opcode)
        args = ", ".join(self.operand(v) for v in operands)
        if opdef.name == "constant":
            args = constant_literal(attrs["value"], shape)
        self.emit(name, shape, f"{opcode}({args})" + "".join(f", {e}" for e in extra if e))
        if not as_tuple:
            self.values[results[0]] = (name, shape)
            return
        for i, (result, leaf) in enumerate(zip(results, shapes)):
            element = self.fresh("get-tuple-element")
            self.emit(element, leaf, f"get-tuple-element({shape_text(shape)} %{name}), index={i}")
            self.values[result] = (element, leaf)

    def _as_returned(self, value: ir.Value, shape: Shape) -> Shape:
        if value not in self.returned:
            return shape
        given = self.returned[value]
        return given if given is not None else _static(shape)

    def computation(self, symbol: str) -> str:
        return "%" + self.module.computation_names.get(symbol, symbol)


def _static(shape: Shape) -> Shape:
    if shape.is_tuple():
        return Shape.tuple([_static(s) for s in shape.tuple_shapes])
    return shape.with_dynamic_dimensions(None) if shape.is_array() else shape


def _int_constant(value: ir.Value) -> int | None:
    """The value of an integer scalar xhlo.constant, None for anything else."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != f"{DIALECT}.constant":
        return None
    attr = owner.attributes["value"]
    if not isinstance(attr, ir.DenseIntElementsAttr) or ir.ShapedType(attr.type).rank != 0:
        return None
    return int(attr[0]) if hasattr(attr, "__getitem__") else None


# -- attributes ----------------------------------------------------------------------------------

def _ints(values: Any) -> str:
    return "{" + ",".join(str(int(v)) for v in values) + "}"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _window(sizes: Any, strides: Any = None, padding: Any = None, lhs_dilation: Any = None,
            rhs_dilation: Any = None) -> str:
    """XLA's `window_util::ToString`: `size` always, the rest only where not trivial."""
    def x(values: Any) -> str:
        return "x".join(str(int(v)) for v in values)

    parts = [f"size={x(sizes)}"]
    if strides is not None and any(s != 1 for s in strides):
        parts.append(f"stride={x(strides)}")
    if padding is not None and any(p != 0 for pair in padding for p in pair):
        parts.append("pad=" + "x".join(f"{lo}_{hi}" for lo, hi in padding))
    if lhs_dilation is not None and any(d != 1 for d in lhs_dilation):
        parts.append(f"lhs_dilate={x(lhs_dilation)}")
    if rhs_dilation is not None and any(d != 1 for d in rhs_dilation):
        parts.append(f"rhs_dilate={x(rhs_dilation)}")
    return "window={" + " ".join(parts) + "}"


def _dim_labels(a: dict[str, Any]) -> str:
    """XLA's `ConvolutionDimensionNumbersToString`: `b01f_01io->b01f`."""
    def labels(rank: int, fixed: dict[int, str], spatial: Any) -> str:
        chars = ["?"] * rank
        for d, c in fixed.items():
            chars[d] = c
        for i, d in enumerate(spatial):
            chars[d] = str(i)
        return "".join(chars)

    n = len(a["input_spatial_dimensions"]) + 2
    lhs = labels(n, {a["input_batch_dimension"]: "b", a["input_feature_dimension"]: "f"},
                 a["input_spatial_dimensions"])
    rhs = labels(n, {a["kernel_input_feature_dimension"]: "i",
                     a["kernel_output_feature_dimension"]: "o"}, a["kernel_spatial_dimensions"])
    out = labels(n, {a["output_batch_dimension"]: "b", a["output_feature_dimension"]: "f"},
                 a["output_spatial_dimensions"])
    return f"dim_labels={lhs}_{rhs}->{out}"


def _precision(config: str) -> str:
    levels = config.split(",")
    if all(level == "DEFAULT" for level in levels):
        return ""
    return "operand_precision={" + ",".join(level.lower() for level in levels) + "}"


def _default_comparison(t: PrimitiveType) -> str:
    if t.is_floating or t.is_complex:
        return "FLOAT"
    return "SIGNED" if t.is_signed_int else "UNSIGNED"


def _channel(channel: str) -> str:
    kind, _, value = channel.partition(":")
    if kind == "int":
        return f"channel_id={value}"
    return f"frontend_attributes={{channel={_quote(value)}}}"


def _groups(text: str) -> str:
    return f"replica_groups={text}"


def _describe(kind: str, op: Any, groups: dict[str, Any], a: dict[str, Any],
              operands: list[ir.Value], printer: _ComputationPrinter,
              ) -> tuple[str, list[str], list[ir.Value]]:
    """(opcode, attribute texts, operands as printed) of one xhlo op."""
    comp = printer.computation
    opcode = _OPCODES.get(kind, kind.replace("_", "-"))
    if kind in _CUSTOM_CALL_OPS:
        return "custom-call", [f"custom_call_target={_quote(kind)}"], operands
    if kind == "constant":
        return "constant", [], []  # the literal goes in the parentheses: see _constant_call
    if kind == "compare":
        t = printer.values[operands[0]][1].element_type
        extra = [f"direction={a['comparison_direction']}"]
        if a["compare_type"] and a["compare_type"] != _default_comparison(t):
            extra.append(f"type={a['compare_type']}")
        return opcode, extra, operands
    if kind == "broadcast_in_dim":
        return opcode, [f"dimensions={_ints(a['broadcast_dimensions'])}"], operands
    if kind in ("transpose",):
        return opcode, [f"dimensions={_ints(a['permutation'])}"], operands
    if kind in ("reverse", "map", "reduce"):
        return opcode, [f"dimensions={_ints(a['dimensions'])}",
                        f"to_apply={comp(a['computation'])}" if "computation" in a else ""], operands
    if kind == "slice":
        bounds = ", ".join(f"[{s}:{e}" + (f":{st}" if st != 1 else "") + "]"
                           for s, e, st in zip(a["start_indices"], a["limit_indices"], a["strides"]))
        return opcode, [f"slice={{{bounds}}}"], operands
    if kind == "concatenate":
        return opcode, [f"dimensions={{{a['dimension']}}}"], operands
    if kind == "pad":
        interior = any(a["interior_padding"])
        config = "x".join(f"{lo}_{hi}" + (f"_{i}" if interior else "") for lo, hi, i in
                          zip(a["edge_padding_low"], a["edge_padding_high"], a["interior_padding"]))
        return opcode, [f"padding={config}"], operands
    if kind == "iota":
        return opcode, [f"iota_dimension={a['iota_dimension']}"], operands
    if kind in ("get_dimension_size", "set_dimension_size"):
        return opcode, [f"dimensions={{{a['dimension']}}}"], operands
    if kind == "dynamic_reshape":  # XLA's operands: the array and the output sizes (the
        # input sizes are this dialect's, for the lowering; the bounds are in the shape)
        return opcode, [], [groups["operand"], *groups["output_sizes"]]
    if kind == "get_tuple_element":
        return opcode, [f"index={a['index']}"], operands
    if kind == "reduce_precision":
        return opcode, [f"exponent_bits={a['exponent_bits']}",
                        f"mantissa_bits={a['mantissa_bits']}"], operands
    if kind == "dynamic_slice":
        return opcode, [f"dynamic_slice_sizes={_ints(a['slice_sizes'])}"], operands
    if kind == "gather":
        extra = [f"offset_dims={_ints(a['offset_dims'])}",
                 f"collapsed_slice_dims={_ints(a['collapsed_slice_dims'])}",
                 f"start_index_map={_ints(a['start_index_map'])}"]
        if a["operand_batching_dims"]:
            extra.append(f"operand_batching_dims={_ints(a['operand_batching_dims'])}")
            extra.append(f"start_indices_batching_dims={_ints(a['start_indices_batching_dims'])}")
        extra += [f"index_vector_dim={a['index_vector_dim']}",
                  f"slice_sizes={_ints(a['slice_sizes'])}",
                  "indices_are_sorted=true" if a["indices_are_sorted"] else ""]
        return opcode, extra, operands
    if kind == "scatter":
        extra = [f"update_window_dims={_ints(a['update_window_dims'])}",
                 f"inserted_window_dims={_ints(a['inserted_window_dims'])}",
                 f"scatter_dims_to_operand_dims={_ints(a['scatter_dims_to_operand_dims'])}"]
        if a["input_batching_dims"]:
            extra.append(f"input_batching_dims={_ints(a['input_batching_dims'])}")
            extra.append(f"scatter_indices_batching_dims={_ints(a['scatter_indices_batching_dims'])}")
        extra += [f"index_vector_dim={a['index_vector_dim']}",
                  "indices_are_sorted=true" if a["indices_are_sorted"] else "",
                  "unique_indices=true" if a["unique_indices"] else "",
                  f"to_apply={comp(a['update_computation'])}"]
        return opcode, extra, operands
    if kind == "reduce_window":
        window = _window(a["window_dimensions"], a["window_strides"], a["padding"],
                         a["base_dilations"], a["window_dilations"])
        return opcode, [window, f"to_apply={comp(a['computation'])}"], operands
    if kind == "select_and_scatter":
        return opcode, [_window(a["window_dimensions"], a["window_strides"], a["padding"]),
                        f"select={comp(a['select'])}", f"scatter={comp(a['scatter'])}"], operands
    if kind in ("dot_general", "ragged_dot", "scaled_dot"):
        extra = []
        for side in ("lhs", "rhs"):
            if a[f"{side}_batch_dimensions"]:
                extra.append(f"{side}_batch_dims={_ints(a[f'{side}_batch_dimensions'])}")
            extra.append(f"{side}_contracting_dims={_ints(a[f'{side}_contracting_dimensions'])}")
        if kind == "ragged_dot":  # XLA's RaggedDotDimensionNumbersToString
            extra.append(f"lhs_ragged_dims={_ints(a['lhs_ragged_dimensions'])}")
            if a["rhs_group_dimensions"]:
                extra.append(f"rhs_group_dims={_ints(a['rhs_group_dimensions'])}")
        return opcode, extra + [_precision(a["precision_config"])], operands
    if kind == "convolution":
        sizes = [printer.values[operands[1]][1].dimensions[d] for d in a["kernel_spatial_dimensions"]]
        extra = [_window(sizes, a["window_strides"], a["padding"], a["lhs_dilation"],
                         a["rhs_dilation"]), _dim_labels(a)]
        if a["feature_group_count"] != 1:
            extra.append(f"feature_group_count={a['feature_group_count']}")
        if a["batch_group_count"] != 1:
            extra.append(f"batch_group_count={a['batch_group_count']}")
        return opcode, extra + [_precision(a["precision_config"])], operands
    if kind == "fft":
        return opcode, [f"fft_type={a['fft_type']}", f"fft_length={_ints(a['fft_length'])}"], operands
    if kind == "cholesky":
        return opcode, ["lower=true" if a["lower"] else ""], operands
    if kind == "triangular_solve":  # XLA's TriangularSolveOptionsToString: true flags only
        flags = [f"{flag}=true" for flag in ("left_side", "lower", "unit_diagonal") if a[flag]]
        return opcode, [*flags, f"transpose_a={a['transpose_a']}"], operands
    if kind == "sort":
        return opcode, [f"dimensions={{{a['dimension']}}}",
                        "is_stable=true" if a["is_stable"] else "",
                        f"to_apply={comp(a['comparator'])}"], operands
    if kind == "call":
        return opcode, [f"to_apply={comp(a['to_apply'])}"], operands
    if kind == "composite_call":  # XLA's CompositeCall: a kCall marked is_composite
        composite = [f"composite.attributes={a['composite_attributes'] or '{}'}",
                     f"composite.name={_quote(a['name'])}",
                     f"composite.version={_quote(str(a['version']))}"]
        return "call", [f"to_apply={comp(a['to_apply'])}", "is_composite=true",
                        "frontend_attributes={" + ",".join(composite) + "}"], operands
    if kind == "while":
        return opcode, [f"condition={comp(a['cond'])}", f"body={comp(a['body'])}"], operands
    if kind == "scan":  # as XLA prints kScan: the inputs then the inits, and their split
        return opcode, [f"dimensions={{{a['scan_dimension']}}}",
                        f"num_carries={len(groups['inits'])}",
                        "is_reverse=true" if a["is_reverse"] else "",
                        f"is_associative={a['is_associative']}" if a["is_associative"] else "",
                        f"to_apply={comp(a['to_apply'])}"], operands
    if kind == "case":
        branches = a["branches"]
        pred = printer.values[groups["index"]][1].element_type == PrimitiveType.PRED
        if pred and len(branches) == 2:
            return opcode, [f"true_computation={comp(branches[0])}",
                            f"false_computation={comp(branches[1])}"], operands
        return opcode, ["branch_computations={" + ", ".join(comp(b) for b in branches) + "}"], operands
    if kind == "custom_call":
        extra = [f"custom_call_target={_quote(a['call_target_name'])}"]
        if a["has_side_effect"]:
            extra.append("custom_call_has_side_effect=true")
        if a["backend_config"]:
            extra.append(f"backend_config={_quote(a['backend_config'])}")
        return opcode, extra, operands
    if kind == "infeed":
        return opcode, [f"infeed_config={_quote(a['config'])}" if a["config"] else ""], operands
    if kind == "outfeed":
        return opcode, [f"outfeed_shape={shape_text(Shape.parse(a['shape_with_layout']))}",
                        f"outfeed_config={_quote(a['outfeed_config'])}" if a["outfeed_config"] else ""
                        ], operands
    if kind in ("send", "recv"):
        return opcode, [_channel(a["channel"])], operands
    if kind in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "collective_broadcast",
                "collective_permute", "ragged_all_to_all"):
        extra = []
        if a.get("channel_id"):
            extra.append(f"channel_id={a['channel_id']}")
        if "replica_groups" in a:
            extra.append(_groups(a["replica_groups"]))
        if kind == "all_gather":
            extra.append(f"dimensions={{{a['all_gather_dim']}}}")
        if kind == "reduce_scatter":
            extra.append(f"dimensions={{{a['scatter_dimension']}}}")
        if kind == "all_to_all":
            extra.append(f"dimensions={{{a['split_dimension']}}}")
            extra.append(f"frontend_attributes={{concat_dimension=\"{a['concat_dimension']}\","
                         f"split_count=\"{a['split_count']}\"}}")
        if kind == "collective_permute":
            extra.append("source_target_pairs={" + ",".join(f"{{{s},{t}}}" for s, t in
                                                             a["source_target_pairs"]) + "}")
        if "computation" in a:
            extra.append(f"to_apply={comp(a['computation'])}")
        return opcode, extra, operands
    if kind == "rng":
        return opcode, [f"distribution=rng_{a['rng_distribution'].lower()}"], operands[:2]
    if kind == "rng_bit_generator":
        return opcode, [f"algorithm=rng_{a['algorithm'].lower()}"], operands
    if kind == "rng_get_and_update_state":
        return opcode, [f"delta={a['delta']}"], operands
    if kind in ("convert", "bitcast_convert"):
        return opcode, [], operands
    unused = set(a) - {"new_element_type", "new_sizes", "dimensions", "element_type"}
    if unused:  # a new op with attributes this printer does not know: show them, not drop them
        return opcode, [f"{k}={_quote(str(a[k]))}" for k in sorted(unused)], operands
    return opcode, [], operands


# -- constants -----------------------------------------------------------------------------------

def _constant_values(attr: ir.Attribute, shape: Shape) -> np.ndarray:
    """The constant's elements as a numpy array of the result's dtype and dimensions."""
    held = shape_from_mlir_type_text(str(ir.DenseElementsAttr(attr).type))
    data = np.array(None, object)
    if not ir.DenseElementsAttr(attr).is_splat:  # numpy misreads an i1 splat past 8 elements
        try:
            data = np.array(attr)
        except (RuntimeError, TypeError, ValueError):  # bf16: no buffer protocol in the bindings
            pass
    if data.dtype == object:
        data = _parse_dense_text(str(attr), held)
    if data.size == 1:  # a splat: the bindings give its one element
        data = np.broadcast_to(data.reshape(()), held.dimensions)
    data = data.reshape(held.dimensions)
    if shape.element_type.is_complex:
        data = data[..., 0] + 1j * data[..., 1]
    return np.asarray(data).astype(shape.dtype)


def _parse_dense_text(text: str, held: Shape) -> np.ndarray:
    """The elements of a small `dense<...>` attribute text (decimal, `true`/`false`, or MLIR's
    hex bit patterns for NaN and infinities)."""
    body = text[text.index("<") + 1: text.rindex("> : ")]
    tokens = re.findall(r"0x[0-9A-Fa-f]+|true|false|[-+]?(?:inf|nan|[0-9.]+(?:[eE][-+]?[0-9]+)?)",
                        body)
    dtype = dtype_of(held.element_type)
    bits = np.dtype(f"u{dtype.itemsize}")

    def value(token: str) -> Any:
        if token in ("true", "false"):
            return token == "true"
        if token.startswith("0x"):
            return np.array([int(token, 16)], bits).view(dtype)[0]
        return int(token) if dtype.kind in "iu" else dtype.type(float(token))

    return np.array([value(t) for t in tokens], dtype)


def _scalar_text(value: Any, t: PrimitiveType) -> str:
    if t == PrimitiveType.PRED:
        return _bool(bool(value))
    if t.is_integral:
        return str(int(value))
    if t.is_complex:
        return f"({_float_text(value.real)}, {_float_text(value.imag)})"
    return _float_text(value)


def _float_text(value: Any) -> str:
    """The shortest text that reads back to the same value, as XLA's RoundTripFpToString."""
    if np.isnan(value):
        return "nan" if not np.signbit(value) else "-nan"
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = str(value)
    return text[:-2] if text.endswith(".0") else text


def _literal_text(data: np.ndarray, t: PrimitiveType) -> str:
    """XLA's one-line literal: `1`, `{1, 2}`, `{ { 1, 2 }, { 3, 4 } }`."""
    if data.ndim == 0:
        return _scalar_text(data[()], t)
    if data.ndim == 1:
        return "{" + ", ".join(_scalar_text(v, t) for v in data) + "}"
    return "{ " + ", ".join(_literal_text(row, t) for row in data) + " }"


def constant_literal(attr: ir.Attribute, shape: Shape) -> str:
    """The parenthesised part of a constant: its literal, or `{...}` when large."""
    if shape.numel > LARGE_CONSTANT or not str(attr).startswith("dense<"):
        return "{...}"  # large, or data held elsewhere (a dense_resource blob)
    return _literal_text(_constant_values(attr, shape), shape.element_type)
