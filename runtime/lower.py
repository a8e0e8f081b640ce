"""From xhlo text to lowered stages, without the JIT: parsing and verifying a module, and
the pipeline for a target CPU. Shared by the compiler (which then JITs) and export (which
lowers again for another CPU and without the async runtime); neither imports the other.
Imports `dialect`, `lowering`.
"""

from __future__ import annotations

from mlir import ir

from ..dialect.context import reused_context
from ..dialect.errors import ArgumentError, CompileError
from ..dialect.verify import verify_module
from ..lowering.passes import schedules
from ..lowering.pipeline import Pipeline
from .replicas import check_collectives
from .targets import HOST, has_avx512


def pipeline_for_target(pipeline: Pipeline, cpu: str) -> Pipeline:
    """`pipeline` with the default matmul/conv schedule's register tiles chosen for `cpu`
    (`schedules.Params.for_target`) instead of this machine's."""
    if cpu == HOST:
        return pipeline
    try:
        params = schedules.Params.for_target(cpu)
    except ArgumentError:  # an LLVM CPU name the schedules do not list: by its vector width
        params = schedules.Params.for_target("x86-64-v4" if has_avx512(cpu) else "x86-64-v3")
    scheduler = schedules.scheduler(params)
    return Pipeline([(stage, [scheduler if p is schedules.schedule_contractions else p
                              for p in pipeline.passes(stage)]) for stage in pipeline.stage_names])


def lower_mlir(text: str, pipeline: Pipeline, cpu: str) -> dict[str, str]:
    """The stages of `text` through `pipeline` for `cpu`, without the JIT (for export,
    which may target a CPU this machine cannot run)."""
    with reused_context(len(text)), ir.Location.unknown():
        module = parse_module(text, 1)
        return pipeline_for_target(pipeline, cpu).run(module)


def parse_module(text: str, num_replicas: int) -> ir.Module:
    """The module of `text` (xhlo dialect), verified, with the replica-group rules checked
    (in the current context)."""
    try:
        module = ir.Module.parse(text)
    except Exception as e:  # noqa: BLE001 - MLIRError from the parser
        raise CompileError(f"cannot parse the module: {e}", "hlo", str(e)) from None
    verify_module(module)
    check_collectives(module, num_replicas)
    return module
