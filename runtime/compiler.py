"""compile / compile_mlir: parse, verify, run the pipeline, JIT with the ExecutionEngine.

Compiled executables are cached by (module text, pipeline, replicas, target CPU)
in an LRU of `CACHE_SIZE` entries, and on disk across processes (runtime/disk_cache.py).
`target_cpu` (runtime/targets.py) picks the CPU the JIT generates code for and the
matmul/conv schedules' register tiles.
Each compile uses its thread's reusable MLIR context (dialect/context.py:
`reused_context`); the module is released once the engine holds the machine code. Imports `dialect`,
`lowering` and `runtime`.
"""

from __future__ import annotations

import collections
import ctypes
import os
import threading
import time
from typing import Any

from mlir import ir

from ..dialect.context import reused_context
from ..dialect.errors import CompileError, ShapeError
from ..dialect.verify import program_shape_of
from ..lowering.ops.custom import CUSTOM_CALLS_ATTR
from ..lowering.passes.parallel_tasks import defines_shared_functions
from ..lowering.patterns.boundary import DYNAMIC_STRIDES_ATTR, entry_result_shape, result_leaf_shapes
from ..lowering.pipeline import Pipeline
from . import disk_cache, fork_safety, shared_runtime, split_jit, task_pool
from .custom_calls import bind_custom_calls
from .executable import Executable
from .inspection import compile_stats, dump_compilation
from .io import Infeed, Outfeed
from .io import builtins as io_builtins
from .jit_linkage import internalize
from .jit_symbols import needs_runtime_libraries
from .lower import parse_module, pipeline_for_target
from .replicas import collective_builtins
from .targets import resolve, retarget

CACHE_SIZE = 128
# LLVM's optimization (and code generation) level for the JIT, which takes most of the
# compile time. -O2 measured no consistent gain over -O3 (CPU time of the JIT: 10-20%
# less for axpy/softmax/while, the same for matmul+bias+relu, twice as much for the conv
# workload), so -O3 stays.
JIT_OPT_LEVEL = 3
_cache: collections.OrderedDict[Any, Executable] = collections.OrderedDict()
_cache_lock = threading.Lock()


def _mlir_lib(name: str) -> str:
    import mlir

    return os.path.join(list(mlir.__path__)[0], "lib", name)


def runtime_libraries() -> list[str]:
    """The MLIR runner-utils libraries shipped in the MLIR wheels."""
    names = ["libmlir_c_runner_utils.so"]
    return [_mlir_lib(n) for n in names if os.path.exists(_mlir_lib(n))]


_async_runtime: list[Any] = []


def load_async_runtime() -> None:
    """Load the thread pool running the tasks of parallel loops (lowering/passes/
    parallel_tasks.py) into the process, once: ours (runtime/task_pool.py), else the
    wheels' async runtime; the JIT and the disk cache's libraries resolve its symbols there.

    Not through ExecutionEngine's shared_libs: destroying any engine then calls the
    library's `__mlir_execution_engine_destroy`, which frees the process-wide default
    runtime under every other live engine (the next parallel loop crashes)."""
    fork_safety.pool_loaded()
    with _cache_lock:
        if _async_runtime:
            return
        ours = task_pool.library()
        if ours is not None:
            _async_runtime.append(ours)
        elif os.path.exists(_mlir_lib("libmlir_async_runtime.so")):
            _async_runtime.append(ctypes.CDLL(_mlir_lib("libmlir_async_runtime.so"),
                                              mode=ctypes.RTLD_GLOBAL))


def compile(computation: Any, pipeline: Pipeline | None = None, num_replicas: int = 1,  # noqa: A001
            *, target_cpu: str | None = None) -> Executable:
    """Compile an XlaComputation to an Executable.

    `target_cpu`: the CPU the JIT generates code for: "host" (this machine), an x86-64
    level ("x86-64-v2", "x86-64-v3", "x86-64-v4") or an LLVM CPU name; None means
    $XLAMLIR_TARGET_CPU, else "host". This machine must be able to run it (else
    xm.ArgumentError). Results are bit-identical for every target.
    """
    if not hasattr(computation, "as_mlir_text"):
        raise ShapeError("compile", [], f"expected an XlaComputation, got {type(computation).__name__}")
    return compile_mlir(computation.as_mlir_text(), pipeline, num_replicas, name=computation.name,
                        located_text=computation.as_mlir_text(locations=True), target_cpu=target_cpu)


