"""The entry function's boundary in destination-passing style.

`main(tensors...) -> tensor | tuple` becomes `main(memrefs in..., memrefs out...)`:
every leaf array of every parameter (tuples are flattened) is a memref the
runtime fills from numpy without a copy (`bufferization.to_tensor restrict`),
and every leaf of the result is written into a numpy-allocated memref
(`bufferization.materialize_in_destination`). A non-default layout becomes a
static strided memref layout. Imports `dialect` and `lowering.patterns`.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import bufferization, func

from ...dialect.entry_layouts import LAYOUT_ATTR, leaf_layouts
from ...dialect.mlir_types import to_mlir_type_text
from ...dialect.shape import Shape
from .framework import cast, shape_of, signless_type
from .tuples import rebuild_tuple, tuple_leaves

DYNAMIC_STRIDES_ATTR = "xhlo.dynamic_strides"
#: On an op given buffers of tensors (a custom call's func.call): how many of its leading
#: operands it only reads (lowering/passes/tensor_reads.py).
READ_OPERANDS_ATTR = "xlamlir.inputs"


def memref_type(shape: Shape, minor_to_major: tuple[int, ...] | None = None,
                dynamic: bool = False) -> ir.Type:
    tensor = ir.RankedTensorType(signless_type(ir.Type.parse(_tensor_text(shape))))
    if dynamic and shape.rank:
        layout = ir.Attribute.parse(f"strided<[{', '.join('?' * shape.rank)}], offset: ?>")
        return ir.MemRefType.get(list(shape.dimensions), tensor.element_type, layout)
    if minor_to_major is None or list(minor_to_major) == list(range(shape.rank - 1, -1, -1)):
        return ir.MemRefType.get(list(shape.dimensions), tensor.element_type)
    strides = [0] * shape.rank
    step = 1
    for d in minor_to_major:
        strides[d] = step
        step *= shape.dimensions[d]
    layout = ir.Attribute.parse(f"strided<[{', '.join(map(str, strides))}]>")
    return ir.MemRefType.get(list(shape.dimensions), tensor.element_type, layout)


def _tensor_text(shape: Shape) -> str:
    return to_mlir_type_text(shape)


def _layouts(attrs: ir.Attribute | None, count: int) -> list[tuple[int, ...] | None]:
    """The layout of each array argument/result (None: row-major, or a tuple)."""
    result: list[tuple[int, ...] | None] = []
    for i in range(count):
        entry = ir.DictAttr(ir.ArrayAttr(attrs)[i]) if attrs is not None else None
        result.append(tuple(ir.DenseI64ArrayAttr(entry[LAYOUT_ATTR]))
                      if entry is not None and LAYOUT_ATTR in entry else None)
    return result




def _is_tuple(value: ir.Value) -> bool:
    return isinstance(value.type, ir.TupleType) or str(value.type).startswith("tuple<")


def _returned_layouts(value: ir.Value, f: func.FuncOp,
                      arg_layouts: list[tuple[int, ...] | None]) -> list[tuple[int, ...] | None]:
    """The layout of each non-token array leaf of the returned `value`, in `_leaves` order:
    a leaf that is a parameter, or a tuple parameter returned whole, keeps the parameter's
    layout(s) (API.md); other leaves (computed by ops, or taken out of a tuple parameter by
    get_tuple_element, an op) get None, the default. Reads the IR only: nothing is built."""
    if _is_tuple(value):
        owner = value.owner
        if isinstance(owner, ir.Block) and owner == f.entry_block:
            # A tuple parameter returned whole keeps its leaves' layouts.
            attrs = f.arg_attrs if "arg_attrs" in f.attributes else None
            return leaf_layouts(attrs, ir.BlockArgument(value).arg_number, shape_of(value))
        if not isinstance(owner, ir.Block) and owner.operation.name == "xhlo.tuple":
            return [layout for e in owner.operation.operands
                    for layout in _returned_layouts(e, f, arg_layouts)]
        return [None for leaf in shape_of(value).flatten() if leaf.is_array()]
    if str(value.type).startswith("!xhlo.token"):
        return []
    source = _tuple_element_source(value)
    if source is not None:
        return _returned_layouts(source, f, arg_layouts)
    parameter_part = _tuple_parameter_element_layouts(value, f)
    if parameter_part is not None:
        return parameter_part
    if isinstance(value.owner, ir.Block) and value.owner == f.entry_block:
        return [arg_layouts[ir.BlockArgument(value).arg_number]]
    return [None]


def _tuple_element_source(value: ir.Value) -> ir.Value | None:
    """For get_tuple_element(xhlo.tuple(...), i): the tuple's i-th operand (the same array)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "xhlo.get_tuple_element":
        return None
    tuple_owner = owner.operation.operands[0].owner
    if isinstance(tuple_owner, ir.Block) or tuple_owner.operation.name != "xhlo.tuple":
        return None
    return tuple_owner.operation.operands[ir.IntegerAttr(owner.operation.attributes["index"]).value]


