"""Parallel loops as plain tasks on the async runtime's thread pool, without coroutines.

Upstream's `async-parallel-for` + `async-to-async-runtime` + `convert-async-to-llvm`
turn every scf.parallel into LLVM coroutines; LLVM's coroutine passes then split and
clone them, which cost ~40 ms of JIT time per parallel loop (issue #17). The thread pool
itself needs none of that: `mlirAsyncRuntimeExecute(handle, fn)` just runs `fn(handle)`
on a worker. Two passes replace the three:

- `outline_parallel_loops` (scf level, "loops" stage): every outermost scf.parallel
  without reductions becomes a call `@<f>_parallel_<i>(total, captured...)`; its body
  moves into `@<f>_parallel_<i>_body(first, last, captured...)`, which runs the linear
  iterations [first, last) (delinearized to the loop's indices). Constants the body
  reads are copied into it (not passed: LLVM keeps seeing the static bounds). The
  dispatcher's own body calls the body function on all iterations, so without the
  second pass the program is still correct, just sequential.
- `parallel_tasks_to_llvm` (LLVM level, "llvm" stage, after convert-func-to-llvm):
  each dispatcher's body becomes: blocks = min(total, worker threads); the captured
  arguments stored in a context struct on the stack; blocks 1.. submitted with
  `mlirAsyncRuntimeExecute` to a plain trampoline that runs the body function on its
  block and counts down an atomic counter (the last one emplaces a token); the calling
  thread runs block 0 itself, then awaits the token.

Iterations are independent (scf.forall semantics), so how they are split into blocks
changes nothing in the results: they do not depend on the number of worker threads.
Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, func, scf

#: Marks a dispatcher (func.func, then llvm.func) with the name of its body function.
BODY_ATTR = "xlamlir.parallel_body"
# Ops without operands or regions copied into the body instead of passed to it.
_SINKABLE = frozenset({"arith.constant", "ub.poison", "memref.get_global", "llvm.mlir.constant",
                       "llvm.mlir.zero", "llvm.mlir.undef", "llvm.mlir.poison"})


def _op(x: Any) -> Any:
    return x.operation if hasattr(x, "operation") else x


def _defining_op(value: ir.Value) -> Any:
    if isinstance(value, ir.BlockArgument):
        return _op(value.owner.owner)
    return _op(value.owner)


def _outermost_parallel_loops(root: Any) -> list[Any]:
    found: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name == "scf.parallel":
            found.append(op)
            return ir.WalkResult.SKIP  # nested ones stay sequential loops in the task
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def outline_parallel_loops(module_op: Any, pass_: Any) -> None:
    """See the module docstring (first pass)."""
    module = _op(module_op)
    functions = [op for op in module.regions[0].blocks[0].operations
                 if op.operation.name == "func.func" and len(op.regions[0].blocks)]
    for function in functions:
        name = ir.StringAttr(function.attributes["sym_name"]).value
        loops = [loop for loop in _outermost_parallel_loops(function.operation)
                 if len(loop.operands) == 3 * len(loop.regions[0].blocks[0].arguments)]
        for i, loop in enumerate(loops):
            _outline(function.operation, loop, f"{name}_parallel_{i}")


def _outside_values(loop: Any) -> tuple[list[ir.Value], list[Any]]:
    """(values defined outside `loop` that it reads (its bounds too: the body function
    computes the trip counts), in first-use order; the sinkable ops among their
    definitions)."""
    inside: set[Any] = set()
    loop.walk(lambda op: (inside.add(op), ir.WalkResult.ADVANCE)[1])
    captured: dict[ir.Value, None] = {}
    sunk: dict[Any, None] = {}

    def visit(op: Any) -> ir.WalkResult:
        for value in op.operands:
            owner = _defining_op(value)
            if owner in inside:
                continue
            if owner.name in _SINKABLE and len(owner.operands) == 0:
                sunk[owner] = None
            else:
                captured[value] = None
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return list(captured), list(sunk)


def _trip_count(lb: ir.Value, ub: ir.Value, step: ir.Value) -> ir.Value:
    zero = arith.constant(ir.IndexType.get(), 0)
    return arith.maxsi(arith.ceildivsi(arith.subi(ub, lb), step), zero)


def _outline(function: Any, loop: Any, name: str) -> None:
    index = ir.IndexType.get()
    body = loop.regions[0].blocks[0]
    rank = len(body.arguments)
    lbs, ubs, steps = (list(loop.operands)[k * rank:(k + 1) * rank] for k in range(3))
    captured, sunk = _outside_values(loop)
    types = [v.type for v in captured]
    with loop.location:
        # The body function: first, last, then the captured values.
        with ir.InsertionPoint.after(function):
            worker = func.FuncOp(f"{name}_body", ir.FunctionType.get([index, index, *types], []),
                                 visibility="private")
            dispatcher = func.FuncOp(name, ir.FunctionType.get([index, *types], []),
                                     visibility="private")
        dispatcher.attributes[BODY_ATTR] = ir.FlatSymbolRefAttr.get(f"{name}_body")
        entry = worker.add_entry_block()
        mapping: dict[ir.Value, ir.Value] = dict(zip(captured, list(entry.arguments)[2:]))
        with ir.InsertionPoint(entry):
            for op in sunk:
                mapping[op.results[0]] = op.clone().results[0]

            def local(v: ir.Value) -> ir.Value:
                return mapping.get(v, v)

            one = arith.constant(index, 1)
            counts = [_trip_count(local(lb), local(ub), local(st)) for lb, ub, st in zip(lbs, ubs, steps)]
            linear = scf.ForOp(entry.arguments[0], entry.arguments[1], one)
            with ir.InsertionPoint(linear.body):
                rest = linear.induction_variable
                ivs: list[ir.Value] = [rest] * rank
                for d in reversed(range(rank)):
                    position = rest if d == 0 else arith.remsi(rest, counts[d])
                    if d:
                        rest = arith.divsi(rest, counts[d])
                    ivs[d] = arith.addi(local(lbs[d]), arith.muli(position, local(steps[d])))
                yield_ = scf.YieldOp([])
            func.ReturnOp([])
        for arg, iv in zip(body.arguments, ivs):
            arg.replace_all_uses_with(iv)
        for op in list(body.operations)[:-1]:  # all but the scf.reduce terminator
            op.move_before(yield_)
        # Uses of captured values and sunk constants, now inside the body function.
        moved: list[Any] = []
        linear.operation.walk(lambda op: (moved.append(op), ir.WalkResult.ADVANCE)[1])
        for op in moved:
            for k, operand in enumerate(op.operands):
                if operand in mapping:
                    op.operands[k] = mapping[operand]
        # The dispatcher: sequential until parallel_tasks_to_llvm replaces its body.
        entry = dispatcher.add_entry_block()
        with ir.InsertionPoint(entry):
            zero = arith.constant(index, 0)
            func.CallOp([], ir.FlatSymbolRefAttr.get(f"{name}_body"),
                        [zero, entry.arguments[0], *list(entry.arguments)[1:]])
            func.ReturnOp([])
        with ir.InsertionPoint(loop):
            total = arith.constant(index, 1)
            for lb, ub, st in zip(lbs, ubs, steps):
                total = arith.muli(total, _trip_count(lb, ub, st))
            func.CallOp([], ir.FlatSymbolRefAttr.get(name), [total, *captured])
        loop.erase()


# ---------------------------------------------------------------------------------------
# LLVM level

_RECORD = "!llvm.struct<(ptr, i64, i64)>"  # a block: the context, first and last iteration
_RUNTIME = {
    "mlirAsyncRuntimeCreateToken": "() -> !llvm.ptr",
    "mlirAsyncRuntimeEmplaceToken": "(!llvm.ptr)",
    "mlirAsyncRuntimeAwaitToken": "(!llvm.ptr)",
    "mlirAsyncRuntimeDropRef": "(!llvm.ptr, i64)",
    "mlirAsyncRuntimeExecute": "(!llvm.ptr, !llvm.ptr)",
    "mlirAsyncRuntimGetNumWorkerThreads": "() -> i64",  # sic: the runtime's spelling
}


def _declaration(name: str, signature: str) -> str:
    params, _, result = signature.partition(" -> ")
    returns = f" -> {result}" if result else ""
    return f'llvm.func @{name}{params}{returns} attributes {{sym_visibility = "private"}}'


def _task_text(name: str, body: str, types: list[str]) -> str:
    """The trampoline run on a worker: its block of iterations, then the countdown."""
    context = f"!llvm.struct<({', '.join([*types, 'i64', 'ptr'])})>"
    n = len(types)
    loads = "\n".join(
        f"  %ap{k} = llvm.getelementptr %ctx[0, {k}] : (!llvm.ptr) -> !llvm.ptr, {context}\n"
        f"  %a{k} = llvm.load %ap{k} : !llvm.ptr -> {t}" for k, t in enumerate(types))
    args = "".join(f", %a{k}" for k in range(n))
    arg_types = "".join(f", {t}" for t in types)
    return f"""
