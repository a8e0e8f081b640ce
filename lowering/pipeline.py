"""Pipeline: ordered, named stages of passes from the xhlo dialect down to LLVM.

Each stage is a list of pass specs: an upstream textual pass pipeline or a
Python callable `(op, pass_) -> None`. Running a pipeline keeps the module
text after every stage. Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from typing import Any

from mlir import ir
from mlir.passmanager import PassManager

from ..dialect.errors import CompileError
from ..dialect.registry import DIALECT
from ..dialect.verify import verify_module
from .lower_pass import lower_xhlo
from .pass_managers import is_own_pass, parsed, verify_each_pass
from .passes.aligned_loop_inputs import aligned_loop_inputs
from .passes.approximations import approximate_math
from .passes.block_cache import cache_blocks
from .passes.destinations import output_tensors, split_shared_inits
from .passes.exact_fma import exact_fma
from .passes.fusion import duplicate_cheap_producers
from .passes.i1_memory import widen_i1_memrefs
from .passes.in_place import elementwise_in_place
from .passes.jit_wrappers import entry_not_inlined
from .passes.lane_folds import transposed_lane_folds
from .passes.loop_hints import no_outer_unrolling
from .passes.loop_state import loop_state_in_place
from .passes.masked_stores import partial_masked_stores_by_lane
from .passes.outline_nests import outline_loop_nests
from .passes.parallel_outputs import outputs_as_inputs
from .passes.parallel_tasks import outline_parallel_loops, parallel_tasks_to_llvm
from .passes.register_tiles import register_tiles_as_rows
from .passes.row_fusion import fuse_rows
from .passes.row_softmax import rows_softmax
from .passes.schedules import schedule_contractions
from .passes.soft_float import expand_narrow_floats, expand_small_floats
from .passes.strided_copies import strided_copies_as_loops
from .passes.tensor_reads import restore_tensor_reads
from .passes.vectorize import hoist_vector_accumulators, schedule_vectorize, super_vectorize
from .reproducer import write_reproducer
from .stage_texts import Snapshot, StageTexts, pending, shown_as

PassSpec = str | Callable[[Any, Any], None]

# The passes that run parallel loops on the thread pool of MLIR's async runtime (which the
# JIT links), as plain tasks without coroutines (lowering/passes/parallel_tasks.py), and
# what `Pipeline.sequential()` does with them: drops them, so that scf.parallel lowers to
# plain loops (convert-scf-to-cf), for code that must not need that runtime (export).
SEQUENTIAL_LOOPS = "scf-forall-to-parallel"
PARALLEL_LOOPS = outline_parallel_loops
TASKS_TO_LLVM = parallel_tasks_to_llvm
_THREAD_POOL_PASSES: tuple[PassSpec, ...] = (PARALLEL_LOOPS, TASKS_TO_LLVM)

# Each stage with a line saying why each pass is there.
DEFAULT_STAGES: list[tuple[str, list[PassSpec]]] = [
    ("hlo", []),  # the module as built (or as given to compile_mlir)
    ("linalg", [
        lower_xhlo,  # our ops -> linalg/tensor/arith/math/complex (Python patterns)
        # Narrow-float ops and conversions as integer code before anything folds them with
        # APFloat (not XLA's semantics; inf -> f4E2M1FN aborted): lowering/passes/soft_float.py.
        expand_narrow_floats,
        "canonicalize",  # folds the signless<->unsigned casts the patterns leave in pairs
        "cse",
    ]),
    ("fused", [
        # No all-parallel generic reads its output: fusion into a broadcasting consumer
        # would keep it as an accumulator updated once per consumer element.
        outputs_as_inputs,
        "linalg-fuse-elementwise-ops",  # chains of elementwise generics -> one loop nest
        # Cheap producers with several users (softmax's exp) copied per user, and fused
        # again: recomputed in each consumer (reductions too) instead of a temporary.
        duplicate_cheap_producers,
        "linalg-fuse-elementwise-ops",
        # Again: a producer fused above may now be a cheap one with several users
        # (attention's scaled scores, read by the max, the exp-sum and the division).
        duplicate_cheap_producers,
        "linalg-fuse-elementwise-ops",
        "canonicalize",
        "cse",
        elementwise_in_place,  # attention's probabilities written over its scores
        rows_softmax,  # softmax as one loop over rows: one exp per element, rows in L1
        fuse_rows,  # other row reductions with their consumer: blocks of rows in L1
    ]),
    ("tiled", [
        # Matmuls and convolutions: packed, tiled for cache and registers, vectorized and
        # split across cores by transform scripts (lowering/passes/schedules.py).
        schedule_contractions,
        "canonicalize",
    ]),
    ("bufferized", [
        loop_state_in_place,  # while bodies update their state in its buffers
        "canonicalize",  # drops what that left dead (the tensor form of loop conditions)
        split_shared_inits,  # CSE may have merged two ops' destinations (a copy each)
        # Results computed straight into the output buffers, every write into those
        # visible to one-shot-bufferize's analysis (instead of eliminate-empty-tensors).
        output_tensors,
        # A callback's result read by a later callback through its buffer (a fold of
        # canonicalize) is read through its tensor again: else the analysis misses it.
        restore_tensor_reads,
        # Loop state may live in fresh buffers each iteration (while loops).
        "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
        "function-boundary-type-conversion=identity-layout-map}",
        "canonicalize",
        # Fixed-size temporaries of a loop body allocated once, before the loop.
        "func.func(buffer-loop-hoisting)",
        # Frees temporaries the computation allocated: upstream's buffer-deallocation-
        # pipeline without its first two canonicalizations (the module is canonical from
        # the pass before last; the last one here still folds what the others leave).
        # The same LLVM stage for every make bench program, ~1 ms less each (2-4 ms for
        # attention, sort, fft).
        "expand-realloc{emit-deallocs=false}",
        "ownership-based-buffer-deallocation",
        "buffer-deallocation-simplification",
        "bufferization-lower-deallocations",
        "cse",
        "canonicalize",
        # Matrices a while loop streams every iteration, copied once to 64-byte aligned
        # memory when numpy's 16-byte alignment would split every vector load.
        aligned_loop_inputs,
        "convert-bufferization-to-memref",  # else a bufferization.clone survives
        # The scheduled contractions' 2-D transfers (accumulator tiles) as 1-D vector
        # loads/stores: the default lowering would go through a stack buffer.
        "func.func(convert-vector-to-scf{full-unroll=true})",
        # ...whose rows a canonicalization would fold into one from_elements of every scalar
        # of the tile (a 2,000-character line down to the "loops" stage).
        register_tiles_as_rows,
        # Copies into or out of part of a buffer (slice, pad, concatenate) as linalg
        # copies, vectorized next, not MLIR's element-at-a-time memrefCopy.
        strided_copies_as_loops,
    ]),
    ("vectorized", [
        # Folds of 16 lanes per row (lane dots, lane-split reduces) as 16 x 16 transposes
        # in registers instead of one gather per lane (lowering/passes/lane_folds.py).
        transposed_lane_folds,
        # Elementwise and reduction generics: tiled, split across cores (scf.forall) and
        # vectorized at the linalg level by transform scripts (lowering/passes/vectorize.py).
        schedule_vectorize,
        "func.func(convert-linalg-to-affine-loops)",
        # No affine-loop-fusion: it moved a fill's loop after the copy into the filled buffer
        # (pad then any consumer gave zeros); linalg-level fusion already ran in "fused".
        super_vectorize,  # 16-lane f32 vectors, where the layouts allow
        hoist_vector_accumulators,  # a loop's accumulator in a register, not in memory
        "canonicalize",
    ]),
    ("loops", [
        # f16/bf16 math ops computed in f32 (before the polynomials, which then cover them).
        "math-extend-to-supported-types",
        approximate_math,  # f32 exp/tanh/log/log1p/sin/cos/pow, f64 exp/log/tanh: no libm per lane
        # f16/bf16 arithmetic as f32 ops between extf/truncf, and those conversions in
        # integer ops (lowering/passes/soft_float.py): no CPU-specific conversion or f16
        # instruction decides a result (AVX512-BF16's flushes subnormals to zero).
        "arith-emulate-unsupported-floats{source-types=bf16,f16 target-type=f32}",
        expand_small_floats,
        # scf.forall -> scf.parallel -> a call to a dispatcher of its body function (one
        # iteration per core's share), made parallel in the "llvm" stage.
        SEQUENTIAL_LOOPS,
        PARALLEL_LOOPS,
        "lower-affine",
        "convert-vector-to-scf",
        # Loops containing loops not unrolled by LLVM (its copies of the inner loops cost
        # JIT time for nothing: our schedules unrolled what pays).
        no_outer_unrolling,
        # Large loop nests of large functions as functions of their own: what the split
        # JIT's second engine may take (inlined back where it does not).
        outline_loop_nests,
        "convert-scf-to-cf",
        "canonicalize",
    ]),
    ("llvm", [
        widen_i1_memrefs,  # LLVM 22 asserts on scalar i1 loads/stores (deallocation's buffers)
        "convert-complex-to-standard",  # complex division/abs with the overflow-safe algorithms
        # vector.fma would become llvm.intr.fmuladd, fused only where the CPU has FMA.
        exact_fma,
        "convert-math-to-llvm",  # math ops with LLVM intrinsics (vector forms kept)
        "convert-math-to-libm",  # the rest (erf, cbrt, atan2...) call libm, element by element
        "convert-vector-to-llvm",
        "expand-strided-metadata",  # before lower-affine: it creates affine.apply
        "lower-affine",
        "arith-expand",
        # Allocations call _mlir_memref_to_llvm_alloc/free, which cache_blocks defines:
        # large temporaries are kept for the next call (lowering/passes/block_cache.py).
        "finalize-memref-to-llvm{use-generic-functions=1}",
        # The complex, arith, index, cf, func and ub conversions in one walk (what each
        # convert-*-to-llvm pass does, the module left as it left it but the order of a
        # few insertvalues): ~1.5 ms less a compile, 4-6 ms for attention, sort, fft.
        # Vector and memref keep their passes: their options and vector's preparation.
        "convert-to-llvm",
        "reconcile-unrealized-casts",
        # No masked store of 8/16/32-bit integers reaches LLVM 22's x86 backend, which
        # can write past its lanes on AVX-512 (lowering/passes/masked_stores.py).
        partial_masked_stores_by_lane,
        cache_blocks,
        # The dispatchers: blocks of iterations on the async runtime's thread pool
        # (libmlir_async_runtime, loaded by runtime/compiler.py).
        TASKS_TO_LLVM,
        entry_not_inlined,  # main compiled once, not also inside each of its wrappers
    ]),
]


_DEFAULT_PASSES = [p for _, passes in DEFAULT_STAGES for p in passes]


def _is_default(spec: PassSpec) -> bool:
    """One of the default pipeline's passes (the same callable, or the same pipeline text:
    upstream passes whose code we know) or another of ours (`own_pass`): run without
    MLIR's verifier after it."""
    return spec in _DEFAULT_PASSES or is_own_pass(spec)


