"""Graphviz views of a computation: `comp.to_dot()`, `comp.render(path)`, Jupyter SVG.

Nodes are parameters, constants and ops (with their shapes); edges go from
operand to user; every sub-computation is a cluster. XlaComputation's `to_dot`,
`render` and `_repr_svg_` call these. Imports `builder.emit`.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from .emit import check_parameters, side_effects, topological


def _quote(text: str) -> str:
    """A DOT string; labels keep their `\\n` line breaks, quotes are escaped."""
    return '"' + text.replace('"', '\\"') + '"'


def _label(op: Any) -> str:
    if op.parameter_number is not None:
        name = f" {op.parameter_name}" if op.parameter_name else ""
        return f"parameter {op.parameter_number}{name}\\n{op.shape}"
    if op.source is not None:
        return f"result {op.index}\\n{op.shape}"
    return f"{op.opdef.name}\\n{op.shape}"


def _style(op: Any) -> str:
    if op.parameter_number is not None:
        return "shape=box, style=filled, fillcolor=lightblue"
    if op.opdef is not None and op.opdef.name == "constant":
        return "shape=box, style=filled, fillcolor=lightgrey"
    return "shape=ellipse"


def _cluster(comp: Any, prefix: str, lines: list[str], seen: dict[int, str], depth: int) -> str:
    """Emit `comp`'s nodes (and its sub-computations' clusters); returns the root node id."""
    builder, root = comp.builder, comp.root
    ops = topological([*side_effects(builder), *check_parameters(builder), root])
    ids = {op.uid: f"{prefix}n{i}" for i, op in enumerate(ops)}
    indent = "  " * depth
    for op in ops:
        extra = ", penwidth=2" if op is root else ""
        lines.append(f"{indent}{ids[op.uid]} [label={_quote(_label(op))}, {_style(op)}{extra}];")
        inputs = [op.source] if op.source is not None else [
            o for operand in op.operands for o in (operand if isinstance(operand, tuple) else (operand,))]
        for operand in inputs:
            lines.append(f"{indent}{ids[operand.uid]} -> {ids[op.uid]};")
        for name in (op.opdef.computations if op.opdef else ()):
            comps = op.attrs[name]
            for k, sub in enumerate(comps if isinstance(comps, (list, tuple)) else [comps]):
                if id(sub) not in seen:
                    cluster = f"{prefix}c{len(seen)}_"
                    seen[id(sub)] = cluster
                    lines.append(f"{indent}subgraph cluster_{cluster} {{")
                    lines.append(f"{indent}  label={_quote(f'{name} {sub.name}')}; style=dashed;")
                    sub_root = _cluster(sub, cluster, lines, seen, depth + 1)
                    lines.append(f"{indent}}}")
                    seen[id(sub)] = sub_root
                edge = f"{name}[{k}]" if isinstance(comps, (list, tuple)) else name
                lines.append(f"{indent}{seen[id(sub)]} -> {ids[op.uid]} "
                             f"[style=dotted, label={_quote(edge)}];")
    return ids[root.uid]


def to_dot(comp: Any) -> str:
    """The computation as a Graphviz digraph."""
    lines = [f"digraph {_quote(comp.name)} {{", "  rankdir=TB;", "  node [fontsize=10];"]
    _cluster(comp, "", lines, {}, 1)
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(comp: Any, path: str, fmt: str | None = None) -> str:
    """Render with Graphviz's `dot` (format from the file suffix); returns `path`."""
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("Graphviz's `dot` is not installed (Debian: apt-get install graphviz)")
    fmt = fmt or path.rsplit(".", 1)[-1]
    subprocess.run([dot, f"-T{fmt}", "-o", path], input=to_dot(comp).encode(), check=True)
    return path


def svg(comp: Any) -> str | None:
    """The SVG text for Jupyter, or None without Graphviz."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    done = subprocess.run([dot, "-Tsvg"], input=to_dot(comp).encode(), capture_output=True, check=False)
    return done.stdout.decode() if done.returncode == 0 else None
