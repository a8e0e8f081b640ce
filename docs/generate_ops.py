"""Writes docs/ops.md from the dialect registry: `python docs/generate_ops.py`.

tests/test_inspection.py fails when the committed file is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

HEADER = """# Op reference

Generated from the dialect registry by `python docs/generate_ops.py`; do not edit.
Each op of the `xhlo` dialect: operands (`...` = variadic), attributes with their
kinds, sub-computations, the XlaBuilder methods generated from the entry, and
its lowering.

| op | operands | attributes | computations | builder | lowering | doc |
|---|---|---|---|---|---|---|
"""


def render() -> str:
    from xlamlir.dialect.registry import REGISTRY
    from xlamlir.lowering import lower_pass  # noqa: F401  (registers the lowerings)
    from xlamlir.lowering.patterns.framework import LOWERINGS

    rows = []
    for name in sorted(REGISTRY):
        op = REGISTRY[name]
        operands = ", ".join(o.name + ("..." if o.variadic else "") for o in op.operands)
        attrs = ", ".join(f"{k}: {v.name}" for k, v in op.attrs.items())
        comps = ", ".join(op.computations)
        builders = ", ".join(f"`{b}`" for b in op.builders)
        lowering = LOWERINGS[name].__module__.rsplit(".", 1)[-1] + "." + LOWERINGS[name].__name__ \
            if name in LOWERINGS else "-"
        rows.append(f"| `{name}` | {operands} | {attrs} | {comps} | {builders} | {lowering} | "
                    f"{op.doc} |")
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    target = Path(__file__).with_name("ops.md")
    target.write_text(render())
    print(f"wrote {target}", file=sys.stderr)
