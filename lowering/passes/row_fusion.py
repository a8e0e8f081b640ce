"""Row reductions fused into their consumer: one parallel loop over blocks of rows.

After elementwise fusion a layer norm `(x - mean) * rsqrt(var + eps) * g + b` over the
last axis is five generics: the lane-split sum of x and its lane fold, the lane-split
sum of (x - mean)^2 and its fold, then the elementwise result. Each is a pass over the
whole input of its own: x (16 MB at f32[4096,1024]) is read from memory three times.
XLA:CPU's fusions do the same. `fuse_rows` tiles the last generic along its first
dimension (blocks of rows of ~ROW_BLOCK_BYTES) into one `scf.forall` and fuses every
producer it alone reads, row by row, into the loop (upstream's
`fuse_into_containing_op`): each block's rows are read from memory once and from L1
by the later generics.

Which producers: generics and fills of the same block whose every user is the root
or another fused producer (a value used elsewhere as well stays computed once, before
the loop), whose first loop is a parallel one indexing the first dimension of their
result, read by their users with that same first index. So a block of the root's rows
needs the same block of each producer's rows and nothing else: no producer is computed
twice, none for more rows than the block's. Worth it only when one of them is a
reduction (elementwise chains are one generic already).

The results are the same bits: each output element's reduction runs over the same
elements in the same order; only which rows are done when changes.
Imports vectorize (what its schedules take, the cores) and generic_attrs.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects.transform import interpreter

from .. import pass_managers
from .generic_attrs import indexing_maps, iterator_kinds
from .vectorize import _ELEMENT_TYPES, _body_ok, threads

#: Bytes of a block of the root's rows (a row of the input per reduction besides): the
#: block is reread from L1 by each fused generic.
ROW_BLOCK_BYTES = 16 << 10
#: Rows longer than this are not fused: one no longer stays in L2 between the passes.
MAX_ROW_BYTES = 128 << 10
#: Results smaller than this (elements) keep their generics: all of it is in cache anyway.
MIN_ELEMENTS = 1 << 15
#: Blocks per thread at least, so the blocks balance across cores.
MIN_BLOCKS = 8
_ATTR = "xlamlir.row_fusion"  # the root's number, and producer numbers, for the script
_PRODUCERS = ("linalg.generic", "linalg.fill")


def _first_index_is_row(m: ir.AffineMap) -> bool:
    """Whether the map's first result is the loop's first index (d0)."""
    results = list(m.results)
    return bool(results) and isinstance(results[0], ir.AffineDimExpr) and results[0].position == 0


def _static_tensor(value: ir.Value) -> ir.RankedTensorType | None:
    t = value.type
    if not isinstance(t, ir.RankedTensorType):
        return None
    return t if t.rank >= 1 and t.has_static_shape else None


def _rows_out(op: Any) -> bool:
    """Whether `op` (a generic or fill with one result) computes its result row by row:
    its first loop is parallel and indexes the result's first dimension."""
    if len(op.results) != 1 or _static_tensor(op.results[0]) is None:
        return False
    if op.name == "linalg.fill":
        return True
    return iterator_kinds(op)[0] == "parallel" and _first_index_is_row(indexing_maps(op)[-1])


def _reads_rows(user: Any, value: ir.Value) -> bool:
    """Whether every operand of `user` that is `value` is read with the first index as
    its first (fills: written whole, their rows along)."""
    if user.name == "linalg.fill":
        return True
    maps = indexing_maps(user)
    return all(_first_index_is_row(maps[k]) for k, operand in enumerate(user.operands) if operand == value)


def _vectorizes(op: Any) -> bool:
    """Whether lowering/passes/vectorize.py's schedules take `op` once its operands are
    blocks of rows (strided memrefs): else it became scalar loops on strided memrefs,
    which also keep the affine vectorizer off the whole function."""
    types = [v.type for v in [*op.operands, *op.results] if isinstance(v.type, ir.ShapedType)]
    if any(str(t.element_type) not in _ELEMENT_TYPES for t in types):
        return False
    if op.name == "linalg.fill":
        return True
    shape = ir.RankedTensorType(op.results[0].type).shape
    return _body_ok(op)[0] and iterator_kinds(op)[-1] == "parallel" and shape[-1] >= 4


def _reads_blocks_of_rows(op: Any, group: list[Any]) -> bool:
    """Whether `op` reads or writes a tensor from outside the group row-indexed, which
    the loop then gives it as a block of rows (a fresh tensor.empty gives a temporary)."""
    if op.name == "linalg.fill":
        return False
    maps = indexing_maps(op)
    for value, m in zip(op.operands, maps):
        owner = value.owner
        if not isinstance(owner, ir.Block):
            owner = owner.operation
            if owner.name == "tensor.empty" or any(owner == g for g in group):
                continue
        if _first_index_is_row(m):
            return True
    return False


