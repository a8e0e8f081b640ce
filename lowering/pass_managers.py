"""Pass managers of textual pipelines: parsed once per reusable context, and whether
MLIR's verifier runs after each of their passes.

MLIR's pass manager verifies the whole module after every pass: 15% of a compile (all 33
`make bench` programs, 2.9 -> 2.45 s). The default pipeline's own passes run without it
and lowering/pipeline.py verifies the module once at the end of each stage they ran in
(a failure there is replayed pass by pass with verification, to name the pass); a
user's pass (`Pipeline.insert_after`, ...) is always verified right after it runs, so an
invalid module it makes is reported, never handed to the next pass.
$XLAMLIR_VERIFY_EACH_PASS=1 verifies after every pass, as MLIR does by default (the test
suite sets it: a bug of ours then shows at the pass that made it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mlir import ir
from mlir.passmanager import PassManager

from ..dialect.context import context_cache

VERIFY_ENV = "XLAMLIR_VERIFY_EACH_PASS"
# Marks a Python pass of ours made on demand (a schedule for another CPU's tiles): run
# like the default pipeline's passes, verified at the end of its stage.
_OWN = "xlamlir_own_pass"


def own_pass(fn: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """`fn`, marked as one of the library's passes (lowering/pipeline.py)."""
    setattr(fn, _OWN, True)
    return fn


def is_own_pass(spec: Any) -> bool:
    return getattr(spec, _OWN, False) is True


def verify_each_pass() -> bool:
    """Whether $XLAMLIR_VERIFY_EACH_PASS asks for MLIR's verifier after every pass."""
    return os.environ.get(VERIFY_ENV, "").strip().lower() in ("1", "on", "yes", "true")


def parsed(spec: str, context: ir.Context, verify: bool = True,
           anchor: str = "builtin.module") -> PassManager:
    """The pass manager of textual pipeline `spec` on `anchor` ops, verifying after each
    pass if `verify`; kept with the thread's reusable context: a pass manager initializes
    its passes once per context (canonicalize collects every op's patterns), not once per
    run, and parsing is skipped too."""
    cache = context_cache(context)
    key = (spec, verify, anchor)
    pm = cache.get(key) if cache is not None else None
    if pm is None:
        pm = PassManager.parse(f"{anchor}({spec})", context=context)
        pm.enable_verifier(verify)
        if cache is not None:
            cache[key] = pm
    return pm


def ours(spec: str, context: ir.Context, anchor: str = "builtin.module") -> PassManager:
    """The pass manager of a pipeline one of our Python passes runs inside it (its result
    is verified with the stage's, unless $XLAMLIR_VERIFY_EACH_PASS)."""
    return parsed(spec, context, verify_each_pass(), anchor)