class _ByIdentity:
    """A Python pass in a cache key: equal only to itself. The key holds the pass, so
    its id cannot be reused by another pass while the entry lives (a bare id() could:
    a freed pipeline's pass and a new one at the same address hit the same entry)."""

    __slots__ = ("spec",)

    def __init__(self, spec: PassSpec) -> None:
        self.spec = spec

    def __hash__(self) -> int:
        return id(self.spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByIdentity) and other.spec is self.spec


def describe_pass(spec: PassSpec) -> str:
    return spec if isinstance(spec, str) else getattr(spec, "__name__", repr(spec))


class Pipeline:
    """Ordered named stages; the insert/replace methods change it in place and chain."""

    def __init__(self, stages: list[tuple[str, list[PassSpec]]]) -> None:
        self._stages = [(name, list(passes)) for name, passes in stages]

    @classmethod
    def default(cls) -> Pipeline:
        return cls(copy.copy(DEFAULT_STAGES))

    @property
    def stage_names(self) -> list[str]:
        return [name for name, _ in self._stages]

    def passes(self, stage: str) -> list[PassSpec]:
        return list(self._stages[self._index(stage)][1])

    def _index(self, stage: str) -> int:
        for i, (name, _) in enumerate(self._stages):
            if name == stage:
                return i
        raise KeyError(f"no stage named {stage!r}; stages are {self.stage_names}")

    def insert_after(self, stage: str, passes: PassSpec) -> Pipeline:
        """Append `passes` to the end of `stage`."""
        self._stages[self._index(stage)][1].append(passes)
        return self

    def insert_before(self, stage: str, passes: PassSpec) -> Pipeline:
        """Put `passes` at the start of `stage`."""
        self._stages[self._index(stage)][1].insert(0, passes)
        return self

    def replace(self, stage: str, passes: PassSpec | list[PassSpec]) -> Pipeline:
        """Make `passes` the whole of `stage`."""
        self._stages[self._index(stage)] = (stage, list(passes) if isinstance(passes, list) else [passes])
        return self

    def sequential(self) -> Pipeline:
        """A copy whose loops run on the calling thread: the thread-pool passes of the
        default pipeline (`PARALLEL_LOOPS`, `TASKS_TO_LLVM`) dropped, every other pass kept
        as is. Passes a user spelled differently are kept too (export then refuses a
        program that still calls the async runtime)."""
        return Pipeline([(name, [p for p in passes if not any(p is q for q in _THREAD_POOL_PASSES)])
                         for name, passes in self._stages])

    def only_default_passes(self) -> bool:
        """Whether every pass is one of the default pipeline's (some may be left out)."""
        return all(any(p is q or p == q for q in _DEFAULT_PASSES)
                   for _, passes in self._stages for p in passes)

    def fingerprint(self) -> tuple:
        """A hashable description (callables by identity) for the compile cache."""
        return tuple((name, tuple(p if isinstance(p, str) else _ByIdentity(p) for p in passes))
                     for name, passes in self._stages)

    def __repr__(self) -> str:
        body = "; ".join(f"{n}: {', '.join(describe_pass(p) for p in ps)}" for n, ps in self._stages)
        return f"Pipeline({body})"

    def run(self, module: ir.Module, timings: list[tuple[str, str, float]] | None = None,
            after_each_pass: list[tuple[str, str, str]] | None = None,
            locations: bool = False, per_pass: bool = False) -> StageTexts:
        """Run every stage on `module` in place; the text after each stage, by stage name
        (as `readable_stages` shows it).

        Consecutive textual passes of a stage run in one PassManager (one parse, one
        run); `per_pass` runs every pass in its own. `timings` collects (stage, pass,
        seconds) per run, a merged run named by its passes joined with ","; with
        `per_pass`, one entry per pass. `after_each_pass` collects (stage, pass, module
        text) after every pass (costly: for dumps; implies `per_pass`); `locations`
        prints every op with the source location it came from. A failing merged run
        is replayed pass by pass on a copy of its input, so the error names the pass.
        """

        def text() -> str:
            # The module verified (parsed, or the pass manager's check after every pass):
            # the printer need not verify it again (it does, to print an invalid op in
            # generic form), 15-20% of the printing.
            return module.operation.get_asm(enable_debug_info=locations, assume_verified=True)

        merge = not per_pass and after_each_pass is None
        # Printing after every pass assumes a verified module (lowering/pass_managers.py).
        verify_all = after_each_pass is not None or verify_each_pass()
        # The first stage's text, then a snapshot per stage, printed when read
        # (lowering/stage_texts.py).
        stages: dict[str, str | Snapshot] = {}
        # Until lower_xhlo ran, a Python pass's result is verified by dialect/verify.py too:
        # MLIR's verifier skips the (unregistered) xhlo ops.
        xhlo_level = True
        for name, passes in self._stages:
            # Kept for a reproducer if a pass fails (the previous stage: no cost).
            stage_input = next(reversed(stages.values())) if stages else (text() if passes else "")
            unverified = False
            for group in _groups(passes, merge):
                start = time.perf_counter()
                verify = verify_all or not all(_is_default(p) for p in group)
                unverified = unverified or not verify
                try:
                    if len(group) == 1:
                        run_pass(module, name, group[0], verify_xhlo=xhlo_level, verify=verify)
                    else:
                        _run_merged(module, name, group, verify)
                except CompileError as error:
                    if not hasattr(error, "failed_pass"):
                        raise  # not a pass failure (a pipeline that does not parse)
                    raw_input = stage_input if isinstance(stage_input, str) else stage_input.text()
                    raise _with_reproducer(error, module.context, name, passes, raw_input) \
                        from error.__cause__
                if any(p is lower_xhlo for p in group):
                    xhlo_level = False
                if timings is not None:
                    timings.append((name, ",".join(describe_pass(p) for p in group),
                                    time.perf_counter() - start))
                if after_each_pass is not None:
                    after_each_pass.append((name, describe_pass(group[0]), text()))
            if unverified:
                _verify_stage(module, name, passes, stage_input)
            stages[name] = Snapshot.of(module, locations) if stages else text()
        return readable_stages(stages)


