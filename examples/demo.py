"""The seeds' axpy example (alpha * x + y), shown at every stage, run and checked.

Then the same computation with user passes plugged into the pipeline: a
textual upstream pass and a Python-defined one.
"""

from __future__ import annotations

import numpy as np

import xlamlir as xm


def build_axpy(n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("axpy")
    alpha = b.parameter(0, xm.Shape.array(xm.F32, ()), "alpha")
    x = b.parameter(1, xm.Shape.array(xm.F32, (n,)), "x")
    y = b.parameter(2, xm.Shape.array(xm.F32, (n,)), "y")
    b.add(b.mul(alpha, x), y)  # alpha is broadcast to x's shape, as in XLA
    return b.build()


def show_stages(exe: xm.Executable) -> None:
    for name, text in exe.stages.items():
        print(f"==================== stage {name!r} ====================")
        lines = text.splitlines()
        print("\n".join(lines[:60]))
        if len(lines) > 60:
            print(f"... ({len(lines) - 60} more lines)")


def main() -> None:
    comp = build_axpy(8)
    print("program shape:", comp.program_shape())
    exe = xm.compile(comp)
    show_stages(exe)

    alpha = np.float32(2.5)
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, dtype=np.float32)
    result = exe(alpha, x, y)
    expected = alpha * x + y
    np.testing.assert_allclose(result, expected, rtol=1e-6)
    print("axpy result:", result, "== numpy:", expected)

    # A user pipeline: an upstream textual pass after the linalg stage, and a
    # Python pass that counts the linalg.generic ops it sees.
    seen: list[int] = []

    def count_generics(op, pass_) -> None:
        count = 0

        def visit(inner):
            nonlocal count
            count += inner.name == "linalg.generic"
            from mlir import ir

            return ir.WalkResult.ADVANCE

        op.walk(visit)
        seen.append(count)

    pipeline = xm.Pipeline.default()
    pipeline.insert_after("linalg", "func.func(linalg-generalize-named-ops)")
    pipeline.insert_before("fused", count_generics)
    exe2 = xm.compile(comp, pipeline)
    np.testing.assert_allclose(exe2(alpha, x, y), expected, rtol=1e-6)
    print("custom pipeline stages:", pipeline.stage_names)
    print(f"the Python pass saw {seen[0]} linalg.generic op(s) before fusion")
    print("demo OK")


if __name__ == "__main__":
    main()
