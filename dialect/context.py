"""The MLIR context every xhlo module lives in.

xhlo ops are unregistered (generic) ops: the context allows unregistered
dialects, and `!xhlo.token` is an opaque type. MLIR's verifier therefore knows
nothing of them; `dialect.verify` checks every xhlo op against the registry
(operand groups, attributes, result types by the shape rule). An IRDL
definition was tried first: IRDL binds a constraint to one type per op
instance, so a variadic list of differently typed values needed one variadic
segment per run of equal types (a fixed maximum of runs, a long
`operandSegmentSizes` on every op) and loading it cost every new context.
Each thread reuses one context for the transient modules of building and
compiling (`reused_context`). Imports nothing of ours.
"""

from __future__ import annotations

import gc
import os
import threading
from typing import Any

from mlir import ir

# The op classes of these dialects are looked up (and their modules imported, ~3 ms) the
# first time a pass reads such an op's opview; loaded here, every compile finds them ready
# (else the first compile of a process paid for them).
from mlir.dialects import affine, builtin  # noqa: F401


def new_context() -> ir.Context:
    """A fresh MLIR context with every upstream dialect, where xhlo ops parse and build."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    # On one thread: our modules have a handful of functions, so MLIR's per-function
    # threads had little to share and its uniquers paid for locks on every type and
    # attribute. Measured over six workloads (interleaved, 20 compiles each): the
    # stages 6-12 ms faster, the JIT unchanged (it has its own threads).
    ctx.enable_multithreading(False)
    return ctx


# A context costs several ms of CPU to make (every upstream dialect registered): once
# per build and once per compile, that was a large part of a small program's compile.
# Each thread reuses one for the transient modules of building and compiling. A context
# never frees what it uniqued (types, attributes: a program's constants too), so it is
# replaced after this many uses or this many characters of text.
CONTEXT_USES = 64
CONTEXT_TEXT_CHARS = 16 << 20
_reused = threading.local()
# Contexts a forked child must never use nor destroy. When they had threads (before
# new_context turned them off), the pool's threads stayed in the parent: the child's
# first verification waited forever on them, a destructor joined them. Kept without
# threads too: a context is not fork-safe by contract (locks held by another thread).
_forked_away: list[Any] = []


# A replaced context is freed once nothing holds it, often by the garbage collector (a
# cycle through its modules). Freed in a forked child, it joined its thread pool's
# threads, which do not exist there: SIGSEGV. So the parent collects before it forks.
_replaced: list[bool] = []


def _collect_before_fork() -> None:
    if _replaced:
        _replaced.clear()
        gc.collect()


def _forget_after_fork() -> None:
    state = getattr(_reused, "state", None)
    if state is not None:
        _forked_away.append(state)
        _reused.state = None


os.register_at_fork(before=_collect_before_fork, after_in_child=_forget_after_fork)


def reused_context(text_chars: int = 0) -> ir.Context:
    """This thread's reusable context (see CONTEXT_USES), for a module about `text_chars`
    long. A context replaced while a caller still holds it lives on until released."""
    state = getattr(_reused, "state", None)
    if state is None or state[1] >= CONTEXT_USES or state[2] >= CONTEXT_TEXT_CHARS:
        if state is not None:
            _replaced.append(True)
        state = _reused.state = [new_context(), 0, 0, {}]
    state[1] += 1
    state[2] += text_chars
    return state[0]


def context_cache(context: ir.Context) -> dict[Any, Any] | None:
    """A dict living as long as `context` is this thread's reusable one, for what costs
    time to make per module and may be kept with the context (parsed pass pipelines:
    lowering/pipeline.py); None for any other context."""
    state = getattr(_reused, "state", None)
    return state[3] if state is not None and state[0] is context else None


def parsed_once(context: ir.Context, text: str) -> ir.Module:
    """The module of `text` parsed in `context`, once per reusable context (kept in its
    `context_cache`): for fixed texts a pass clones or applies in every compile."""
    cache = context_cache(context)
    key = ("parsed module", text)
    module = cache.get(key) if cache is not None else None
    if module is None:
        module = ir.Module.parse(text, context)
        if cache is not None:
            cache[key] = module
    return module


def charge_context(context: ir.Context, text_chars: int) -> None:
    """Count `text_chars` more of module text against `context` if it is this thread's
    reusable one (for modules whose size is known only once built)."""
    state = getattr(_reused, "state", None)
    if state is not None and state[0] is context:
        state[2] += text_chars


