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
- `parallel_tasks_to_llvm` (LLVM level, "llvm" stage, after the conversion to LLVM):
  each body function becomes `body(context, first, last)`, reading the captured values
  from a struct; each call of a dispatcher becomes stores of those values into a
  context on the caller's stack and a call of the module's one shared dispatcher
  `xlamlir_parallel_for(body, context, total, site)`: blocks = min(total, worker
  threads), blocks 1.. submitted with `mlirAsyncRuntimeExecute` to the one shared plain
  trampoline, which runs the body on its block, sets the block's flag and emplaces its
  token (a tail call: nothing of the program runs on a worker after that); the calling
  thread runs block 0 itself, then waits for each block's flag (yielding its CPU, up to
  SPIN_YIELDS times) and token. A worker woken onto the caller's CPU first moves to
  another (`_LEAVE`): stacked there, the two ran one after the other. The caller yields
  its CPU once before its own block (`_YIELD`), so that such a worker gets to move at
  once instead of after the caller's time slice. `site` is the call site's global: the
  times of its sequential and parallel runs, by which it takes the faster (waking a
  worker and then the caller cost tens of us on a KVM guest: see `_CHOOSE`).
  Per loop, only its body is code of its own: the ExecutionEngine gives every function a
  packed wrapper unpacking its arguments, and the first version (one dispatcher and one
  trampoline per loop, each taking all the values) was half of softmax's machine code.

The JIT does not compile each module's copy of the shared dispatcher and trampoline: the
compiler swaps it for the runtime library's copy (built once per cache directory) or one
per process after the pipeline (`call_shared_functions_at`, runtime/shared_runtime.py);
the stages show the program whole.

