"""Masked stores of 8/16/32-bit integer (and 16-bit float) vectors as a full store when
every lane is on, else one store per lane that is on: no `llvm.intr.masked.store` of
them reaches LLVM's x86 backend.

Why: LLVM 22's x86 backend writes past a masked store's lanes (LLVM issue #179489,
fixed after 22.1 by llvm-project PR #179853). On AVX-512 (x86-64-v4 and the hosts that
have it) a masked store of `trunc` of a wider vector becomes a truncating masked store
(vpmovdw/vpmovdb/vpmovqd); when the mask is a constant with one lane on, which LLVM
finds after unrolling a loop whose last vector has one valid element, that store becomes
a scalar store of the one element, of the untruncated type: a 4-byte `vmovd`/`vmovss` of
an i32 lane for a 1- or 2-byte element. It zeroed the next row's first elements (a
sort of u8/u16/f16 rows: lowering/ops/sort_network.py, differential fuzzer seed 1010541)
and wrote two bytes past a result's end (reduce of bf16[6,129] over dimension 0, which
computes in f32 and truncates its 16-bit patterns). Any masked store of such a type may
meet it, whatever op made it, so every one is rewritten here, after the conversion to
the LLVM dialect made them all.

The rewrite, for `llvm.intr.masked.store %v, %p, %m`:

    %all = llvm.intr.vector.reduce.and(%m)
    llvm.cond_br %all, ^full, ^lane(0)
  ^full:  llvm.store %v, %p                    (a vector store, truncating if it may)
  ^lane(%i): if %m[%i]: store %v[%i] at %p + %i; next %i until N (vectorizing disabled)

The lanes' loop runs only for a partial vector (a row's last vector, a tile's edge),
one branch per lane; LLVM unrolls it where the mask is a constant (then only the valid
lanes' stores remain). Every bulk iteration takes the vector store after a test of the
mask (kortest on AVX-512). Without AVX-512 LLVM scalarized such masked stores lane by
lane anyway (AVX2 has masked stores of 32/64-bit elements only). f32/f64 and i64 keep
their masked stores: no truncating store produces them.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import llvm

_MASKED_STORE = "llvm.intr.masked.store"
# Element widths a truncating store can write (from a wider integer vector).
_NARROW_INTEGER_WIDTHS = (8, 16, 32)
# GEP's marker for "the next dynamic index" in rawConstantIndices.
_DYNAMIC_INDEX = -(1 << 31)


def _rewritten(value_type: ir.Type) -> bool:
    element = ir.VectorType(value_type).element_type
    if isinstance(element, ir.IntegerType):
        return element.width in _NARROW_INTEGER_WIDTHS
    return isinstance(element, (ir.F16Type, ir.BF16Type))


def partial_masked_stores_by_lane(module_op: Any, pass_: Any) -> None:
    """Every masked store of a vector of 8/16/32-bit integers or 16-bit floats as a full
    store or per-lane stores (the module docstring says why)."""
    stores: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name == _MASKED_STORE and _rewritten(op.operands[0].type):
            stores.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for store in stores:
        _by_lane(store)


def _by_lane(store: Any) -> None:
    value, pointer, mask = store.operands
    vector = ir.VectorType(value.type)
    lanes, element = vector.shape[0], vector.element_type
    alignment = ir.IntegerAttr(store.attributes["alignment"]).value
    location = store.location
    block = store.block
    ops = [op.operation for op in block.operations]
    rest = ops[next(i for i, op in enumerate(ops) if op == store) + 1:]
    i64, i1 = ir.IntegerType.get_signless(64), ir.IntegerType.get_signless(1)
    done = block.create_after()
    for op in rest:
        done.append(op)
    full = done.create_before()
    lane = done.create_before(i64, arg_locs=[location])
    write = done.create_before()
    step = done.create_before()
    with location:
        with ir.InsertionPoint(store):
            every = llvm.intr_vector_reduce_and(i1, mask)
            zero = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, 0)).result
            llvm.CondBrOp(every, [], [zero], full, lane)
        with ir.InsertionPoint(full):
            llvm.StoreOp(value, pointer, alignment=alignment)
            llvm.BrOp([], done)
        index = lane.arguments[0]
        with ir.InsertionPoint(lane):
            on = llvm.ExtractElementOp(mask, index).result
            llvm.CondBrOp(on, [], [], write, step)
        with ir.InsertionPoint(write):
            scalar = llvm.ExtractElementOp(value, index).result
            address = llvm.getelementptr(
                ir.Type.parse("!llvm.ptr"), pointer, [index],
                ir.DenseI32ArrayAttr.get([_DYNAMIC_INDEX]), ir.TypeAttr.get(element),
                llvm.GEPNoWrapFlags.inbounds)
            llvm.StoreOp(scalar, address, alignment=min(alignment, element.width // 8))
            llvm.BrOp([], step)
        with ir.InsertionPoint(step):
            one = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, 1)).result
            count = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, lanes)).result
            following = llvm.AddOp(index, one, ir.Attribute.parse("#llvm.overflow<nsw, nuw>")).result
            last = llvm.ICmpOp(llvm.ICmpPredicate.eq, following, count).result
            # Not vectorized again: the loop vectorizer would make a masked store of it.
            llvm.CondBrOp(last, [], [following], done, lane, loop_annotation=_not_vectorized())
    store.erase()


def _not_vectorized() -> ir.Attribute:
    return ir.Attribute.parse(
        "#llvm.loop_annotation<vectorize = #llvm.loop_vectorize<disable = true>>")
