"""Vectorization of the affine loop nests, guarded against what the vectorizer cannot do.

`affine-super-vectorize` reports "NYI: non-trivial layout map" as an error yet
succeeds on memrefs with strided layouts (our non-default-layout parameters
and the strided-input variant); the Python bindings abort the process on such
an unconsumed error. So the pass runs only on functions whose affine memory
accesses all use identity layouts. Imports generic_attrs.
"""

from __future__ import annotations

import os
import re
from typing import Any

from mlir import ir
from mlir.dialects.transform import interpreter

from ...dialect.context import parsed_once
from .. import pass_managers
from .generic_attrs import iterator_kinds

VECTOR_SIZE = 16  # f32 lanes: one AVX-512 register, two AVX2 ones (LLVM splits them)
_AFFINE_ACCESS = ("affine.load", "affine.store", "affine.vector_load", "affine.vector_store")


def _unsafe_access(op: Any) -> bool:
    """A layout the vectorizer rejects, or an access map whose innermost index is not
    a plain loop index: the vectorizer reads `x[2 * i]` and `x[19 - i]` as if they were
    `x[i]`, contiguous and forward."""
    if op.name not in _AFFINE_ACCESS:
        return False
    for value in op.operands:
        text = str(value.type)
        if text.startswith("memref<") and ("strided<" in text or "affine_map" in text):
            return True
        # An index computed by an op (an affine.apply of `2 * i + k`) hides its stride from
        # the map; only loop indices and constants are safe.
        if str(value.type) == "index" and not isinstance(value.owner, ir.Block) \
                and value.owner.operation.name != "arith.constant":
            return True
    if "map" not in op.attributes:
        return False
    results = str(op.attributes["map"]).split("->", 1)[1]
    innermost = results.strip(" ()>").split(",")[-1]
    # Strides, reversals (-d + c) and divisions are all read forward and contiguous.
    return any(token in innermost for token in ("*", "-", "floordiv", "mod", "ceildiv"))


# The vectorizer pads a partial vector with ub.poison lanes; an integer division with a
# poison divisor is undefined behaviour in LLVM, which then miscompiles the real lanes too.
_INTEGER_DIVISION = frozenset({"arith.divsi", "arith.divui", "arith.remsi", "arith.remui",
                               "arith.ceildivsi", "arith.ceildivui", "arith.floordivsi"})


def _has_strided_access(op: Any) -> bool:
    """Whether the function holds what the affine vectorizer gets wrong: a strided access,
    or an integer division (which the linalg-level schedule vectorizes safely instead)."""
    found = [False]

    def visit(inner: Any) -> ir.WalkResult:
        if _unsafe_access(inner) or inner.name in _INTEGER_DIVISION:
            found[0] = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found[0]


def super_vectorize(op: Any, pass_: Any) -> None:
    """affine-super-vectorize on every function that it can handle."""
    # Single-iteration loops left by fusion make the vectorizer emit invalid writes.
    pipeline = (f"affine-loop-normalize{{promote-single-iter=true}},"
                f"affine-super-vectorize{{virtual-vector-size={VECTOR_SIZE}}}")
    for func_op in op.regions[0].blocks[0].operations:
        if func_op.operation.name != "func.func" or _has_strided_access(func_op.operation):
            continue
        pass_managers.ours(pipeline, op.context, "func.func").run(func_op.operation)