Iterations are independent (scf.forall semantics), so how they are split into blocks
changes nothing in the results: they do not depend on the number of worker threads.
Imports `dialect` (the reused context's cache).
"""

from __future__ import annotations

import sys
from typing import Any

from mlir import ir
from mlir.dialects import arith, func, llvm, scf

from ...dialect.context import context_cache

#: Marks a dispatcher (func.func, then llvm.func) with the name of its body function.
BODY_ATTR = "xlamlir.parallel_body"
# Ops without operands or regions copied into the body instead of passed to it.
_SINKABLE = frozenset({"arith.constant", "ub.poison", "memref.get_global", "llvm.mlir.constant",
                       "llvm.mlir.zero", "llvm.mlir.undef", "llvm.mlir.poison"})


def _op(x: Any) -> Any:
    return x.operation if hasattr(x, "operation") else x


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
    # Public functions only (the entry): a task calling a function whose loop dispatched
    # tasks of its own would block a worker thread on them, and with every worker so
    # blocked nothing would run them. Our lowering emits computations inline, so private
    # functions with loops do not occur; a user's stay sequential.
    functions = [op for op in module.regions[0].blocks[0].operations
                 if op.operation.name == "func.func" and len(op.regions[0].blocks) and public_function(op)]
    for function in functions:
        name = ir.StringAttr(function.attributes["sym_name"]).value
        loops = [loop for loop in _outermost_parallel_loops(function.operation)
                 if len(loop.operands) == 3 * len(loop.regions[0].blocks[0].arguments)]
        for i, loop in enumerate(loops):
            _outline(function.operation, loop, f"{name}_parallel_{i}")


def public_function(function: Any) -> bool:
    attrs = function.attributes
    return "sym_visibility" not in attrs or ir.StringAttr(attrs["sym_visibility"]).value == "public"


def outside_values(loop: Any) -> tuple[list[ir.Value], list[Any], list[tuple[Any, int, ir.Value]]]:
    """(values defined outside `loop` that it reads (its bounds too: the body function
    computes the trip counts), in first-use order; the sinkable ops among their
    definitions; (op, operand number, value) of each such read inside the loop, i.e.
    not by the loop op itself)."""
    captured: dict[ir.Value, None] = {}
    sunk: dict[Any, None] = {}
    reads: list[tuple[Any, int, ir.Value]] = []
    # Whether a block is nested in the loop, per block: the loop's few blocks hold all the
    # values it defines, so most operands are decided by one lookup, not a parent chain.
    inside: dict[ir.Block, bool] = {}

    at_loop = True  # the pre-order walk visits the loop itself first

    def visit(op: Any) -> ir.WalkResult:
        nonlocal at_loop
        nested, at_loop = not at_loop, False
        for k, value in enumerate(op.operands):
            owner = value.owner
            if isinstance(owner, ir.Block):
                block, defining = owner, None
            else:
                defining = owner.operation
                block = defining.block
            verdict = inside.get(block)
            if verdict is None:
                parent = _op(block.owner)
                verdict = inside[block] = parent == loop or _strictly_inside(parent, loop)
            if verdict:
                continue
            if nested:
                reads.append((op, k, value))
            if defining is not None and defining.name in _SINKABLE and len(defining.operands) == 0:
                sunk[defining] = None
            else:
                captured[value] = None
        return ir.WalkResult.ADVANCE

    loop.walk(visit, ir.WalkOrder.PRE_ORDER)
    return list(captured), list(sunk), reads


def _strictly_inside(op: Any, loop: Any) -> bool:
    """Whether `op` is nested in `loop`, by the parent chain (op objects met in use lists
    did not always hash like the same ops met in walks)."""
    parent = op.parent
    while parent is not None:
        if parent == loop:
            return True
        parent = parent.parent
    return False


def _trip_count(lb: ir.Value, ub: ir.Value, step: ir.Value) -> ir.Value:
    zero = arith.constant(ir.IndexType.get(), 0)
    return arith.maxsi(arith.ceildivsi(arith.subi(ub, lb), step), zero)


def _outline(function: Any, loop: Any, name: str) -> None:
    index = ir.IndexType.get()
    body = loop.regions[0].blocks[0]
    rank = len(body.arguments)
    lbs, ubs, steps = (list(loop.operands)[k * rank:(k + 1) * rank] for k in range(3))
    captured, sunk, reads = outside_values(loop)
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
        # Uses of captured values and sunk constants in the loop: the body function's.
        for owner, k, value in reads:
            owner.operands[k] = mapping[value]
        for arg, iv in zip(body.arguments, ivs):
            arg.replace_all_uses_with(iv)
        for op in list(body.operations)[:-1]:  # all but the scf.reduce terminator
            op.move_before(yield_)
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

PARALLEL_FOR = "xlamlir_parallel_for"  # (body, context, total, site): the one shared dispatcher
_TASK = "xlamlir_parallel_task"  # (record): the one shared trampoline
_LEAVE = "xlamlir_parallel_leave_cpu"  # (cpu): moves the calling thread off `cpu`
# A parallel loop's run on the dispatcher's stack: the body, its context, the iteration
# count, the block size and the CPU the dispatching thread ran on (-1: unknown); and a
# block of it: the job, the block's number, its token, whether its body returned.
_JOB = "!llvm.struct<(ptr, ptr, i64, i64, i32)>"
_RECORD = "!llvm.struct<(ptr, i64, ptr, i64)>"
# A loop's call site (a global of the program, `_site_global`): the last sequential and
# the last parallel run's wall time (ns, 0: not measured yet), the number of calls and
# whether the last call ran sequentially.
_SITE = "!llvm.array<4 x i64>"
SITE_PREFIX = "xlamlir_parallel_site_"
# Every REPROBE calls a site measures again the way it did not choose, for PROBE_CALLS
# calls in a row (the first finds the caches as the other way left them: W's halves in
# both cores' L2 after parallel runs cost a sequential run 3-5x its time), keeping the
# fastest.
REPROBE = 64
PROBE_CALLS = 3
# A site runs sequentially only if that took under SEQUENTIAL_SHARE of its parallel time,
# and never once a sequential run took SEQUENTIAL_MAX_NS or more (a loop that long runs
# faster on two cores whatever waking a worker costs): slow samples of the parallel way
# must not put a large loop on one core. (A bound on the parallel time instead kept small
# loops parallel for good: on this VM waking the worker alone took up to 340 us.)
SEQUENTIAL_SHARE = (1, 2)
SEQUENTIAL_MAX_NS = 1_000_000
# The caller waits for a worker's block yielding its CPU (the CPU stays awake) up to this
# many times, then sleeps on the block's token.
SPIN_YIELDS = 256
_RUNTIME = {
    "mlirAsyncRuntimeCreateToken": "() -> !llvm.ptr",
    "mlirAsyncRuntimeEmplaceToken": "(!llvm.ptr)",
    "mlirAsyncRuntimeAwaitToken": "(!llvm.ptr)",
    "mlirAsyncRuntimeDropRef": "(!llvm.ptr, i64)",
    "mlirAsyncRuntimeExecute": "(!llvm.ptr, !llvm.ptr)",
    "mlirAsyncRuntimGetNumWorkerThreads": "() -> i64",  # sic: the runtime's spelling
}
# Linux's libc, for _LEAVE (elsewhere the CPU is "unknown" and no worker moves).
_LIBC = {
    "sched_getcpu": "() -> i32",
    "sched_getaffinity": "(i32, i64, !llvm.ptr) -> i32",
    "sched_setaffinity": "(i32, i64, !llvm.ptr) -> i32",
    "sched_yield": "() -> i32",
    "clock_gettime": "(i32, !llvm.ptr) -> i32",
} if sys.platform == "linux" else {}
_CPU_SET_WORDS = 16  # glibc's cpu_set_t: 1024 CPUs
_BODY = "!llvm.ptr, (!llvm.ptr, i64, i64) -> ()"  # an indirect call of a body function
_DISPATCHER_TYPE = "(!llvm.ptr, !llvm.ptr, i64, !llvm.ptr)"
_SHARED_NAMES = (PARALLEL_FOR, _TASK, _LEAVE)
_SHARED_KEY = "parallel_tasks.shared"  # in the context's cache: the parsed _SHARED


def declaration(name: str, signature: str) -> str:
    params, _, result = signature.partition(" -> ")
    returns = f" -> {result}" if result else ""
    return f'llvm.func @{name}{params}{returns} attributes {{sym_visibility = "private"}}'


def _declarations() -> str:
    """The functions of the runtime and libc the shared functions call."""
    return "\n".join(declaration(n, s) for n, s in {**_RUNTIME, **_LIBC}.items())


def _field(ptr: str, struct: str, k: int, name: str) -> str:
    return f"  %{name} = llvm.getelementptr %{ptr}[0, {k}] : (!llvm.ptr) -> !llvm.ptr, {struct}"


# A helper woken onto the CPU its caller runs on, next to it, leaves that CPU before it
# starts. The scheduler sometimes stacks the two there (seen on KVM guests after an idle
# pause: the caller's block, then the helper's, one core's speed until its load balancer
# moves one, ~4 ms later), while the other core idles. A mask without that CPU moves the
# helper at once; the old mask, set back, does not move it again. Two system calls when
# it happens, one vDSO call (sched_getcpu, ~20 ns) when not.
if _LIBC:
    _CURRENT_CPU = "llvm.call @sched_getcpu() : () -> i32"
    _LEAVE_BODY = f"""
  %zero = llvm.mlir.constant(0 : i32) : i32
  %limit = llvm.mlir.constant({64 * _CPU_SET_WORDS} : i32) : i32
  %words = llvm.mlir.constant({_CPU_SET_WORDS} : i64) : i64
  %bytes = llvm.mlir.constant({8 * _CPU_SET_WORDS} : i64) : i64
  %mask = llvm.alloca %words x i64 {{alignment = 8 : i64}} : (i64) -> !llvm.ptr
  %other = llvm.alloca %words x i64 {{alignment = 8 : i64}} : (i64) -> !llvm.ptr
  %mine = llvm.call @sched_getcpu() : () -> i32
  %same = llvm.icmp "eq" %mine, %cpu : i32
  %known = llvm.icmp "sge" %cpu, %zero : i32
  %listed = llvm.icmp "slt" %cpu, %limit : i32
  %valid = llvm.and %known, %listed : i1
  %stacked = llvm.and %same, %valid : i1
  llvm.cond_br %stacked, ^read, ^stay
^read:
  %got = llvm.call @sched_getaffinity(%zero, %bytes, %mask) : (i32, i64, !llvm.ptr) -> i32
  %read = llvm.icmp "eq" %got, %zero : i32
  llvm.cond_br %read, ^move, ^stay
^move:
  "llvm.intr.memcpy"(%other, %mask, %bytes) <{{isVolatile = false}}> : (!llvm.ptr, !llvm.ptr, i64) -> ()
  %c = llvm.zext %cpu : i32 to i64
  %six = llvm.mlir.constant(6 : i64) : i64
  %low = llvm.mlir.constant(63 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %all = llvm.mlir.constant(-1 : i64) : i64
  %w = llvm.lshr %c, %six : i64
  %b = llvm.and %c, %low : i64
  %bit = llvm.shl %one, %b : i64
  %keep = llvm.xor %bit, %all : i64
  %wp = llvm.getelementptr %other[%w] : (!llvm.ptr, i64) -> !llvm.ptr, i64
  %word = llvm.load %wp : !llvm.ptr -> i64
  %cleared = llvm.and %word, %keep : i64
  llvm.store %cleared, %wp : i64, !llvm.ptr
  %set = llvm.call @sched_setaffinity(%zero, %bytes, %other) : (i32, i64, !llvm.ptr) -> i32
  %moved = llvm.icmp "eq" %set, %zero : i32
  llvm.cond_br %moved, ^restore, ^stay
^restore:
  %back = llvm.call @sched_setaffinity(%zero, %bytes, %mask) : (i32, i64, !llvm.ptr) -> i32
  llvm.br ^stay
^stay:
  llvm.return"""
    # The caller, its tasks submitted, lets a worker woken onto its CPU run (and leave)
    # now: after an idle pause that worker otherwise waited out the caller's time slice
    # (1-3 ms) and the loop ran at one core's speed. Measured on the 2-core KVM guest,
    # calls 20 ms apart: a sort of f32[4096,256] 1.98 -> 1.06 ms (0.8 back to back),
    # make bench's sort of 1M f32 5.1 -> 3.4-3.7 ms, conv 1x1 3.1 -> 2.5. Where the
    # worker woke on another CPU it is one system call with nothing else to run.
    _YIELD = "\n  %yielded = llvm.call @sched_yield() : () -> i32"
else:
    _CURRENT_CPU = "llvm.mlir.constant(-1 : i32) : i32"
    _LEAVE_BODY = "\n  llvm.return"
    _YIELD = ""


def _now(name: str) -> str:
    """`%name`: CLOCK_MONOTONIC in ns (a vDSO call, ~20-50 ns), read through `%clock`."""
    return f"""
  %{name}_r = llvm.call @clock_gettime(%monotonic, %clock) : (i32, !llvm.ptr) -> i32
  %{name}_sp = llvm.getelementptr %clock[0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i64, i64)>
  %{name}_s = llvm.load %{name}_sp : !llvm.ptr -> i64
  %{name}_np = llvm.getelementptr %clock[0, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i64, i64)>
  %{name}_n = llvm.load %{name}_np : !llvm.ptr -> i64
  %{name}_sn = llvm.mul %{name}_s, %billion : i64
  %{name} = llvm.add %{name}_sn, %{name}_n : i64"""


def _store_elapsed(since: str, at: int) -> str:
    """The ns since `%since` (at least 1: 0 means unmeasured) into the site's field `at`;
    the smaller of it and the field's value on a later call of a run (`%second`)."""
    return f"""{_now(f"end{at}")}
  %elapsed{at} = llvm.sub %end{at}, %{since} : i64
  %sample{at} = llvm.intr.umax(%elapsed{at}, %one) : (i64, i64) -> i64
  %field{at} = llvm.getelementptr %site[0, {at}] : (!llvm.ptr) -> !llvm.ptr, {_SITE}
  %old{at} = llvm.load %field{at} atomic monotonic {{alignment = 8 : i64}} : !llvm.ptr -> i64
  %low{at} = llvm.intr.umin(%sample{at}, %old{at}) : (i64, i64) -> i64
  %kept{at} = llvm.select %second, %low{at}, %sample{at} : i1, i64
  llvm.store %kept{at}, %field{at} atomic monotonic {{alignment = 8 : i64}} : i64, !llvm.ptr"""


# A parallel loop costs waking a worker and, at its end, the caller: on a KVM guest with
# idle vCPUs each wake-up took tens of us (a row sum of f32[512,512]: 15 us on one core,
# 99 us on two). So each call site times its runs and takes the faster way. Calls 0-2
# run in parallel, 3-5 sequentially, each run of PROBE_CALLS keeping its fastest time (the
# first call of a run may find the worker asleep, or the data in the other core's cache);
# then the faster way (sequential only if clearly faster and the loop is small: see
# SEQUENTIAL_SHARE), its time updated by every call, and every REPROBE calls a run the
# other way (all calls of a run the same way). The caller waits for a worker's
# block yielding its CPU (awake, and free for a worker stacked on it) before it sleeps
# on the token. Results never depend on the way taken: iterations are independent.
if _LIBC:
    _CLOCK = """
  %clock = llvm.alloca %one x !llvm.struct<(i64, i64)> {alignment = 8 : i64} : (i64) -> !llvm.ptr
  %monotonic = llvm.mlir.constant(1 : i32) : i32
  %billion = llvm.mlir.constant(1000000000 : i64) : i64"""
    _CHOOSE = f"""
  %seqp = llvm.getelementptr %site[0, 0] : (!llvm.ptr) -> !llvm.ptr, {_SITE}
  %parp = llvm.getelementptr %site[0, 1] : (!llvm.ptr) -> !llvm.ptr, {_SITE}
  %callp = llvm.getelementptr %site[0, 2] : (!llvm.ptr) -> !llvm.ptr, {_SITE}
  %calls = llvm.load %callp atomic monotonic {{alignment = 8 : i64}} : !llvm.ptr -> i64
  %calls1 = llvm.add %calls, %one : i64
  llvm.store %calls1, %callp atomic monotonic {{alignment = 8 : i64}} : i64, !llvm.ptr
  %seq = llvm.load %seqp atomic monotonic {{alignment = 8 : i64}} : !llvm.ptr -> i64
  %par = llvm.load %parp atomic monotonic {{alignment = 8 : i64}} : !llvm.ptr -> i64
  %yes = llvm.mlir.constant(true) : i1
  %period = llvm.mlir.constant({REPROBE - 1} : i64) : i64
  %phase = llvm.and %calls, %period : i64
  %run = llvm.mlir.constant({PROBE_CALLS} : i64) : i64
  %two_runs = llvm.mlir.constant({2 * PROBE_CALLS} : i64) : i64
  %starting = llvm.icmp "ult" %calls, %two_runs : i64
  %first_run = llvm.icmp "ult" %calls, %run : i64
  %probing = llvm.icmp "ult" %phase, %run : i64
  %share_num = llvm.mlir.constant({SEQUENTIAL_SHARE[0]} : i64) : i64
  %share_den = llvm.mlir.constant({SEQUENTIAL_SHARE[1]} : i64) : i64
  %seq_scaled = llvm.mul %seq, %share_den : i64
  %par_scaled = llvm.mul %par, %share_num : i64
  %under = llvm.icmp "ult" %seq_scaled, %par_scaled : i64
  %seq_known = llvm.icmp "ne" %seq, %zero : i64
  %seq_faster = llvm.and %under, %seq_known : i1
  %choice = llvm.xor %seq_faster, %probing : i1
  %longest = llvm.mlir.constant({SEQUENTIAL_MAX_NS} : i64) : i64
  %large = llvm.icmp "uge" %seq, %longest : i64
  %at_zero = llvm.icmp "eq" %phase, %zero : i64
  %not_zero = llvm.xor %at_zero, %yes : i1
  %in_run = llvm.and %probing, %not_zero : i1
  %lastp = llvm.getelementptr %site[0, 3] : (!llvm.ptr) -> !llvm.ptr, {_SITE}
  %last = llvm.load %lastp atomic monotonic {{alignment = 8 : i64}} : !llvm.ptr -> i64
  %last_seq = llvm.icmp "ne" %last, %zero : i64
  %later = llvm.select %in_run, %last_seq, %choice : i1, i1
  %second_way = llvm.xor %first_run, %starting : i1
  %seq_wanted = llvm.select %starting, %second_way, %later : i1, i1
  %small = llvm.xor %large, %yes : i1
  %use_seq = llvm.and %seq_wanted, %small : i1
  %way = llvm.zext %use_seq : i1 to i64
  llvm.store %way, %lastp atomic monotonic {{alignment = 8 : i64}} : i64, !llvm.ptr
  %past_run = llvm.icmp "ugt" %phase, %run : i64
  %in_second_run = llvm.and %starting, %past_run : i1
  %second = llvm.or %in_run, %in_second_run : i1{_now("start")}
  llvm.cond_br %use_seq, ^timed, ^parallel
^timed:
  llvm.call %fn(%ctx, %zero, %total) : {_BODY}{_store_elapsed("start", 0)}
  llvm.return"""
    _SPIN = f"""
{_field("wrec", _RECORD, 3, "wdp")}
  llvm.br ^spin(%zero : i64)
^spin(%turn: i64):
  %flag = llvm.load %wdp atomic acquire {{alignment = 8 : i64}} : !llvm.ptr -> i64
  %returned = llvm.icmp "ne" %flag, %zero : i64
  %spins = llvm.mlir.constant({SPIN_YIELDS} : i64) : i64
  %enough = llvm.icmp "sge" %turn, %spins : i64
  %stop = llvm.or %returned, %enough : i1
  llvm.cond_br %stop, ^collect, ^again
^again:
  %spun = llvm.call @sched_yield() : () -> i32
  %turn1 = llvm.add %turn, %one : i64
  llvm.br ^spin(%turn1 : i64)
^collect:"""
    _MEASURED_PARALLEL = _store_elapsed("start", 1)
else:
    _CLOCK, _CHOOSE, _SPIN, _MEASURED_PARALLEL = "", "\n  llvm.br ^parallel", "", ""

# Internal and never inlined: one copy each per module, whatever the number of loops.
# A worker's last step in the program's code is a tail call emplacing its block's token:
# once the caller has seen every token, the program (and its machine code) may be freed
# while workers are still returning, and none is then left inside that code.
_SHARED = f"""
llvm.func internal @{_LEAVE}(%cpu: i32) attributes {{no_inline}} {{{_LEAVE_BODY}
}}

llvm.func internal @{_TASK}(%rec: !llvm.ptr) attributes {{no_inline}} {{
  %job = llvm.load %rec : !llvm.ptr -> !llvm.ptr
{_field("rec", _RECORD, 1, "bp")}
  %b = llvm.load %bp : !llvm.ptr -> i64
  %fn = llvm.load %job : !llvm.ptr -> !llvm.ptr
{_field("job", _JOB, 1, "cp")}
  %ctx = llvm.load %cp : !llvm.ptr -> !llvm.ptr
{_field("job", _JOB, 2, "tp")}
  %total = llvm.load %tp : !llvm.ptr -> i64
{_field("job", _JOB, 3, "sp")}
  %size = llvm.load %sp : !llvm.ptr -> i64
{_field("job", _JOB, 4, "up")}
  %caller = llvm.load %up : !llvm.ptr -> i32
  llvm.call @{_LEAVE}(%caller) : (i32) -> ()
  %first = llvm.mul %b, %size : i64
  %end = llvm.add %first, %size : i64
  %over = llvm.icmp "slt" %total, %end : i64
  %last = llvm.select %over, %total, %end : i1, i64
  llvm.call %fn(%ctx, %first, %last) : {_BODY}
{_field("rec", _RECORD, 2, "kp")}
  %token = llvm.load %kp : !llvm.ptr -> !llvm.ptr
{_field("rec", _RECORD, 3, "dp")}
  %finished = llvm.mlir.constant(1 : i64) : i64
  llvm.store %finished, %dp atomic release {{alignment = 8 : i64}} : i64, !llvm.ptr
  llvm.call musttail @mlirAsyncRuntimeEmplaceToken(%token) : (!llvm.ptr) -> ()
  llvm.return
}}

llvm.func internal @{PARALLEL_FOR}(%fn: !llvm.ptr, %ctx: !llvm.ptr, %total: i64,
                                   %site: !llvm.ptr) attributes {{no_inline}} {{
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64{_CLOCK}
  %workers = llvm.call @mlirAsyncRuntimGetNumWorkerThreads() : () -> i64
  %fewer = llvm.icmp "slt" %total, %workers : i64
  %wanted = llvm.select %fewer, %total, %workers : i1, i64
  %alone = llvm.icmp "sle" %wanted, %one : i64
  llvm.cond_br %alone, ^sequential, ^choose
^sequential:
  llvm.call %fn(%ctx, %zero, %total) : {_BODY}
  llvm.return
^choose:{_CHOOSE}
^parallel:
  %wm1 = llvm.sub %wanted, %one : i64
  %tw = llvm.add %total, %wm1 : i64
  %size = llvm.sdiv %tw, %wanted : i64
  %sm1 = llvm.sub %size, %one : i64
  %ts = llvm.add %total, %sm1 : i64
  %blocks = llvm.sdiv %ts, %size : i64
  %job = llvm.alloca %one x {_JOB} {{alignment = 8 : i64}} : (i64) -> !llvm.ptr
  llvm.store %fn, %job : !llvm.ptr, !llvm.ptr
{_field("job", _JOB, 1, "cp")}
  llvm.store %ctx, %cp : !llvm.ptr, !llvm.ptr
{_field("job", _JOB, 2, "tp")}
  llvm.store %total, %tp : i64, !llvm.ptr
{_field("job", _JOB, 3, "sp")}
  llvm.store %size, %sp : i64, !llvm.ptr
  %cpu = {_CURRENT_CPU}
{_field("job", _JOB, 4, "up")}
  llvm.store %cpu, %up : i32, !llvm.ptr
  %cpu64 = llvm.sext %cpu : i32 to i64
  %cpu_known = llvm.icmp "sge" %cpu64, %zero : i64
  %cpu_block = llvm.urem %cpu64, %blocks : i64
  %mine = llvm.select %cpu_known, %cpu_block, %zero : i1, i64
  %recs = llvm.alloca %blocks x {_RECORD} {{alignment = 8 : i64}} : (i64) -> !llvm.ptr
  %task = llvm.mlir.addressof @{_TASK} : !llvm.ptr
  llvm.br ^submit(%zero : i64)
^submit(%b: i64):
  %more = llvm.icmp "slt" %b, %blocks : i64
  llvm.cond_br %more, ^other, ^own
^other:
  %is_mine = llvm.icmp "eq" %b, %mine : i64
  %b_next = llvm.add %b, %one : i64
  llvm.cond_br %is_mine, ^submit(%b_next : i64), ^next
^next:
  %rec = llvm.getelementptr %recs[%b] : (!llvm.ptr, i64) -> !llvm.ptr, {_RECORD}
  llvm.store %job, %rec : !llvm.ptr, !llvm.ptr
{_field("rec", _RECORD, 1, "bp")}
  llvm.store %b, %bp : i64, !llvm.ptr
  %token = llvm.call @mlirAsyncRuntimeCreateToken() : () -> !llvm.ptr
{_field("rec", _RECORD, 2, "kp")}
  llvm.store %token, %kp : !llvm.ptr, !llvm.ptr
{_field("rec", _RECORD, 3, "dp")}
  llvm.store %zero, %dp : i64, !llvm.ptr
  llvm.call @mlirAsyncRuntimeExecute(%rec, %task) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.br ^submit(%b_next : i64)
^own:{_YIELD}
  %my_first = llvm.mul %mine, %size : i64
  %my_end = llvm.add %my_first, %size : i64
  %my_over = llvm.icmp "slt" %total, %my_end : i64
  %my_last = llvm.select %my_over, %total, %my_end : i1, i64
  llvm.call %fn(%ctx, %my_first, %my_last) : {_BODY}
  llvm.br ^await(%zero : i64)
^await(%w: i64):
  %waiting = llvm.icmp "slt" %w, %blocks : i64
  llvm.cond_br %waiting, ^awaited, ^done
^awaited:
  %w_mine = llvm.icmp "eq" %w, %mine : i64
  %w_next = llvm.add %w, %one : i64
  llvm.cond_br %w_mine, ^await(%w_next : i64), ^wait
^wait:
  %wrec = llvm.getelementptr %recs[%w] : (!llvm.ptr, i64) -> !llvm.ptr, {_RECORD}{_SPIN}
{_field("wrec", _RECORD, 2, "wkp")}
  %wtoken = llvm.load %wkp : !llvm.ptr -> !llvm.ptr
  llvm.call @mlirAsyncRuntimeAwaitToken(%wtoken) : (!llvm.ptr) -> ()
  llvm.call @mlirAsyncRuntimeDropRef(%wtoken, %one) : (!llvm.ptr, i64) -> ()
  llvm.br ^await(%w_next : i64)
^done:{_MEASURED_PARALLEL}
  llvm.return
}}
"""


def _context(types: list[ir.Type]) -> ir.Type:
    return llvm.StructType.get_literal(types or [ir.IntegerType.get_signless(64)])


def _field_alignment(t: ir.Type) -> int | None:
    """The alignment a context field is accessed with. The context is 16-byte aligned on the
    caller's stack, but a vector's ABI alignment is its size (64 bytes for vector<16xf32>):
    with the default, LLVM loads it with an aligned move (vmovaps zmm), which faults on a
    16-byte aligned slot. Vectors are accessed unaligned; scalars and descriptors need <= 16."""
    return 1 if t.typeid == ir.VectorType.static_typeid else None


def _dispatch_at(call: Any, body: str, context: ir.Type, alignments: list[int | None],
                 site: str) -> None:
    """The call of a loop's dispatcher replaced by its values stored into a context (on
    the caller's stack: allocated in its entry block, once however often the loop runs)
    and a call of the shared dispatcher, with the call site's global `site`. Inline: a
    dispatcher function would get a packed wrapper from the ExecutionEngine unpacking all
    its values (~100 instructions)."""
    ptr, i64 = llvm.PointerType.get(), ir.IntegerType.get_signless(64)
    caller = call.parent
    while caller.name != "llvm.func":
        caller = caller.parent
    entry = caller.regions[0].blocks[0]
    with call.location:
        with ir.InsertionPoint.at_block_begin(entry):
            one = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, 1)).result
            ctx = llvm.alloca(ptr, one, context, alignment=16)
        with ir.InsertionPoint(call):
            total, *values = list(call.operands)
            for k, (value, alignment) in enumerate(zip(values, alignments)):
                llvm.store(value, llvm.getelementptr(ptr, ctx, [], [0, k], context, 0),
                           alignment=alignment)
            fn = llvm.AddressOfOp(ptr, ir.FlatSymbolRefAttr.get(body)).result
            state = llvm.AddressOfOp(ptr, ir.FlatSymbolRefAttr.get(site)).result
            llvm.CallOp(None, [fn, ctx, total, state], [], [], callee=ir.FlatSymbolRefAttr.get(PARALLEL_FOR))
    call.erase()


