"""Large loop nests of a large entry function as functions of their own, so that the
split JIT can balance its two engines (runtime/split_jit.py).

The JIT compiles a program in two ExecutionEngines at once, the second taking whole
functions (the parallel loops' bodies). A program whose code is mostly its entry
function compiled on one thread whatever the split: an fft's `main` (1,200-1,500 LLVM
operations, its parallel bodies 260 each), an RNN's (all of it: one while loop). Here,
in the "loops" stage, in a public function of at least FUNCTION_MIN_OPS operations
holding at least FUNCTION_SHARE of the module's, every `scf.for` nest of at least
NEST_MIN_OPS operations and at most half the function becomes a private function
`<function>_nest_<i>(captured values) -> (the loop's results)` called in its place: a
candidate for the second engine. Nests larger than half their function are entered and
their own nests taken instead. A nest that stays with its caller is inlined back by LLVM
(a private function with one call), so an unsplit program compiles to what it did.
Measured (interleaved A/B, JIT ms): RNN 106/112 -> 80/76, fft c64[1M] 105/107 -> 86/76,
rfft 110/110 -> 81/80; their run times unchanged (0.447 vs 0.448 ms, 19.60 vs 19.53,
7.17 vs 7.16, in one process, with and without the pass).

Not outlined: a nest reading or yielding f16/bf16 values (or vectors of them: see
`_narrow_float`), the parallel loops' bodies' nests (called per block of iterations: a
max-pool gradient's ran 15% slower through the call; the softmax's and attention's
compiled slower with the extra calls), a nest that allocates on the stack
(`memref.alloca`: its memory would not outlive the call) or yields a memref. Moving
code between functions changes no arithmetic: the same bits. Imports parallel_tasks
(the values a loop reads).
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import func

from .parallel_tasks import outside_values, public_function

NEST_MIN_OPS = 60
FUNCTION_MIN_OPS = 200
FUNCTION_SHARE = 0.6
_STACK = ("memref.alloca", "memref.alloca_scope")


def _size(op: Any) -> int:
    count = [0]

    def visit(_: Any) -> ir.WalkResult:
        count[0] += 1
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return count[0]


def _movable(loop: Any) -> bool:
    if any(isinstance(r.type, ir.MemRefType) for r in loop.results):
        return False
    found = [False]

    def visit(op: Any) -> ir.WalkResult:
        if op.name in _STACK:
            found[0] = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return not found[0]


def _nests(block: Any, half: int, found: list[Any]) -> None:
    for op in block.operations:
        op = op.operation
        size = _size(op)
        if size < NEST_MIN_OPS:
            continue
        if op.name == "scf.for" and size <= half and _movable(op):
            found.append(op)
            continue
        for region in op.regions:
            for inner in region.blocks:
                _nests(inner, half, found)


def _narrow_float(t: ir.Type) -> bool:
    """A float narrower than f32, or a vector of them: such a value passed to a call or
    returned may be widened and narrowed again by the CPU's calling convention (a
    signaling NaN quieted), where the pipeline guarantees it only moves bits."""
    element = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
    return isinstance(element, ir.FloatType) and element.width < 32


def _outline(loop: Any, function: Any, name: str) -> bool:
    captured, sunk, reads = outside_values(loop)
    results = [r.type for r in loop.results]
    if any(_narrow_float(t) for t in [*results, *(v.type for v in captured)]):
        return False
    with loop.location:
        with ir.InsertionPoint.after(function):
            nest = func.FuncOp(name, ir.FunctionType.get([v.type for v in captured], results),
                               visibility="private")
        with ir.InsertionPoint(loop):
            call = func.CallOp(results, ir.FlatSymbolRefAttr.get(name), captured)
        for old, new in zip(loop.results, call.results):
            old.replace_all_uses_with(new)
        entry = nest.add_entry_block()
        mapping: dict[ir.Value, ir.Value] = dict(zip(captured, entry.arguments))
        with ir.InsertionPoint(entry):
            for op in sunk:
                mapping[op.results[0]] = op.clone().results[0]
            done = func.ReturnOp(list(loop.results))
    loop.move_before(done)
    for owner, k, value in reads:
        owner.operands[k] = mapping[value]
    for k, value in enumerate(list(loop.operands)):
        if value in mapping:
            loop.operands[k] = mapping[value]
    return True


def outline_loop_nests(module_op: Any, pass_: Any) -> None:
    """See the module docstring."""
    module = module_op.operation if hasattr(module_op, "operation") else module_op
    functions = [op.operation for op in module.regions[0].blocks[0].operations
                 if op.operation.name == "func.func" and len(op.regions[0].blocks)]
    sizes = [_size(function) for function in functions]
    total = sum(sizes)
    for function, size in zip(functions, sizes):
        if size < FUNCTION_MIN_OPS or size < total * FUNCTION_SHARE or not public_function(function):
            continue
        found: list[Any] = []
        _nests(function.regions[0].blocks[0], size // 2, found)
        name = ir.StringAttr(function.attributes["sym_name"]).value
        count = 0
        for loop in found:
            count += _outline(loop, function, f"{name}_nest_{count}")
