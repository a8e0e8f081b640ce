"""Matmuls whose loops a reshape split, put back into the form the matmul schedule takes.

`linalg-fuse-elementwise-ops` (the "fused" stage) folds a `tensor.collapse_shape`
producing an operand of a linalg.matmul, or a `tensor.expand_shape` of its result,
into the op by expanding its loops: `dot(reshape(x), w)` of an MLP's flatten becomes
a linalg.generic with two K loops, `reshape(dot(x, w))` one with two N loops. The
"tiled" stage recognizes only one M, N and K loop (`schedules._matmul_layout`), so
such a product stayed a plain loop nest, ~20x slower than the scheduled kernel.

`collapse_split_contractions` finds every such multiply-accumulate generic (f32,
static shapes, zero-filled output) whose batch, M, N and K loops each form one
contiguous run, in the same order, in every operand it indexes, and rebuilds it over
one loop per role on collapsed views of its operands (`tensor.collapse_shape`, folded
into the expand_shape it undoes where there is one) with the result expanded back:
the generic of a matmul (or batch matmul, either operand transposed) that the
schedule handles. When the reshape was propagated through an elementwise consumer
(dense -> bias -> relu -> reshape), that consumer is collapsed the same way if each of
its inputs reads every split group whole or not at all, so the schedule fuses it as
the product's epilogue again. Only views are added: no copy. Imports generic_attrs.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from .generic_attrs import all_parallel, indexing_maps, iterator_kinds

# A loop's role from the operands that index it (A, B, C).
_ROLES = {(True, True, True): "b", (True, False, True): "m", (False, True, True): "n",
          (True, True, False): "k"}
# The role orders of each operand the schedule accepts (batch roles lead, when present).
_A_ORDERS, _B_ORDERS, _C_ORDERS = (("m", "k"), ("k", "m")), (("k", "n"), ("n", "k")), (("m", "n"),)


def _dims(m: ir.AffineMap) -> list[int] | None:
    """The loop of each result of `m`, or None unless every result is a plain loop."""
    found = []
    for r in m.results:
        try:
            found.append(ir.AffineDimExpr(r).position)
        except ValueError:  # not a plain loop
            return None
    return found if len(set(found)) == len(found) else None


def _multiply_accumulate(op: Any) -> bool:
    """Body `out + a * b` over f32 (either order of the operands)."""
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    if [o.name for o in body] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return False
    args = list(block.arguments)
    mul, add = body[0], body[1]
    return ({mul.operands[0], mul.operands[1]} == {args[0], args[1]}
            and {add.operands[0], add.operands[1]} == {args[2], mul.results[0]}
            and body[2].operands[0] == add.results[0])


def _runs(dims: list[int], role: dict[int, str]) -> list[tuple[str, list[int]]] | None:
    """`dims` cut into runs of one role each; None if a role comes back after another."""
    runs: list[tuple[str, list[int]]] = []
    for d in dims:
        if runs and runs[-1][0] == role[d]:
            runs[-1][1].append(d)
        elif any(r == role[d] for r, _ in runs):
            return None
        else:
            runs.append((role[d], [d]))
    return runs


def _plan(op: Any) -> list[list[tuple[str, list[int]]]] | None:
    """The role runs of A, B and C of a split matmul `op`, or None."""
    if op.name != "linalg.generic" or len(op.operands) != 3 or len(op.results) != 1:
        return None
    if not all(isinstance(v.type, ir.RankedTensorType) and ir.RankedTensorType(v.type).has_static_shape
               and isinstance(ir.RankedTensorType(v.type).element_type, ir.F32Type) for v in op.operands):
        return None
    fill = op.operands[2].owner
    if isinstance(fill, ir.Block) or fill.name != "linalg.fill" or not _multiply_accumulate(op):
        return None
    maps = [_dims(m) for m in indexing_maps(op)]
    if any(m is None for m in maps):
        return None
    iterators = [k == "reduction" for k in iterator_kinds(op)]
    role: dict[int, str] = {}
    for d, reduction in enumerate(iterators):
        r = _ROLES.get(tuple(d in m for m in maps))
        if r is None or reduction != (r == "k"):
            return None
        role[d] = r
    runs = [_runs(m, role) for m in maps]
    if any(r is None for r in runs) or len(set(role.values()) - {"b"}) != 3:
        return None
    # Each role's loops in one order in every operand: the collapsed index is one.
    order: dict[str, list[int]] = {}
    for operand in runs:
        for r, loops in operand:
            if order.setdefault(r, loops) != loops:
                return None
    for operand, allowed in zip(runs, (_A_ORDERS, _B_ORDERS, _C_ORDERS)):
        roles = tuple(r for r, _ in operand)
        if roles[:1] == ("b",):
            roles = roles[1:]
        elif "b" in roles:
            return None
        if roles not in allowed:
            return None
    if all(len(loops) == 1 for loops in order.values()):
        return None  # one loop per role: the schedule takes it as it is (or not at all)
    return runs


def _collapse(value: ir.Value, runs: list[tuple[str, list[int]]]) -> ir.Value:
    """`value` with each run's dimensions merged (the source of the expand_shape this
    undoes, when it is one)."""
    groups, at = [], 0
    for _, loops in runs:
        groups.append(list(range(at, at + len(loops))))
        at += len(loops)
    if all(len(g) == 1 for g in groups):
        return value
    t = ir.RankedTensorType(value.type)
    shape = [1] * len(groups)
    for i, g in enumerate(groups):
        for j in g:
            shape[i] *= t.shape[j]
    owner = value.owner
    if (not isinstance(owner, ir.Block) and owner.name == "tensor.expand_shape"
            and list(ir.RankedTensorType(owner.operands[0].type).shape) == shape):
        return owner.operands[0]
    return tensor.collapse_shape(ir.RankedTensorType.get(shape, t.element_type), value, groups)


def _rebuild(op: Any, runs: list[list[tuple[str, list[int]]]]) -> None:
    a_runs, b_runs, c_runs = runs
    fill = op.operands[2].owner
    with ir.InsertionPoint(op), op.location:
        a, b = _collapse(op.operands[0], a_runs), _collapse(op.operands[1], b_runs)
        init = _collapse(fill.operands[1], c_runs)
        c = linalg.fill(fill.operands[0], outs=[init])
        c = c if isinstance(c, ir.Value) else c.results[0]
        roles = [r for r, _ in c_runs] + ["k"]
        d = {r: ir.AffineDimExpr.get(i) for i, r in enumerate(roles)}
        maps = [ir.AffineMap.get(len(roles), 0, [d[r] for r, _ in operand])
                for operand in (a_runs, b_runs, c_runs)]
        new = linalg.GenericOp_([a, b], [c], maps, ["parallel"] * (len(roles) - 1) + ["reduction"])
        with ir.InsertionPoint(new.regions[0].blocks[0]):
            x, y, acc = new.regions[0].blocks[0].arguments
            linalg.YieldOp([arith.addf(acc, arith.mulf(x, y))])
        result = new.results[0]
        groups, at = [], 0
        for _, loops in c_runs:
            groups.append(list(range(at, at + len(loops))))
            at += len(loops)
        if any(len(g) > 1 for g in groups):
            shape = list(ir.RankedTensorType(op.results[0].type).shape)
            result = tensor.expand_shape(op.results[0].type, result, groups, [], shape)
    op.results[0].replace_all_uses_with(result)
    op.erase()
    if not list(fill.results[0].uses):
        init = fill.operands[1].owner
        fill.erase()
        # The fill's expanded init, left dead, would be a second use of the empty tensor
        # under it: `schedules._write_into_outputs` then would not make it the output.
        if (not isinstance(init, ir.Block) and init.name == "tensor.expand_shape"
                and not list(init.results[0].uses)):
            init.erase()
    if any(len(g) > 1 for g in groups):
        _collapse_epilogue(result, groups)


def _epilogue_groups(ep: Any, groups: list[list[int]]) -> list[list[list[int]]] | None:
    """For each input of the elementwise `ep` (loops = the product's expanded dimensions),
    the groups of loops its dimensions form, in order; None unless every input reads each
    group whole and in order, or not at all."""
    maps = [_dims(m) for m in indexing_maps(ep)]
    if any(m is None for m in maps) or maps[-1] != list(range(sum(len(g) for g in groups))):
        return None
    found = []
    for dims in maps[:-1]:
        taken, at = [], 0
        while at < len(dims):
            group = next((g for g in groups if g[0] == dims[at]), None)
            if group is None or dims[at:at + len(group)] != group:
                return None
            taken.append(group)
            at += len(group)
        found.append(taken)
    return found


def _collapse_epilogue(product: ir.Value, groups: list[list[int]]) -> None:
    """The elementwise consumer of the expanded product (a bias and activation the reshape
    was propagated through) rebuilt over the collapsed dimensions, reading the product
    directly: the schedule then fuses it as the product's epilogue."""
    uses = list(product.uses)
    if len(uses) != 1:
        return
    ep = uses[0].owner
    if ep.name != "linalg.generic" or len(ep.results) != 1 or uses[0].operand_number >= len(ep.operands) - 1:
        return
    if not all_parallel(ep):
        return
    init = ep.operands[len(ep.operands) - 1].owner
    block = ep.regions[0].blocks[0]
    if isinstance(init, ir.Block) or init.name != "tensor.empty" or list(block.arguments[-1].uses):
        return
    if any(o.name == "linalg.index" for o in block.operations):
        return
    inputs = _epilogue_groups(ep, groups)
    if inputs is None:
        return
    position = {g[0]: i for i, g in enumerate(groups)}
    with ir.InsertionPoint(ep), ep.location:
        values, maps = [], []
        for value, taken in zip(list(ep.operands)[:-1], inputs):
            runs = [("", g) for g in taken]
            values.append(product.owner.operands[0] if value == product else _collapse(value, runs))
            loops = [ir.AffineDimExpr.get(position[g[0]]) for g in taken]
            maps.append(ir.AffineMap.get(len(groups), 0, loops))
        maps.append(ir.AffineMap.get_identity(len(groups)))
        out_type = ir.RankedTensorType(product.owner.operands[0].type)
        element = ir.RankedTensorType(ep.results[0].type).element_type
        empty = tensor.EmptyOp(list(out_type.shape), element).result
        new = linalg.GenericOp_(values, [empty], maps, ["parallel"] * len(groups))
        new_block = new.regions[0].blocks[0]
        mapping = dict(zip(block.arguments, new_block.arguments))
        for inner in block.operations:  # the body, its operands renamed
            clone = inner.clone(ip=ir.InsertionPoint(new_block))
            for i, operand in enumerate(clone.operands):
                if operand in mapping:
                    clone.operands[i] = mapping[operand]
            for old, fresh in zip(inner.results, clone.results):
                mapping[old] = fresh
        shape = list(ir.RankedTensorType(ep.results[0].type).shape)
        result = tensor.expand_shape(ep.results[0].type, new.results[0], groups, [], shape)
    ep.results[0].replace_all_uses_with(result)
    ep.erase()
    product.owner.erase()  # its only user was ep; left, it would be a second use of the product


def collapse_split_contractions(module: Any) -> int:
    """Rebuild every split matmul in `module` (see the module docstring); how many."""
    found: list[tuple[Any, Any]] = []

    def visit(inner: Any) -> ir.WalkResult:
        runs = _plan(inner) if inner.name == "linalg.generic" else None
        if runs is not None:
            found.append((inner, runs))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op, runs in found:
        _rebuild(op, runs)
    return len(found)