def _site_global(name: str) -> str:
    """A call site's state (`_SITE`), zero: nothing measured yet."""
    return f"""llvm.mlir.global internal @{name}() {{addr_space = 0 : i32}} : {_SITE} {{
  %z = llvm.mlir.zero : {_SITE}
  llvm.return %z : {_SITE}
}}"""


def _read_context(body_fn: Any, types: list[ir.Type], context: ir.Type,
                  alignments: list[int | None]) -> None:
    """`body_fn(first, last, values...)` becomes `body_fn(context, first, last)`: a new
    entry block loads the values from the context and branches to the old one."""
    ptr, i64 = llvm.PointerType.get(), ir.IntegerType.get_signless(64)
    old = body_fn.regions[0].blocks[0]
    location = body_fn.location
    entry = old.create_before(ptr, i64, i64, arg_locs=[location] * 3)
    with ir.InsertionPoint(entry), location:
        ctx, first, last = entry.arguments
        values = []
        for k, (t, alignment) in enumerate(zip(types, alignments)):
            address = llvm.getelementptr(ptr, ctx, [], [0, k], context, 0)
            values.append(llvm.load(t, address, alignment=alignment))
        llvm.br([first, last, *values], old)
    body_fn.attributes["function_type"] = ir.TypeAttr.get(ir.Type.parse("!llvm.func<void (ptr, i64, i64)>"))
    if "arg_attrs" in body_fn.attributes:
        del body_fn.attributes["arg_attrs"]


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
    calls: dict[str, list[Any]] = {}

    def visit(op: Any) -> ir.WalkResult:
        if op.name == "llvm.call" and "callee" in op.attributes:
            calls.setdefault(ir.FlatSymbolRefAttr(op.attributes["callee"]).value, []).append(op)
        return ir.WalkResult.ADVANCE

    bodies = {ir.FlatSymbolRefAttr(op.attributes[BODY_ATTR]).value: op for op in dispatchers}
    for op in top.operations:
        # Bodies (most of the code) call no dispatcher: their loops stay sequential.
        if "sym_name" not in op.attributes or ir.StringAttr(op.attributes["sym_name"]).value not in bodies:
            op.walk(visit)
    sites = 0
    for body, dispatcher in bodies.items():
        name = ir.StringAttr(dispatcher.attributes["sym_name"]).value
        types = [a.type for a in list(dispatcher.regions[0].blocks[0].arguments)[1:]]
        context, alignments = _context(types), [_field_alignment(t) for t in types]
        for call in calls.get(name, []):
            site = f"{SITE_PREFIX}{sites}"
            sites += 1
            top.append(ir.Operation.parse(_site_global(site), context=module.context))
            _dispatch_at(call, body, context, alignments, site)
        _read_context(defined[body], types, context, alignments)
        # One copy of the body, called by the shared dispatcher and trampoline.
        defined[body].attributes["no_inline"] = ir.UnitAttr.get()
        dispatcher.erase()
    shared, ops = _shared_ops(module.context)  # `shared` owns the ops: kept until cloned
    for op, name, declaration in ops:
        if declaration and name in defined:
            continue  # defined (or declared) in the module already
        op.clone(ip=ir.InsertionPoint(top))
    del shared