# Discardable attributes the lowering sets for its own passes, not part of the program:
# tensor.empty's `xlamlir.accumulator` keeps CSE from merging two accumulators
# (lowering/ops/reduce.py); its value is a process-wide counter, so it would also make the
# text of one program differ from compile to compile.
_BOOKKEEPING = re.compile(r"(?: \{xlamlir\.accumulator = -?\d+ : i64\}"
                          r"|xlamlir\.accumulator = -?\d+ : i64, |, xlamlir\.accumulator = -?\d+ : i64)")


# MLIR prints an elements attribute of more than 100 elements as one hex string (a
# 4096-element f32 constant is a 32,000-character line); elided as MLIR's own
# `large_elements_limit` printing does.
_LARGE_CONSTANT = re.compile(r'dense<"0x[0-9A-F]{256,}">')
ELIDED = "dense_resource<__elided__>"


@shown_as("readable")
def readable_stage_text(text: str) -> str:
    """A stage's text without the lowering's bookkeeping attributes (the module keeps them)."""
    # The regular expression scans slowly (0.5 ms for 100,000 characters); most stages
    # hold no such attribute.
    return _BOOKKEEPING.sub("", text) if "xlamlir.accumulator" in text else text


def readable_stages(stages: dict[str, str | Snapshot]) -> StageTexts:
    """The stage texts as `exe.stages` shows them, printed from their snapshots when read.

    The first stage is the module as given, exactly (compile_mlir round trips it). The
    stages after it lose the bookkeeping attributes; the ones between the first and the
    last also have their large constants elided (more than 128 bytes of data): only for
    reading, nothing compiles them. The last stage keeps its constants: `exe.export`
    compiles it.
    """
    names = list(stages)
    shown = StageTexts()
    for i, name in enumerate(names):
        value = stages[name]
        how = None if i == 0 else _readable_elided if i < len(names) - 1 else readable_stage_text
        if isinstance(value, Snapshot):
            dict.__setitem__(shown, name, value.text() if how is None else pending(value, how))
        else:
            dict.__setitem__(shown, name, value if how is None else how(value))
    return shown