llvm.func @{name}_task(%rec: !llvm.ptr) attributes {{sym_visibility = "private"}} {{
  %ctx = llvm.load %rec : !llvm.ptr -> !llvm.ptr
  %fp = llvm.getelementptr %rec[0, 1] : (!llvm.ptr) -> !llvm.ptr, {_RECORD}
  %first = llvm.load %fp : !llvm.ptr -> i64
  %lp = llvm.getelementptr %rec[0, 2] : (!llvm.ptr) -> !llvm.ptr, {_RECORD}
  %last = llvm.load %lp : !llvm.ptr -> i64
{loads}
  llvm.call @{body}(%first, %last{args}) : (i64, i64{arg_types}) -> ()
  %one = llvm.mlir.constant(1 : i64) : i64
  %cp = llvm.getelementptr %ctx[0, {n}] : (!llvm.ptr) -> !llvm.ptr, {context}
  %left = llvm.atomicrmw sub %cp, %one acq_rel : !llvm.ptr, i64
  %done = llvm.icmp "eq" %left, %one : i64
  llvm.cond_br %done, ^emplace, ^exit
^emplace:
  %tp = llvm.getelementptr %ctx[0, {n + 1}] : (!llvm.ptr) -> !llvm.ptr, {context}
  %token = llvm.load %tp : !llvm.ptr -> !llvm.ptr
  llvm.call @mlirAsyncRuntimeEmplaceToken(%token) : (!llvm.ptr) -> ()
  llvm.br ^exit
^exit:
  llvm.return
}}
"""


def _dispatch_text(name: str, body: str, types: list[str]) -> str:
    """The dispatcher: blocks 1.. to the thread pool, block 0 here, then the wait."""
    context = f"!llvm.struct<({', '.join([*types, 'i64', 'ptr'])})>"
    n = len(types)
    params = "".join(f", %a{k}: {t}" for k, t in enumerate(types))
    args = "".join(f", %a{k}" for k in range(n))
    arg_types = "".join(f", {t}" for t in types)
    stores = "\n".join(
        f"  %ap{k} = llvm.getelementptr %ctx[0, {k}] : (!llvm.ptr) -> !llvm.ptr, {context}\n"
        f"  llvm.store %a{k}, %ap{k} : {t}, !llvm.ptr" for k, t in enumerate(types))
    return f"""