def _shared_ops(context: ir.Context) -> tuple[ir.Module, list[tuple[Any, str, bool]]]:
    """The runtime's declarations and the shared functions parsed, once per reused context
    (~0.4 ms a module), and their (op, symbol, is a declaration), to be cloned into each."""
    cache = context_cache(context)
    if cache is not None and _SHARED_KEY in cache:
        return cache[_SHARED_KEY]
    # The text calls the bodies only indirectly: the runtime is all it declares.
    parsed = ir.Module.parse(_declarations() + "\n" + _SHARED, context)
    ops = [(op.operation, ir.StringAttr(op.attributes["sym_name"]).value,
            len(op.regions[0].blocks) == 0) for op in parsed.body.operations]
    if cache is not None:
        cache[_SHARED_KEY] = (parsed, ops)
    return parsed, ops


# ---------------------------------------------------------------------------------------
# The shared functions compiled once (runtime/shared_runtime.py)

def shared_functions_text(address_function: str) -> str:
    """A module of its own holding the shared functions and `address_function`, which
    returns the dispatcher's address (the ExecutionEngine looks up packed wrappers only)."""
    return "\n".join([_declarations(), _SHARED, f"""
llvm.func @{address_function}() -> !llvm.ptr {{
  %a = llvm.mlir.addressof @{PARALLEL_FOR} : !llvm.ptr
  llvm.return %a : !llvm.ptr
}}"""])