def compile_mlir(text: str, pipeline: Pipeline | None = None, num_replicas: int = 1,
                 name: str = "main", *, dynamic_strides: bool = False,
                 located_text: str | None = None, target_cpu: str | None = None) -> Executable:
    """Compile a module in the xhlo dialect given as MLIR text; `main` is the entry point.

    `dynamic_strides` compiles the variant whose inputs take any strides; executables
    compile it themselves on the first strided numpy view they are called with.
    `target_cpu` as for `compile`.
    """
    pipeline = pipeline or Pipeline.default()
    if not isinstance(num_replicas, int) or isinstance(num_replicas, bool) or num_replicas < 1:
        raise CompileError(f"num_replicas must be an int >= 1, got {num_replicas!r}")
    cpu = resolve(target_cpu)
    if not fork_safety.pool_usable():
        pipeline = pipeline.sequential()  # a forked child: the parent's pool has no threads here
    key = (text, pipeline.fingerprint(), num_replicas, dynamic_strides, name, cpu)
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
            cached.compile_stats["cache_hits"] += 1
            return cached
    # The runtime library's switch is in the key: an entry calling the library cannot be
    # loaded where it is off (it would be compiled again and overwritten each time).
    entry = disk_cache.plan(text, pipeline, cpu, num_replicas=num_replicas,
                            dynamic_strides=dynamic_strides, name=name, opt_level=JIT_OPT_LEVEL,
                            runtime_library=shared_runtime.allowed())
    executable = _load_from_disk(entry, text, pipeline, num_replicas, name, dynamic_strides, cpu)
    if executable is None:
        # The cache key ignores locations: the same computation built elsewhere is a hit.
        executable = _compile_uncached(located_text or text, pipeline, num_replicas, name,
                                       dynamic_strides, cpu, entry)
    entry.report(executable.compile_stats)
    fork_safety.watch(executable, _sequential_factory(text, pipeline, num_replicas, name,
                                                      dynamic_strides, cpu))
    dump_to = os.environ.get("XLAMLIR_DUMP_TO")
    if dump_to and not dynamic_strides:
        dump_compilation(executable, dump_to)
    if "xhlo.rng_get_and_update_state" in text:
        return executable  # not cached: every compile starts its random stream at seed 0
    with _cache_lock:
        _cache[key] = executable
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return executable


def _load_from_disk(entry: disk_cache.Entry, text: str, pipeline: Pipeline, num_replicas: int,
                    name: str, dynamic_strides: bool, cpu: str) -> Executable | None:
    """The program of `entry` bound as a fresh compile binds it; None on a miss."""
    if entry.key is not None:
        load_async_runtime()  # as for the JIT: the code of parallel loops calls it
    loaded = entry.load(_load_runtime_libraries,
                        before_runtime=lambda: shared_runtime.runtime_library(JIT_OPT_LEVEL))
    if loaded is None:
        return None
    try:
        callbacks, feeds = _bind_runtime(loaded.library, loaded.records, num_replicas)
        executable = Executable(
            name=name, engine=loaded.library, callbacks=callbacks, feeds=feeds,
            parameter_shapes=loaded.parameter_shapes, result_shape=loaded.result_shape,
            result_leaves=result_leaf_shapes(loaded.result_shape), stages=loaded.stages,
            num_replicas=num_replicas, dynamic_strides=dynamic_strides,
            strided_variant=None if dynamic_strides else _variant_factory(
                text, pipeline, num_replicas, name, cpu),
            dispatches_parallel_loops=loaded.dispatches_parallel_loops)
    except Exception as e:  # noqa: BLE001 - a bad entry is compiled again, never fatal
        entry.reject(f"{type(e).__name__}: {e}")
        return None
    entry.loaded()
    executable.compile_stats = {"parse_verify_s": 0.0, "stages_s": {}, "passes_s": [], "jit_s": 0.0,
                                "total_s": entry.seconds, "cache_hits": 0,
                                "compiled_s": loaded.compiled_s}
    executable.pipeline = pipeline
    executable.target_cpu = cpu
    executable.keeps_object = bool(os.environ.get("XLAMLIR_KEEP_OBJECT"))
    executable.runtime_library = loaded.runtime_library
    return executable