llvm.func @{name}(%total: i64{params}) attributes {{sym_visibility = "private"}} {{
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %workers = llvm.call @mlirAsyncRuntimGetNumWorkerThreads() : () -> i64
  %fewer = llvm.icmp "slt" %total, %workers : i64
  %wanted = llvm.select %fewer, %total, %workers : i1, i64
  %alone = llvm.icmp "sle" %wanted, %one : i64
  llvm.cond_br %alone, ^sequential, ^parallel
^sequential:
  llvm.call @{body}(%zero, %total{args}) : (i64, i64{arg_types}) -> ()
  llvm.return
^parallel:
  %wm1 = llvm.sub %wanted, %one : i64
  %tw = llvm.add %total, %wm1 : i64
  %size = llvm.sdiv %tw, %wanted : i64
  %sm1 = llvm.sub %size, %one : i64
  %ts = llvm.add %total, %sm1 : i64
  %blocks = llvm.sdiv %ts, %size : i64
  %ctx = llvm.alloca %one x {context} {{alignment = 16 : i64}} : (i64) -> !llvm.ptr
{stores}
  %others = llvm.sub %blocks, %one : i64
  %cp = llvm.getelementptr %ctx[0, {n}] : (!llvm.ptr) -> !llvm.ptr, {context}
  llvm.store %others, %cp : i64, !llvm.ptr
  %token = llvm.call @mlirAsyncRuntimeCreateToken() : () -> !llvm.ptr
  %tp = llvm.getelementptr %ctx[0, {n + 1}] : (!llvm.ptr) -> !llvm.ptr, {context}
  llvm.store %token, %tp : !llvm.ptr, !llvm.ptr
  %recs = llvm.alloca %blocks x {_RECORD} {{alignment = 8 : i64}} : (i64) -> !llvm.ptr
  %task = llvm.mlir.addressof @{name}_task : !llvm.ptr
  llvm.br ^submit(%one : i64)
^submit(%b: i64):
  %more = llvm.icmp "slt" %b, %blocks : i64
  llvm.cond_br %more, ^next, ^own
^next:
  %rec = llvm.getelementptr %recs[%b] : (!llvm.ptr, i64) -> !llvm.ptr, {_RECORD}
  %first = llvm.mul %b, %size : i64
  %b1 = llvm.add %b, %one : i64
  %end = llvm.mul %b1, %size : i64
  %over = llvm.icmp "slt" %total, %end : i64
  %last = llvm.select %over, %total, %end : i1, i64
  llvm.store %ctx, %rec : !llvm.ptr, !llvm.ptr
  %fp = llvm.getelementptr %rec[0, 1] : (!llvm.ptr) -> !llvm.ptr, {_RECORD}
  llvm.store %first, %fp : i64, !llvm.ptr
  %lp = llvm.getelementptr %rec[0, 2] : (!llvm.ptr) -> !llvm.ptr, {_RECORD}
  llvm.store %last, %lp : i64, !llvm.ptr
  llvm.call @mlirAsyncRuntimeExecute(%rec, %task) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.br ^submit(%b1 : i64)
^own:
  llvm.call @{body}(%zero, %size{args}) : (i64, i64{arg_types}) -> ()
  llvm.call @mlirAsyncRuntimeAwaitToken(%token) : (!llvm.ptr) -> ()
  llvm.call @mlirAsyncRuntimeDropRef(%token, %one) : (!llvm.ptr, i64) -> ()
  llvm.return
}}
"""


def parallel_tasks_to_llvm(module_op: Any, pass_: Any) -> None:
    """See the module docstring (second pass)."""
    module = _op(module_op)
    top = module.regions[0].blocks[0]
    dispatchers = [op for op in top.operations
                   if op.operation.name == "llvm.func" and BODY_ATTR in op.attributes]
    if not dispatchers:
        return
    defined = {ir.StringAttr(op.attributes["sym_name"]).value: op for op in top.operations
               if "sym_name" in op.attributes}
    texts, declarations = [], dict(_RUNTIME)
    for dispatcher in dispatchers:
        name = ir.StringAttr(dispatcher.attributes["sym_name"]).value
        body = ir.FlatSymbolRefAttr(dispatcher.attributes[BODY_ATTR]).value
        types = [str(a.type) for a in list(dispatcher.regions[0].blocks[0].arguments)[1:]]
        texts += [_task_text(name, body, types), _dispatch_text(name, body, types)]
        body_fn = defined[body]
        # One copy of the (large) body: LLVM would inline it into the trampoline and
        # the dispatcher's two calls (three times the code to generate).
        body_fn.attributes["no_inline"] = ir.UnitAttr.get()
        params = ", ".join(["i64", "i64", *types])
        declarations[body] = f"({params})"
        dispatcher.erase()
    new = ir.Module.parse("\n".join([_declaration(n, s) for n, s in declarations.items()] + texts))
    for op in list(new.body.operations):
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if name in declarations and name in defined:
            continue  # the body functions, or runtime functions declared already
        top.append(op)