@shown_as("elided")
def _readable_elided(text: str) -> str:
    return _LARGE_CONSTANT.sub(ELIDED, readable_stage_text(text))


def _groups(passes: list[PassSpec], merge: bool) -> list[list[PassSpec]]:
    """The passes as runs: consecutive textual passes together when `merge`."""
    groups: list[list[PassSpec]] = []
    for spec in passes:
        if merge and isinstance(spec, str) and groups and isinstance(groups[-1][-1], str):
            groups[-1].append(spec)
        else:
            groups.append([spec])
    return groups


def _with_reproducer(error: CompileError, context: ir.Context, stage: str,
                     passes: list[PassSpec], stage_input: str) -> CompileError:
    """`error` with a reproducer written (lowering/reproducer.py) and named in its message.

    The stage is replayed pass by pass from its input to find the module just before
    the failing pass; a failure only the merged run shows is reproduced as that run."""
    folder = None
    try:
        found = _failing_pass_input(context, stage, passes, stage_input)
        if found is None:
            note = "\n(no reproducer: the failure did not recur when the stage was replayed)"
        else:
            folder, note = write_reproducer(stage, found[0], found[1], error.diagnostics or str(error))
            note = "\n" + note
    except Exception as e:  # noqa: BLE001 - a reproducer must never hide the failure itself
        note = f"\n(no reproducer written: {type(e).__name__}: {e})"
    wrapped = CompileError(f"{error}{note}", error.stage, error.diagnostics)
    wrapped.failed_pass = error.failed_pass  # type: ignore[attr-defined]
    wrapped.reproducer = folder  # type: ignore[attr-defined]
    return wrapped