def _load_runtime_libraries() -> None:
    """What else the JIT resolves a cached library's undefined symbols in: MLIR's runner
    utils (which load libMLIR: ~100 ms, so only when a library needs them) and libm."""
    for path in [*runtime_libraries(), "libm.so.6"]:
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass  # the library's load then names the symbol still missing


def _bind_runtime(engine: Any, records: list[dict[str, str]],
                  num_replicas: int) -> tuple[tuple[Any, threading.local], tuple[Infeed, Outfeed]]:
    """Custom-call trampolines (the I/O and collectives among them) registered with
    `engine`, before its first lookup."""
    callback_errors = threading.local()
    infeed, outfeed = Infeed(), Outfeed()
    trampolines = bind_custom_calls(engine, records, callback_errors,
                                    {**io_builtins(infeed, outfeed),
                                     **collective_builtins(num_replicas)})
    return (trampolines, callback_errors), (infeed, outfeed)


def _compile_uncached(text: str, pipeline: Pipeline, num_replicas: int, name: str,
                      dynamic_strides: bool, cpu: str,
                      entry: disk_cache.Entry | None = None) -> Executable:
    started = time.perf_counter()
    context = reused_context(len(text))
    with context, ir.Location.unknown():
        module = parse_module(text, num_replicas)
        parameter_shapes, result_shape = program_shape_of(module)
        # A returned parameter keeps its layout, also as a tuple leaf (the type has no room).
        result_shape = entry_result_shape(module, result_shape)
        if dynamic_strides:
            module.operation.attributes[DYNAMIC_STRIDES_ATTR] = ir.UnitAttr.get()
        parsed = time.perf_counter()
        timings: list[tuple[str, str, float]] = []
        per_pass: list[tuple[str, str, str]] | None = (
            [] if os.environ.get("XLAMLIR_DUMP_PASSES") else None)
        # XLAMLIR_PASS_TIMING=1: one PassManager run per pass, each timed in compile_stats.
        stages = pipeline_for_target(pipeline, cpu).run(
            module, timings, per_pass, locations=bool(os.environ.get("XLAMLIR_STAGE_LOCATIONS")),
            per_pass=bool(os.environ.get("XLAMLIR_PASS_TIMING")))
        # After the stages were kept: their text stays target-free (export retargets it),
        # its functions as the pipeline left them (runtime/jit_linkage.py).
        retarget(module, cpu)
        internalize(module)
        parallel = defines_shared_functions(module)
        lowered = time.perf_counter()
        result_leaves = result_leaf_shapes(result_shape)
        diagnostics: list[str] = []

        def collect(d: Any) -> bool:
            diagnostics.append(f"{d.location}: {d.message}")
            return True

        custom_records = _custom_call_records(module)
        keep_object = bool(os.environ.get("XLAMLIR_KEEP_OBJECT"))
        handler = context.attach_diagnostic_handler(collect)
        try:
            load_async_runtime()
            # After the pool is loaded: a dispatcher library binds to it.
            shared = shared_runtime.share(module, bool(entry and entry.key), JIT_OPT_LEVEL)
            # The runner utils load libMLIR and libLLVM (~25 ms): only for a module that
            # calls into them (runtime/jit_symbols.py).
            symbols = [r["symbol"] for r in custom_records]
            libraries = runtime_libraries() if needs_runtime_libraries(
                module, _may_hold_f16(stages, pipeline, module), symbols) else []
            # XLAMLIR_KEEP_OBJECT=1 keeps the machine code for `exe.write_object(path)`
            # (to disassemble: which instructions a target_cpu really gets); the disk
            # cache stores it. The parallel loops' bodies may compile in a second
            # engine at once (runtime/split_jit.py); not when the object file is kept.
            jit = split_jit.start(module, JIT_OPT_LEVEL, libraries,
                                  keep_object or bool(entry and entry.key),
                                  allow_split=not keep_object)
        except Exception as e:  # noqa: BLE001 - JitError, or the binding's RuntimeError
            detail = "\n".join([*diagnostics, *getattr(e, "diagnostics", [])]) or str(e)
            raise CompileError(f"JIT compilation failed (the 'llvm' stage must leave only the LLVM "
                               f"dialect):\n{detail}", "jit", detail) from None
        finally:
            handler.detach()
    jitted = time.perf_counter()
    try:
        callbacks, feeds = _bind_runtime(jit.main, custom_records, num_replicas)
        if shared.dispatcher is shared_runtime.Sharing.REGISTERED:
            jit.main.register_runtime(shared_runtime.SYMBOL,
                                      shared_runtime.process_dispatcher(JIT_OPT_LEVEL))
    except BaseException:
        jit.fail("not compiled: binding the runtime failed")
        raise
    bound = time.perf_counter()
    # The JIT generates the machine code lazily, at the first lookup (once the custom
    # calls' symbols are registered): do it here, so that `jit_s` counts it (about half
    # of the JIT's time); the Executable's own lookup then finds it ready.
    try:
        engine = jit.finish("_mlir_ciface_main")
    except split_jit.JitError as e:
        detail = "\n".join(e.diagnostics) or str(e)
        raise CompileError(f"JIT compilation failed: {e}\n{detail}", "jit", detail) from None
    generated = time.perf_counter()
    stats = compile_stats(parsed - started, timings, (jitted - lowered) + (generated - bound),
                          generated - started)
    stats["binding_s"] = bound - jitted
    executable = Executable(name=name, engine=engine, callbacks=callbacks, feeds=feeds,
                            parameter_shapes=parameter_shapes,
                            result_shape=result_shape, result_leaves=result_leaves, stages=stages,
                            num_replicas=num_replicas, dynamic_strides=dynamic_strides,
                            strided_variant=None if dynamic_strides else _variant_factory(
                                text, pipeline, num_replicas, name, cpu),
                            compile_stats=stats, pass_stages=per_pass,
                            dispatches_parallel_loops=parallel)
    executable.pipeline = pipeline  # export recompiles with it (runtime/export.py)
    executable.target_cpu = cpu
    executable.keeps_object = keep_object
    executable.runtime_library = shared.library
    if entry is not None:
        entry.store(engine, custom_records, executable)
    return executable


