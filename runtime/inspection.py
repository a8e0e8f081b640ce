"""Seeing inside a compilation: stage dumps, stage diffs, compile statistics, HTML.

`exe.dump(directory)` writes one numbered `.mlir` file per stage (and one per
pass when the compile ran with `XLAMLIR_DUMP_PASSES=1`); `XLAMLIR_DUMP_TO=dir`
dumps every compilation, as `XLA_FLAGS=--xla_dump_to` does for XLA.
Imports nothing of ours.
"""

from __future__ import annotations

import difflib
import html
import itertools
import os
import re
from typing import Any

_DUMP_COUNTER = itertools.count()


def compile_stats(parse_s: float, timings: list[tuple[str, str, float]], jit_s: float,
                  total_s: float) -> dict[str, Any]:
    """Wall times of one compilation: per stage, per pass, JIT, and the total."""
    stages: dict[str, float] = {}
    for stage, _, seconds in timings:
        stages[stage] = stages.get(stage, 0.0) + seconds
    return {"parse_verify_s": parse_s, "stages_s": stages,
            "passes_s": [(stage, name, seconds) for stage, name, seconds in timings],
            "jit_s": jit_s, "total_s": total_s, "cache_hits": 0}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60]


def dump_stages(exe: Any, directory: str, after_each_pass: bool = True) -> list[str]:
    """Write `NN_stage.mlir` per stage (and `NN_MM_stage_pass.mlir` per pass when the
    compile recorded them); returns the paths written."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for i, (stage, text) in enumerate(exe.stages.items()):
        path = os.path.join(directory, f"{i:02d}_{_safe(stage)}.mlir")
        with open(path, "w") as f:
            f.write(text)
        written.append(path)
    if after_each_pass and exe.pass_stages:
        stage_index = {name: i for i, name in enumerate(exe.stages)}
        for j, (stage, name, text) in enumerate(exe.pass_stages):
            path = os.path.join(directory, f"{stage_index[stage]:02d}_{j:03d}_{_safe(stage)}_"
                                f"{_safe(name)}.mlir")
            with open(path, "w") as f:
                f.write(text)
            written.append(path)
    return written


def dump_compilation(exe: Any, root: str) -> list[str]:
    """Dump one compilation into its own numbered folder under `root`."""
    return dump_stages(exe, os.path.join(root, f"{next(_DUMP_COUNTER):04d}_{_safe(exe.name)}"))


def stage_diff(exe: Any, a: str, b: str, context: int = 3) -> str:
    """A unified diff of the module text after stage `a` and after stage `b`."""
    for stage in (a, b):
        if stage not in exe.stages:
            raise KeyError(f"no stage named {stage!r}; stages are {list(exe.stages)}")
    return "".join(difflib.unified_diff(
        exe.stages[a].splitlines(keepends=True), exe.stages[b].splitlines(keepends=True),
        fromfile=a, tofile=b, n=context))


def executable_html(exe: Any) -> str:
    """Jupyter view: the program shape, compile times and every stage, collapsible."""
    params, result = exe.program_shape()
    total = exe.compile_stats.get("total_s")
    timing = f" compiled in {total * 1e3:.0f} ms" if total else ""
    parts = [f"<div><b>Executable {html.escape(exe.name)}</b>: "
             f"({html.escape(', '.join(map(str, params)))}) -&gt; {html.escape(str(result))}"
             f"{timing}</div>"]
    for stage, text in exe.stages.items():
        seconds = exe.compile_stats.get("stages_s", {}).get(stage)
        label = f"{stage} ({seconds * 1e3:.1f} ms)" if seconds is not None else stage
        parts.append(f"<details><summary>{html.escape(label)}</summary><pre>"
                     f"{html.escape(text)}</pre></details>")
    return "\n".join(parts)