def _tuple_parameter_element_layouts(value: ir.Value,
                                     f: func.FuncOp) -> list[tuple[int, ...] | None] | None:
    """For get_tuple_element(tuple parameter, i): the layouts of element i's array leaves, as
    the parameter declares them (the element is the parameter's data, as in XLA)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "xhlo.get_tuple_element":
        return None
    tuple_value = owner.operation.operands[0]
    if not (isinstance(tuple_value.owner, ir.Block) and tuple_value.owner == f.entry_block):
        nested = _tuple_parameter_element_layouts(tuple_value, f)
        if nested is None:
            return None
        tuple_shape = shape_of(tuple_value)
        layouts = iter(nested)
    else:
        tuple_shape = shape_of(tuple_value)
        attrs = f.arg_attrs if "arg_attrs" in f.attributes else None
        layouts = iter(leaf_layouts(attrs, ir.BlockArgument(tuple_value).arg_number, tuple_shape))
    index = ir.IntegerAttr(owner.operation.attributes["index"]).value
    parts = [[next(layouts) for leaf in element.flatten() if leaf.is_array()]
             for element in tuple_shape.tuple_shapes]
    return parts[index]


def _result_leaf_layouts(f: func.FuncOp) -> list[tuple[int, ...] | None]:
    """The layout each non-token result leaf is written in: the result's declared layout for
    an array result that has one, else that of the parameter it returns, if any."""
    block = f.entry_block
    arg_layouts = _layouts(f.arg_attrs if "arg_attrs" in f.attributes else None,
                           len(block.arguments))
    declared = _layouts(f.result_attrs if "res_attrs" in f.attributes else None, 1)[0]
    ret = block.operations[len(block.operations) - 1]
    layouts = [layout for v in ret.operands for layout in _returned_layouts(v, f, arg_layouts)]
    if declared is not None and len(layouts) == 1:
        return [declared]
    return layouts


def entry_result_shape(module: ir.Module, result: Shape, entry: str = "main") -> Shape:
    """`result` (the entry's declared result shape) with the layouts its leaves are written
    in: an array leaf that returns a parameter keeps that parameter's layout, also inside
    tuples, whose leaf layouts the function type cannot carry."""
    f = next(op.operation.opview for op in module.body.operations
             if op.operation.name == "func.func"
             and ir.StringAttr(op.operation.attributes["sym_name"]).value == entry)
    layouts = iter(_result_leaf_layouts(f))

    def build(shape: Shape) -> Shape:
        if shape.is_tuple():
            return Shape.tuple([build(s) for s in shape.tuple_shapes])
        if not shape.is_array():
            return shape
        layout = next(layouts)
        return shape if layout is None else shape.with_layout(layout)

    return build(result)


def rewrite_entry(f: func.FuncOp, dynamic_strides: bool = False) -> list[Shape]:
    """Rewrite `f` in place to the destination-passing boundary; returns the leaf shapes
    of its results, in order. With `dynamic_strides` the inputs accept any strides (the
    variant the runtime uses for strided numpy views)."""
    block = f.entry_block
    old_args = list(block.arguments)
    arg_attrs = f.arg_attrs if "arg_attrs" in f.attributes else None
    # Before the parameters are replaced below: the layouts follow returned parameters.
    result_layouts = _result_leaf_layouts(f)
    new_inputs: list[ir.Type] = []
    first_op = block.operations[0] if len(block.operations) else None
    with ir.InsertionPoint(first_op) if first_op is not None else ir.InsertionPoint(block):
        for index, arg in enumerate(old_args):
            arg_shape = shape_of(arg)
            leaves = arg_shape.flatten() if arg_shape.is_tuple() else [arg_shape]
            tensors = []
            for leaf, layout in zip(leaves, leaf_layouts(arg_attrs, index, arg_shape), strict=True):
                mtype = memref_type(leaf, layout, dynamic_strides)
                new_inputs.append(mtype)
                memref = block.add_argument(mtype, arg.location)
                tensor_type = signless_type(ir.Type.parse(_tensor_text(leaf)))
                loaded = bufferization.to_tensor(tensor_type, memref, restrict=True)
                tensors.append(cast(loaded, ir.Type.parse(_tensor_text(leaf))))
            replacement = tensors[0] if not arg_shape.is_tuple() else rebuild_tuple(tensors, arg.type)
            arg.replace_all_uses_with(replacement)
    ret = block.operations[len(block.operations) - 1]
    result_leaves: list[Shape] = []
    new_outputs: list[ir.Type] = []
    with ir.InsertionPoint(ret):
        # Tokens carry no data: they get no output buffer (the runtime returns None).
        values = [leaf for v in ret.operands for leaf in tuple_leaves(v)
                  if not str(leaf.type).startswith("!xhlo.token")]
        for value, layout in zip(values, result_layouts, strict=True):
            leaf = shape_of(value)
            mtype = memref_type(leaf, layout)
            new_outputs.append(mtype)
            result_leaves.append(leaf if layout is None else leaf.with_layout(layout))
            out = block.add_argument(mtype, value.location)
            bufferization.materialize_in_destination(
                None, cast(value, signless_type(value.type)), out, restrict=True, writable=True)
        func.ReturnOp([])
    ret.erase()
    for _ in old_args:
        block.erase_argument(0)
    f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(new_inputs + new_outputs, []))
    for name in ("arg_attrs", "res_attrs"):
        if name in f.attributes:
            del f.attributes[name]
    f.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    return result_leaves


def result_leaf_shapes(result: Shape) -> list[Shape]:
    """The arrays the entry point writes, in order, with the layouts it writes them in
    (`result` as `entry_result_shape` gives it)."""
    if result.is_token():
        return []
    if not result.is_tuple():
        return [result]
    return [leaf for leaf in result.flatten() if leaf.is_array()]