def _failing_pass_input(context: ir.Context, stage: str, passes: list[PassSpec],
                        stage_input: str) -> tuple[PassSpec, str, CompileError] | None:
    """(failing pass, module text before it, its error), replaying the stage from
    `stage_input` with verification after every pass: one pass at a time, then as merged
    runs (a failure only those show)."""
    # Source locations only if the stage text has them: else the parser's own ("-":2:19)
    # would point into a buffer the reader never sees.
    located = "loc(" in stage_input
    for merge in (False, True):
        module = ir.Module.parse(stage_input, context=context)
        for group in _groups(passes, merge):
            before = module.operation.get_asm(enable_debug_info=located)
            spec: PassSpec = group[0] if len(group) == 1 else ",".join(str(p) for p in group)
            try:
                run_pass(module, stage, spec, verify_xhlo=f'"{DIALECT}.' in before)
            except CompileError as error:
                return spec, before, error
    return None


def _verify_stage(module: ir.Module, stage: str, passes: list[PassSpec],
                  stage_input: str | Snapshot) -> None:
    """The module after a stage whose passes ran without the pass manager's verification:
    valid, else the CompileError of replaying the stage with it (naming the pass whose
    result is invalid, with a reproducer)."""
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        raw_input = stage_input if isinstance(stage_input, str) else stage_input.text()
        found = _failing_pass_input(module.context, stage, passes, raw_input)
        if found is not None:
            error = found[2]
        else:
            error = CompileError(f"stage {stage!r}: the module after it is invalid:\n{e}",
                                 stage, str(e))
            error.failed_pass = None  # type: ignore[attr-defined]
        raise _with_reproducer(error, module.context, stage, passes, raw_input) from e