def _shared_functions_of(module: ir.Module) -> list[Any]:
    shared = []
    for op in module.body.operations:
        if op.operation.name == "llvm.func" and "sym_name" in op.attributes:
            name = ir.StringAttr(op.attributes["sym_name"]).value
            if name in _SHARED_NAMES and len(op.regions[0].blocks):
                shared.append(op)
    return shared if len(shared) == len(_SHARED_NAMES) else []


def defines_shared_functions(module: ir.Module) -> bool:
    """Whether `module` (LLVM dialect) has parallel loops, i.e. its copy of the shared functions."""
    return bool(_shared_functions_of(module))


def call_shared_functions_at(module: ir.Module, symbol: str) -> bool:
    """If `module` defines the shared functions (it has parallel loops), remove them and
    make its calls of the dispatcher call the declared function `symbol` instead (the
    same functions compiled once per process): whether it did. After the pipeline, so
    the stages still show the program complete."""
    shared = _shared_functions_of(module)
    if not shared:
        return False
    for op in shared:
        op.operation.erase()
    with module.context, ir.Location.unknown():
        module.body.append(ir.Operation.parse(declaration(symbol, _DISPATCHER_TYPE)))
        ir.SymbolTable.replace_all_symbol_uses(PARALLEL_FOR, symbol, module.operation)
    return True