def _group(root: Any, block_ops: list[Any]) -> list[Any]:
    """The producers fused with `root`, nearest first (see the module docstring)."""
    accepted: list[Any] = [root]
    rows = ir.RankedTensorType(root.results[0].type).shape[0]
    position = {op: k for k, op in enumerate(block_ops)}
    for op in reversed(block_ops[:position[root]]):
        if op.name not in _PRODUCERS or not _rows_out(op):
            continue
        result = op.results[0]
        if ir.RankedTensorType(result.type).shape[0] != rows:
            continue
        users = [use.owner for use in result.uses]
        if users and all(any(u == a for a in accepted) and _reads_rows(u, result) for u in users):
            accepted.append(op)
    return accepted[1:]


def _root_candidate(op: Any) -> bool:
    if op.name != "linalg.generic" or len(op.results) != 1 or _static_tensor(op.results[0]) is None:
        return False
    return all(k == "parallel" for k in iterator_kinds(op)) and _first_index_is_row(indexing_maps(op)[-1])


def _block_rows(result: ir.RankedTensorType, threads: int) -> int | None:
    """Rows per block (a divisor of the rows), or None when fusing does not pay."""
    shape = result.shape
    row_elements = 1
    for size in shape[1:]:
        row_elements *= size
    row_bytes = row_elements * max(1, result.element_type.width // 8) \
        if hasattr(result.element_type, "width") else row_elements * 4
    if shape[0] * row_elements < MIN_ELEMENTS or row_bytes > MAX_ROW_BYTES or shape[0] < 2:
        return None
    block = max(1, ROW_BLOCK_BYTES // max(1, row_bytes))
    while block > 1 and -(-shape[0] // block) < MIN_BLOCKS * threads:
        block //= 2
    # Whole blocks only: a partial one has dynamic sizes, which the vectorizing schedules
    # (and convert-linalg-to-affine-loops) do not take.
    return next(b for b in range(block, 0, -1) if shape[0] % b == 0)


def fuse_rows(module_op: Any, pass_: Any) -> None:
    """See the module docstring."""
    module = module_op.operation if hasattr(module_op, "operation") else module_op
    i64 = ir.IntegerType.get_signless(64)
    lines: list[str] = []
    any_op = "!transform.any_op"
    count = 0
    for function in module.regions[0].blocks[0].operations:
        if function.operation.name != "func.func" or not len(function.regions[0].blocks):
            continue
        block_ops = [op.operation for op in function.regions[0].blocks[0].operations]
        taken: set[Any] = set()
        for root in reversed(block_ops):
            if root in taken or not _root_candidate(root):
                continue
            group = _group(root, block_ops)
            if not any(op.name == "linalg.generic" and "reduction" in iterator_kinds(op) for op in group):
                continue
            members = [root, *group]
            if not all(_vectorizes(op) for op in members if _reads_blocks_of_rows(op, members)):
                continue
            rows = _block_rows(ir.RankedTensorType(root.results[0].type), threads())
            if rows is None:
                continue
            taken.update(group)
            n = count
            count += 1
            root.attributes[_ATTR] = ir.IntegerAttr.get(i64, 1000 * n)
            sizes = [rows] + [0] * (len(iterator_kinds(root)) - 1)
            lines += [
                f"%r{n} = transform.structured.match attributes {{{_ATTR} = {1000 * n} : i64}} "
                f"in %root : ({any_op}) -> {any_op}",
                f"%t{n}, %l{n} = transform.structured.tile_using_forall %r{n} tile_sizes {sizes} "
                f": ({any_op}) -> ({any_op}, {any_op})",
            ]
            for k, producer in enumerate(group, start=1):
                producer.attributes[_ATTR] = ir.IntegerAttr.get(i64, 1000 * n + k)
                lines += [
                    f"%p{n}_{k} = transform.structured.match attributes "
                    f"{{{_ATTR} = {1000 * n + k} : i64}} in %root : ({any_op}) -> {any_op}",
                    f"%f{n}_{k}, %l{n}_{k} = transform.structured.fuse_into_containing_op "
                    f"%p{n}_{k} into %l{n} : ({any_op}, {any_op}) -> ({any_op}, {any_op})",
                ]
    if not lines:
        return
    text = ("module attributes {transform.with_named_sequence} {\n"
            "transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {\n"
            + "\n".join(lines) + "\ntransform.yield\n}\n}\n")
    script = ir.Module.parse(text, module.context)
    interpreter.apply_named_sequence(module, script.body.operations[0], script)

    def clear(op: Any) -> ir.WalkResult:
        if _ATTR in op.attributes:
            del op.attributes[_ATTR]
        return ir.WalkResult.ADVANCE

    module.walk(clear)
    # The fused producers' originals are dead, and a producer two fused users read was
    # fused once per user: one copy left. Here, not in the stage: most programs have
    # nothing to fuse.
    pass_managers.ours("canonicalize,cse", module.context).run(module)
