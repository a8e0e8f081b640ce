"""The IRDL text of the xhlo dialect, derived from the registry, and its loading.

IRDL in LLVM 22 binds every constraint value to one type per op instance, so
a variadic operand list whose values have different types (a tuple of f32 and
s32 arrays, a multi-operand reduce) cannot share one constraint. Each variadic
list is therefore declared as `MAX_RUNS` variadic segments with a constraint of
their own: a list is split into runs of equal types, one run per segment, and
the op carries `operandSegmentSizes` / `resultSegmentSizes`. Imports
`dialect.registry` only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from mlir import ir
from mlir.dialects import irdl as irdl_dialect

from .registry import DIALECT, REGISTRY, OpDef

MAX_RUNS = 32
OPERAND_SEGMENTS = "operandSegmentSizes"
RESULT_SEGMENTS = "resultSegmentSizes"


def has_operand_segments(opdef: OpDef) -> bool:
    return any(o.variadic for o in opdef.operands)


def _op_irdl(opdef: OpDef) -> str:
    lines: list[str] = []
    counter = iter(range(1 << 30))

    def fresh() -> str:
        name = f"%c{next(counter)}"
        lines.append(f"    {name} = irdl.any")
        return name

    operands = []
    for operand in opdef.operands:
        if not operand.variadic:
            operands.append(f"{operand.name}: {fresh()}")
            continue
        operands.extend(f"{operand.name}_{i}: variadic {fresh()}" for i in range(MAX_RUNS))
    if opdef.results is None:
        results = [f"result_{i}: variadic {fresh()}" for i in range(MAX_RUNS)]
    else:
        results = [f"result_{i}: {fresh()}" for i in range(opdef.results)]
    attrs = [f'"{name}" = {fresh()}' for name in list(opdef.attrs) + list(opdef.computations)]
    if has_operand_segments(opdef):
        attrs.append(f'"{OPERAND_SEGMENTS}" = {fresh()}')
    if opdef.results is None:
        attrs.append(f'"{RESULT_SEGMENTS}" = {fresh()}')
    lines.append(f"    irdl.operands({', '.join(operands)})")
    lines.append(f"    irdl.results({', '.join(results)})")
    if attrs:
        lines.append(f"    irdl.attributes {{{', '.join(attrs)}}}")
    return f"  irdl.operation @{opdef.name} {{\n" + "\n".join(lines) + "\n  }"


def dialect_irdl_text() -> str:
    """The whole dialect as IRDL: the token type and every registered op."""
    ops = "\n".join(_op_irdl(REGISTRY[name]) for name in sorted(REGISTRY))
    return f"irdl.dialect @{DIALECT} {{\n  irdl.type @token {{\n    irdl.parameters()\n  }}\n{ops}\n}}\n"


_TEXT_LOCK = threading.Lock()
_TEXT: list[str] = []


def _cached_text() -> str:
    with _TEXT_LOCK:
        if not _TEXT:
            _TEXT.append(dialect_irdl_text())
        return _TEXT[0]


def new_context() -> ir.Context:
    """A fresh MLIR context with every upstream dialect and xhlo loaded."""
    ctx = ir.Context()
    with ctx, ir.Location.unknown():
        irdl_dialect.load_dialects(ir.Module.parse(_cached_text()))
    return ctx


# A context costs ~10 ms of CPU to make (every upstream dialect registered, the xhlo IRDL
# parsed and loaded) and starts its own thread pool: once per build and once per compile,
# that was as much as JAX's whole compile of a small program. Each thread reuses one for
# the transient modules of building and compiling. A context never frees what it uniqued
# (types, attributes: a program's constants too), so it is replaced after this many uses
# or this many characters of module text.
CONTEXT_USES = 64
CONTEXT_TEXT_CHARS = 16 << 20
_reused = threading.local()


def reused_context(text_chars: int = 0) -> ir.Context:
    """This thread's reusable context (see CONTEXT_USES), for a module about `text_chars`
    long. A context replaced while a caller still holds it lives on until released."""
    state = getattr(_reused, "state", None)
    if state is None or state[1] >= CONTEXT_USES or state[2] >= CONTEXT_TEXT_CHARS:
        state = _reused.state = [new_context(), 0, 0]
    state[1] += 1
    state[2] += text_chars
    return state[0]


def charge_context(context: ir.Context, text_chars: int) -> None:
    """Count `text_chars` more of module text against `context` if it is this thread's
    reusable one (for modules whose size is known only once built)."""
    state = getattr(_reused, "state", None)
    if state is not None and state[0] is context:
        state[2] += text_chars


def segment_runs(types: Sequence[Any]) -> list[int]:
    """Lengths of the runs of equal consecutive types, padded to MAX_RUNS."""
    runs: list[int] = []
    previous = None
    for t in types:
        if runs and t == previous:
            runs[-1] += 1
        else:
            runs.append(1)
        previous = t
    if len(runs) > MAX_RUNS:
        raise ValueError(f"more than {MAX_RUNS} runs of differently typed values in one list")
    return runs + [0] * (MAX_RUNS - len(runs))