def _may_hold_f16(stages: dict[str, str], pipeline: Pipeline, module: ir.Module) -> bool:
    """Whether the lowered `module` may hold f16 or bf16 values. The default passes make
    none that the program (its first stage's text) has not: only a pipeline with passes
    of its own pays for printing its last stage (lowering/stage_texts.py)."""
    if not stages:
        return "f16" in str(module)
    if "f16" in stages[next(iter(stages))]:
        return True
    return not pipeline.only_default_passes() and "f16" in stages[next(reversed(stages))]


def _custom_call_records(module: ir.Module) -> list[dict[str, str]]:
    attrs = module.operation.attributes
    if CUSTOM_CALLS_ATTR not in attrs:
        return []
    return [{na.name: ir.StringAttr(na.attr).value for na in ir.DictAttr(entry)}
            for entry in ir.ArrayAttr(attrs[CUSTOM_CALLS_ATTR])]


def _sequential_factory(text: str, pipeline: Pipeline, num_replicas: int, name: str,
                        dynamic_strides: bool, cpu: str) -> Any:
    def make() -> Executable:
        return compile_mlir(text, pipeline.sequential(), num_replicas, name,
                            dynamic_strides=dynamic_strides, target_cpu=cpu)

    return make


def _variant_factory(text: str, pipeline: Pipeline, num_replicas: int, name: str, cpu: str) -> Any:
    def make() -> Executable:
        return compile_mlir(text, pipeline, num_replicas, name, dynamic_strides=True, target_cpu=cpu)

    return make


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