_HOIST_SCRIPT = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.structured.hoist_redundant_vector_transfers %f {verify_non_zero_trip}
      : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}"""


def hoist_vector_accumulators(op: Any, pass_: Any) -> None:
    """A vector read and written back at the same place in every trip of a loop (an
    accumulator: the vectorized vecmat y[n] += x[k] W[k, n] over k) is read before the
    loop and written after it, so it stays in a register: each trip had waited on the
    store of the one before (x f32[512] times W f32[512,512]: 50 -> 22 us). Upstream's
    hoisting, which moves a pair only if nothing else in the loop touches its memory;
    the same operations in the same order: the same bits."""
    script = parsed_once(op.context, _HOIST_SCRIPT)
    interpreter.apply_named_sequence(op, script.body.operations[0], script)


# ---------------------------------------------------------------- linalg-level schedules
#
# Elementwise (all-parallel) and reduction generics on buffers are tiled and
# vectorized by a transform-dialect script before the affine path sees them:
# the outermost dimension is split across cores (scf.forall -> async runtime)
# when the op is large, the innermost dimension is tiled by the vector width and
# peeled (full tiles vectorize, the remainder becomes scalar loops), and reduction
# dimensions are tiled so one vector.multi_reduction folds several rows at once.
# Whatever this does not match (strided layouts, gathers, index arithmetic in
# maps, exotic bodies) stays on the affine super-vectorizer path.

SCHEDULE_ATTR = "xlamlir.vectorize"
VECTOR_WIDTH = 16  # elements per vector tile of the innermost dimension
REDUCTION_TILE = 8  # reduction rows folded per vector step
# Work (elements x body ops) above which an op is split across cores: the async
# runtime's dispatch costs a few microseconds.
PARALLEL_MIN_WORK = 1 << 18
MAX_THREADS = 8


def threads() -> int:
    """The cores this process may run on (its affinity: `taskset`, a container's cpuset),
    at most MAX_THREADS. Only the split of an outermost parallel loop depends on it, so
    only the speed does, never a result."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, MAX_THREADS))


_VECTORIZABLE_BODY = ("arith.", "math.")
# The iteration indices and affine functions of them (a mask `iota < size` fused into a
# reduction, issue #17): linalg's vectorizer turns linalg.index into vector.step along the
# innermost tile (a broadcast elsewhere), and expands affine.apply into arith ops first.
# Tiling rewrites linalg.index i as affine.apply(index + tile offset), so both must pass.
_INDEX_OPS = frozenset({"linalg.index", "affine.apply"})
_ELEMENT_TYPES = ("f32", "f64", "i32", "i64", "i16", "i8", "f16", "bf16")
_MAP = re.compile(r"affine_map<\(([^)]*)\)\s*->\s*\(([^)]*)\)>")


def _map_dims(attr: str) -> tuple[list[str], list[str]] | None:
    m = _MAP.fullmatch(attr.strip())
    if m is None:
        return None
    dims = [d.strip() for d in m.group(1).split(",") if d.strip()]
    results = [r.strip() for r in m.group(2).split(",") if r.strip()]
    return dims, results


def _loop_ranges(op: Any) -> list[int] | None:
    """Static loop bounds of a linalg.generic on identity-layout buffers whose maps are
    projected permutations (broadcasts, transposes); None when the schedule does not apply."""
    maps = [str(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    ranges: dict[int, int] = {}
    n_dims = None
    for value, text in zip(op.operands, maps):
        type_text = str(value.type)
        if not type_text.startswith("memref<") or "affine_map" in type_text \
                or ("strided<" in type_text and not _rows_of_contiguous(value.type)):
            return None
        parsed = _map_dims(text)
        if parsed is None:
            return None
        dims, results = parsed
        n_dims = len(dims)
        shape = ir.MemRefType(value.type).shape
        if any(s < 0 for s in shape) or len(shape) != len(results):
            return None
        if str(ir.MemRefType(value.type).element_type) not in _ELEMENT_TYPES:
            return None
        seen = set()
        for size, result in zip(shape, results):
            if result not in dims or result in seen:  # constants or expressions: not a permutation
                return None
            seen.add(result)
            ranges[dims.index(result)] = size
    if n_dims is None or len(ranges) != n_dims or n_dims == 0:
        return None
    return [ranges[d] for d in range(n_dims)]


def _rows_of_contiguous(t: ir.Type) -> bool:
    """Whether a strided memref (a block of rows, lowering/passes/row_fusion.py) has
    static strides, the innermost 1: vectors along it load as from an identity layout."""
    strides, _ = ir.MemRefType(t).get_strides_and_offset()
    return bool(strides) and strides[-1] == 1 and all(s >= 0 for s in strides)


def _body_ok(op: Any) -> tuple[bool, int]:
    count = 0
    for inner in op.regions[0].blocks[0].operations:
        name = inner.operation.name
        if name == "linalg.yield":
            continue
        if name in _INDEX_OPS:
            continue  # address arithmetic, not work per element
        if not name.startswith(_VECTORIZABLE_BODY):
            return False, 0
        count += 1
    return True, count


def _plan(op: Any) -> dict[str, Any] | None:
    if op.name != "linalg.generic" or SCHEDULE_ATTR in op.attributes:
        return None
    ranges = _loop_ranges(op)
    if ranges is None:
        return None
    ok, body_ops = _body_ok(op)
    if not ok:
        return None
    kinds = iterator_kinds(op)
    # The innermost loop must be parallel (vectors along memory); reductions go outer.
    if kinds[-1] != "parallel":
        return None
    last = ranges[-1]
    if last < 4:
        return None  # too narrow for vectors: the affine path does as well
    width = VECTOR_WIDTH if last >= VECTOR_WIDTH else last
    tiles = []
    for size, kind in zip(ranges[:-1], kinds[:-1]):
        if kind == "reduction":
            tiles.append(next(t for t in (REDUCTION_TILE, 4, 2, 1) if size % t == 0))
        else:
            tiles.append(1)
    tiles.append(width)
    # A lane accumulation (reduce.py's lane split: [rows, chunks, lanes] with a reduction
    # loop over the chunks and the lanes exactly one vector): the chunk loop is tiled by
    # one, unit loops dropped, and the body vectorizes as an elementwise op whose
    # accumulator read/write the loop then carries in registers. Any combiner body works
    # (the exact float max/min are several ops, which linalg's reduction vectorizer
    # cannot match). Other reductions need one combiner op for vector.multi_reduction.
    reductions = [k for k, kind in enumerate(kinds) if kind == "reduction"]
    accumulate = (bool(reductions) and last == width and len(ranges) >= 2
                  and reductions == list(range(reductions[0], len(ranges) - 1)))
    if accumulate:
        tiles = [1] * (len(ranges) - 1) + [0]
    elif reductions and not _single_combiner(op):
        return None
    work = 1
    for size in ranges:
        work *= size
    work *= max(1, body_ops)
    split = None
    cores = threads()
    if cores > 1 and work >= PARALLEL_MIN_WORK and kinds[0] == "parallel":
        if len(ranges) == 1:
            chunk = -(-ranges[0] // (cores * width)) * width
        else:
            chunk = -(-ranges[0] // cores)
        if chunk < ranges[0]:
            split = chunk
    return {"ranges": ranges, "tiles": tiles, "width": width, "split": split,
            "accumulate": accumulate}


def _single_combiner(op: Any) -> bool:
    """Whether every output of a reduction generic is yielded by one op that combines the
    output's block argument (what linalg's vectorizer matches as a reduction)."""
    block = op.regions[0].blocks[0]
    outs = list(block.arguments)[len(block.arguments) - _num_outputs(op):]
    yielded = list(block.operations)[-1].operands
    for out, value in zip(outs, yielded):
        owner = value.owner
        if isinstance(owner, ir.Block) or out not in list(owner.operands):
            return False
        if sum(1 for _ in out.uses) != 1:
            return False
        # The combined value must vary along the reduction: linalg's vectorizer adds a value
        # defined outside the body (a folded broadcast constant: reduce_window's sum of ones)
        # once per output instead of once per reduction step.
        if not all(v == out or _defined_in(v, block) for v in owner.operands):
            return False
    return True


def _defined_in(value: ir.Value, block: ir.Block) -> bool:
    """Whether `value` is an argument of `block` or a result of one of its operations."""
    if any(value == arg for arg in block.arguments):
        return True
    return any(value == result for op in block.operations for result in op.results)


def _num_outputs(op: Any) -> int:
    segments = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
    return segments[1]


def _script(i: int, plan: dict[str, Any]) -> str:
    ranges, tiles, width, split = plan["ranges"], plan["tiles"], plan["width"], plan["split"]
    any_op = "!transform.any_op"
    lines = [f'%g{i} = transform.structured.match ops{{["linalg.generic"]}} '
             f'attributes {{{SCHEDULE_ATTR} = {i} : i64}} in %root : ({any_op}) -> {any_op}']
    target = f"%g{i}"
    if split is not None:
        sizes = [split] + [0] * (len(ranges) - 1)
        lines.append(f"%p{i}, %forall{i} = transform.structured.tile_using_forall {target} "
                     f"tile_sizes {sizes} : ({any_op}) -> ({any_op}, {any_op})")
        target = f"%p{i}"
    loops = sum(1 for t in tiles if t)
    if plan["accumulate"]:
        inner = f"%l{i}#{loops - 1}"  # the innermost reduction loop
        lines += [
            f"%t{i}, %l{i}:{loops} = transform.structured.tile_using_for {target} "
            f"tile_sizes {tiles} : ({any_op}) -> ({any_op}{f', {any_op}' * loops})",
            f"transform.apply_patterns to {inner} {{ "
            "transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices } "
            f": {any_op}",
            f'%v{i} = transform.structured.match ops{{["linalg.generic"]}} in {inner} : '
            f"({any_op}) -> {any_op}",
            f"transform.structured.vectorize %v{i} : {any_op}",
            # The transfers index the buffers themselves, not subviews (hoisting skips
            # views), so that the function-wide hoisting (_HOIST) keeps the
            # accumulator in registers across the chunk loop.
            f"transform.apply_patterns to {inner} {{ "
            "transform.apply_patterns.memref.fold_memref_alias_ops } "
            f": {any_op}",
            f"transform.apply_licm to {inner} : {any_op}",
        ]
        return "\n".join(lines) + "\n"
    lines.append(f"%t{i}, %l{i}:{loops} = transform.structured.tile_using_for {target} "
                 f"tile_sizes {tiles} : ({any_op}) -> ({any_op}{f', {any_op}' * loops})")
    # The innermost tile has a remainder when the dimension (or the core's chunk of it)
    # is not a multiple of the vector width: peel it off as scalar loops (masked vectors
    # of these bodies do not always vectorize).
    inner_extent = split if (split is not None and len(ranges) == 1) else ranges[-1]
    remainder = (ranges[-1] % width != 0) or (split is not None and len(ranges) == 1
                                               and ranges[0] % split != 0) or inner_extent % width != 0
    if remainder:
        lines += [
            f'%inner{i} = transform.cast %l{i}#{loops - 1} : {any_op} to !transform.op<"scf.for">',
            f"%main{i}, %rest{i} = transform.loop.peel %inner{i} : "
            f'(!transform.op<"scf.for">) -> ({any_op}, {any_op})',
            # Folds the full tiles' sizes (affine.apply of constants) to static ones.
            f"transform.apply_patterns to %main{i} {{ transform.apply_patterns.canonicalization }}"
            f" : {any_op}",
            f'%gm{i} = transform.structured.match ops{{["linalg.generic"]}} in %main{i} : '
            f"({any_op}) -> {any_op}",
            f'%gr{i} = transform.structured.match ops{{["linalg.generic"]}} in %rest{i} : '
            f"({any_op}) -> {any_op}",
            f"transform.structured.vectorize %gm{i} : {any_op}",
            f"transform.structured.convert_to_loops %gr{i} : ({any_op}) -> {any_op}",
        ]
    else:
        lines.append(f"transform.structured.vectorize %t{i} : {any_op}")
    return "\n".join(lines) + "\n"


_CLEANUP = """
%funcs = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
transform.apply_patterns to %funcs {
  transform.apply_patterns.vector.lower_masked_transfers
  transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerparallel"
  transform.apply_patterns.vector.transfer_permutation_patterns
  transform.apply_patterns.vector.cast_away_vector_leading_one_dim
  transform.apply_patterns.canonicalization
} : !transform.any_op
"""


# Accumulators read and written by every iteration of a loop (at loop-invariant indices)
# become loop-carried vectors: one read before the loop, one write after it.
# CSE first: tiling inside a forall computes the row index once per use.
_HOIST = """
transform.apply_cse to %funcs : !transform.any_op
%hoisted = transform.structured.hoist_redundant_vector_transfers %funcs
  : (!transform.any_op) -> !transform.any_op
"""


def schedule_vectorize(op: Any, pass_: Any) -> None:
    """Tile, split across cores and vectorize the elementwise and reduction generics."""
    found: list[tuple[Any, dict[str, Any]]] = []

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name == "linalg.generic":
            plan = _plan(inner)
            if plan is not None:
                found.append((inner, plan))
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    if not found:
        return
    context = op.context
    i64 = ir.IntegerType.get_signless(64, context)
    body = []
    for i, (generic, plan) in enumerate(found):
        generic.attributes[SCHEDULE_ATTR] = ir.IntegerAttr.get(i64, i)
        body.append(_script(i, plan))
    hoist = _HOIST if any(plan["accumulate"] for _, plan in found) else ""
    text = ("module attributes {transform.with_named_sequence} {\n"
            "transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {\n"
            + "".join(body) + _CLEANUP + hoist + "transform.yield\n}\n}\n")
    with context:
        script = ir.Module.parse(text)
        interpreter.apply_named_sequence(op, script.body.operations[0], script)
