"""Every target CPU's code, checked on any machine.

The target decides two things: the code's shapes (the matmul/conv register tiles and
cache blocks, `schedules.Params.for_target`) and the instructions LLVM may use. A
machine without AVX-512 cannot run x86-64-v4's instructions, so there `compile_for`
lowers x86-64-v4's shapes with this machine's instructions: LLVM splits the 512-bit
vectors into the host's registers without changing one rounding (no fast-math flags;
fma is explicit), so the bits are x86-64-v4's. Tests that look at the instructions
themselves (zmm registers in the disassembly) still need the real CPU.
"""

from __future__ import annotations

import xlamlir as xm
from xlamlir.runtime import targets
from xlamlir.runtime.lower import pipeline_for_target

#: The psABI levels every bit-identity test runs on, whatever this machine is.
TARGETS = ("x86-64-v2", "x86-64-v3", "x86-64-v4")


def runs_here(cpu: str) -> bool:
    """Whether this machine runs code generated for `cpu`."""
    return cpu == "host" or not targets.missing_features(cpu)


def target_options(target: str, pipeline: xm.Pipeline | None = None) -> dict:
    """The keyword arguments of `xm.compile` / `xm.compile_mlir` giving `target`'s code on
    this machine: its own instructions where they run here, else its code shapes with the
    host's instructions."""
    if runs_here(target):
        return {"pipeline": pipeline, "target_cpu": target}
    return {"pipeline": pipeline_for_target(pipeline or xm.Pipeline.default(), target),
            "target_cpu": "host"}


def compile_for(computation: xm.XlaComputation, target: str, pipeline: xm.Pipeline | None = None,
                num_replicas: int = 1) -> xm.Executable:
    """`computation` compiled for `target` (module docstring)."""
    return xm.compile(computation, num_replicas=num_replicas, **target_options(target, pipeline))