def _run_merged(module: ir.Module, stage: str, group: list[PassSpec], verify: bool = True) -> None:
    """Textual passes in one PassManager; on failure, the same passes one by one on a
    copy of the input, for an error naming the failing pass."""
    before = module.operation.clone()  # detached; no measurable cost next to the passes
    try:
        run_pass(module, stage, ",".join(str(p) for p in group), verify=verify)
    except CompileError as merged_error:
        for spec in group:
            run_pass(before, stage, spec)  # raises the error naming the pass
        raise merged_error from merged_error.__cause__  # the replay passed: the merged error
    finally:
        before.erase()


def run_pass(module: ir.Module | ir.Operation, stage: str, spec: PassSpec,
             verify_xhlo: bool = False, verify: bool = True) -> None:
    """Run one pass spec; `verify_xhlo`: the module may still hold xhlo ops, which a
    Python pass's result is checked for (`dialect.verify`, without the shape rules);
    `verify`: MLIR's verifier runs after every pass (else the caller verifies)."""
    context = module.context
    failure: list[BaseException] = []
    diagnostics: list[str] = []

    def collect(d: Any) -> bool:
        diagnostics.append(f"{d.location}: {d.message}")
        for note in d.notes:
            diagnostics.append(f"  note: {note.location}: {note.message}")
        return True

    try:
        pm = PassManager("builtin.module", context=context)
        pm.enable_verifier(verify)
        if isinstance(spec, str):
            pipeline_text = spec
            try:
                pm = parsed(spec, context, verify)
            except Exception as e:  # noqa: BLE001 - the binding raises ValueError/MLIRError
                raise CompileError(f"stage {stage!r}: cannot parse pass pipeline {spec!r}: {e}",
                                   stage, str(e)) from None
        else:
            pipeline_text = describe_pass(spec)
            pm.add(_guarded(spec, failure, verify_xhlo and spec is not lower_xhlo),
                   name=f"py-{pipeline_text}")
        handler = context.attach_diagnostic_handler(collect)
        try:
            pm.run(module.operation)
        finally:
            handler.detach()
    except CompileError:
        raise
    except Exception as e:  # noqa: BLE001 - MLIRError or a Python pass's error
        cause = failure[0] if failure else e
        message = "\n".join(diagnostics) or str(e)
        if failure:  # a Python pass raised: its error is the reason
            message = f"{failure[0]!r}\n{message}"
        # Run() adds the reproducer (its folder and the command) to the message.
        error = CompileError(f"stage {stage!r}, pass {pipeline_text!r} failed:\n{message}",
                             stage, message)
        error.failed_pass = spec  # type: ignore[attr-defined]
        raise error from cause
    if failure:
        error = CompileError(f"stage {stage!r}, Python pass {pipeline_text!r} failed: {failure[0]!r}",
                             stage, str(failure[0]))
        error.failed_pass = spec  # type: ignore[attr-defined]
        raise error from failure[0]


def _guarded(fn: Callable[[Any, Any], None], failure: list[BaseException],
             verify_xhlo: bool = False) -> Callable[[Any, Any], None]:
    """A Python pass whose exception becomes a pass failure (the binding would print it)."""

    def run(op: Any, pass_: Any) -> None:
        try:
            fn(op, pass_)
            if verify_xhlo:
                verify_module(op, shape_rules=False)
        except BaseException as e:  # noqa: BLE001 - re-raised as CompileError by the caller
            failure.append(e)
            pass_.signal_pass_failure()

    return run
