"""Ahead-of-time export: an Executable as a shared library plus a C header.

`export_executable(exe, "out/libaxpy.so")` writes `out/libaxpy.so` and
`out/libaxpy.h`. The library exports one function, `int NAME(void **args,
void **results)`, that fills the memref descriptors of the destination-passing
entry point (`lowering.patterns.boundary`) from plain data pointers and calls
`_mlir_ciface_main`. The toolchain is the one the MLIR/LLVM wheels ship plus
the system C compiler:

    last pipeline stage (LLVM dialect) --mlir-translate--> LLVM IR
        --opt -O3--> optimized IR --llc -O3, PIC--> object
        + generated C wrapper --cc -shared--> lib.so (libc, and libm if called)

The code is generated for `target_cpu`, by default a portable x86-64 level
(`targets.PORTABLE`, x86-64-v3: AVX2 and FMA), not the exporting machine; the
header names it. When it differs from the CPU the executable was JIT-compiled
for, the program is lowered again with that CPU's matmul/conv tiles.

`opt -O3` stands in for the LLVM optimization pipeline the ExecutionEngine
runs before code generation (llc alone would not run it), so the library runs
the same code as the JIT. Nothing of MLIR is linked in: the one runner-utils
function the lowering can call (`memrefCopy`, for copies between
non-contiguous memrefs) is provided by the wrapper, since the wheel's
`libmlir_c_runner_utils.so` itself depends on libMLIR; so are the bf16
conversions LLVM would call (the pipeline
expands them in integer code: lowering/passes/soft_float.py). Only ELF targets (Linux) are
handled: the link uses a GNU version script. Imports `dialect` and `lowering`.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..dialect.element_types import PrimitiveType
from ..dialect.errors import CompileError
from ..dialect.shape import Shape
from ..lowering.ops.custom import CUSTOM_CALLS_ATTR
from ..lowering.ops.rng import RNG_STATE_GLOBAL
from ..lowering.passes.block_cache import BLOCKS, MIN_BYTES, SLOTS
from ..lowering.patterns.boundary import result_leaf_shapes
from ..lowering.pipeline import Pipeline
from .lower import lower_mlir
from .targets import HOST, PORTABLE, host_cpu, resolve

#: The exporting machine's CPU ("host" is the same); `target_cpu` defaults to PORTABLE.
HOST_CPU = "native"

_TOOL_TIMEOUT = 600  # seconds; a big module can take a while in opt/llc

# C/C++ keywords and names a C program already owns: an exported symbol must not be one.
_RESERVED = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
    char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
    co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long main mutable namespace new noexcept not
    not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires
    restrict return short signed sizeof static static_assert static_cast struct switch template
    this thread_local throw true try typedef typeid typename union unsigned using virtual void
    volatile wchar_t while xor xor_eq
""".split())

# The C type one element is stored as; complex types have none (two floats/doubles each).
_C_TYPES: dict[PrimitiveType, str] = {
    PrimitiveType.PRED: "uint8_t", PrimitiveType.S8: "int8_t", PrimitiveType.S16: "int16_t",
    PrimitiveType.S32: "int32_t", PrimitiveType.S64: "int64_t", PrimitiveType.U8: "uint8_t",
    PrimitiveType.U16: "uint16_t", PrimitiveType.U32: "uint32_t", PrimitiveType.U64: "uint64_t",
    PrimitiveType.F16: "uint16_t", PrimitiveType.BF16: "uint16_t", PrimitiveType.F32: "float",
    PrimitiveType.F64: "double",
    # One byte per element holding the value's bits in its low bits, the rest zero (as ml_dtypes).
    **{t: "uint8_t" for t in PrimitiveType if t.is_sub_byte_int or t.is_narrow_float},
}

_ARRAY_TYPES = [t for t in PrimitiveType if t.is_array_type]


@dataclass(frozen=True)
class _Leaf:
    """One array the entry point reads or writes, with the layout the compiled code assumes."""

    role: str  # "ARG" or "RESULT"
    index: int  # position in args[] / results[]
    shape: Shape
    where: str  # what it is in the computation's signature, for the header's comments

    @property
    def strides(self) -> tuple[int, ...]:
        """Element strides of the dense array in its layout (the descriptor's strides)."""
        width = self.shape.element_type.byte_width
        return tuple(s // width for s in self.shape.byte_strides())


def c_identifier(name: str) -> str:
    """`name` made a valid C identifier that does not clash with a keyword or `main`."""
    ident = re.sub(r"\W", "_", name, flags=re.ASCII) or "computation"
    if ident[0].isdigit():
        ident = "_" + ident
    if ident in _RESERVED or ident.startswith("_mlir"):
        ident += "_"
    return ident


_ASYNC_RUNTIME = "mlirAsyncRuntime"


def _lowered_again(exe: Any, cpu: str) -> str:
    """The library links libc (and libm) only, not MLIR's async runtime, which the JIT uses
    to run parallel loops on a thread pool; and its code is for `cpu`, whose matmul/conv
    tiles may differ from the JIT's: lower the program again for `cpu` with its parallel
    loops sequential (`Pipeline.sequential()`), without the JIT."""
    if "hlo" not in exe.stages:
        raise CompileError("export: the program must be lowered again (for another CPU, or without "
                           "the async runtime) and has no 'hlo' stage to start from", "export")
    pipeline = getattr(exe, "pipeline", None) or Pipeline.default()
    text = list(lower_mlir(exe.stages["hlo"], pipeline.sequential(), cpu).values())[-1]
    if _ASYNC_RUNTIME in text:
        raise CompileError("export: the program still calls the async runtime after its async "
                           "passes were removed from the pipeline", "export")
    return text


def header_path(path: str | os.PathLike[str]) -> Path:
    """The header written beside the library: same directory and stem, `.h`."""
    return Path(path).with_suffix(".h")


def export_executable(exe: Any, path: str | os.PathLike[str], *, target_cpu: str | None = None,
                      symbol: str | None = None, cpu: str | None = None) -> None:
    """Write `exe` as a shared library at `path` and its C header beside it (same stem, `.h`).

    `target_cpu` is the CPU the code is generated for (`-mcpu` of opt/llc): by default
    `PORTABLE` (x86-64-v3), "host"/"native" for this machine, or any LLVM CPU name (it
    need not run here); `cpu` is its older name. `symbol` overrides the exported
    function's name (default: the computation's name made a C identifier). Raises
    ArgumentError for an unknown CPU, CompileError if a tool is missing or fails.
    """
    if target_cpu is not None and cpu is not None and (
            resolve(target_cpu, runs_here=False) != resolve(cpu, runs_here=False)):
        raise CompileError(f"export: target_cpu={target_cpu!r} and cpu={cpu!r} disagree (cpu is the "
                           f"older name of target_cpu: pass one)", "export")
    target = resolve(target_cpu or cpu or PORTABLE, runs_here=False)
    name = c_identifier(symbol if symbol is not None else exe.name)
    if symbol is not None and name != symbol:
        raise CompileError(f"export: symbol {symbol!r} is not a usable C identifier "
                           f"(try {name!r})", "export")
    if getattr(exe, "num_replicas", 1) != 1:
        raise CompileError(f"export: only single-replica executables can be exported (this one "
                           f"has num_replicas={exe.num_replicas})", "export")
    args, results = _leaves(exe)
    library = Path(path)
    header = header_path(library)
    if library == header:
        raise CompileError(f"export: {str(library)!r} would be overwritten by its own header", "export")
    if not exe.stages:
        raise CompileError("export: the executable has no pipeline stages", "export")
    # The last stage is what the JIT compiled (a custom pipeline may rename or add stages).
    llvm_text = exe.stages[next(reversed(exe.stages))]
    if _ASYNC_RUNTIME in llvm_text or target != getattr(exe, "target_cpu", HOST):
        llvm_text = _lowered_again(exe, target)
    triple = _target_triple()
    mcpu = HOST_CPU if target == HOST else target
    cpu_note = f"host = {host_cpu()}" if target == HOST else target
    library.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="xlamlir-export-") as tmp:
        work = Path(tmp)
        (work / "module.mlir").write_text(llvm_text)
        _run([_tool("mlir", "mlir-translate"), "--mlir-to-llvmir", "module.mlir", "-o", "module.ll"],
             work, "mlir-translate")
        target_flags = [f"-mtriple={triple}", f"-mcpu={mcpu}"]
        _run([_tool("llvm", "opt"), "-O3", *target_flags, "module.ll", "-o", "module.bc"], work, "opt")
        _run([_tool("llvm", "llc"), "-O3", *target_flags, "-relocation-model=pic", "-filetype=obj",
              "module.bc", "-o", "module.o"], work, "llc")
        undefined, defined = _symbols(work / "module.o", work)
        if "_mlir_ciface_main" not in defined:
            raise CompileError("export: the compiled module has no _mlir_ciface_main (the last "
                               "stage must leave the entry point in the LLVM dialect)", "export")
        _refuse_runtime_calls(undefined, llvm_text)
        seeded = RNG_STATE_GLOBAL in defined
        exported = [name, f"{name}_seed"] if seeded else [name]
        clashes = sorted(set(exported) & (undefined | defined))
        if clashes:
            raise CompileError(f"export: the exported name {clashes[0]!r} clashes with a symbol "
                               f"the compiled code defines or calls; pass symbol= (--symbol) to "
                               f"rename it", "export")
        (work / "wrapper.c").write_text(_wrapper_source(name, args, results,
                                                        "memrefCopy" in undefined, seeded))
        objects = ["module.o"]
        if undefined & _BF16_HELPERS:
            # Written in LLVM IR: bf16 travels in an SSE register, which C cannot portably say.
            (work / "bf16.ll").write_text(_BF16_IR)
            _run([_tool("llvm", "llc"), "-O3", *target_flags, "-relocation-model=pic", "-filetype=obj",
                  "bf16.ll", "-o", "bf16.o"], work, "llc")
            objects.append("bf16.o")
        # Only the entry point (and its seed function) stays global: the object's `main`,
        # `_mlir_ciface_main` or RNG state would otherwise be exported and could clash with,
        # or interpose on, the symbols of the program loading the library.
        (work / "exports.map").write_text(f"{{ global: {'; '.join(exported)}; local: *; }};\n")
        built = work / "lib.so"
        _run([*_cc(), "-shared", "-fPIC", "-O2", "-fvisibility=hidden",
              "-o", str(built), "wrapper.c", *objects, "-Wl,--version-script=exports.map",
              "-Wl,--no-undefined", "-Wl,-z,noexecstack", "-Wl,--strip-all", "-lm"], work, "cc")
        text = _header_source(name, library, args, results, cpu_note, triple, exe.name, seeded,
                              _needed(built, work), f"@{BLOCKS}" in llvm_text)
        # Replace the outputs only once everything built, so a failed export leaves old ones intact.
        _install({library: (built.read_bytes(), 0o755), header: (text.encode(), 0o644)})


def _leaves(exe: Any) -> tuple[list[_Leaf], list[_Leaf]]:
    """The argument and result arrays in the entry point's order, with the layouts the
    compiled code assumes: every parameter leaf keeps its layout (also inside a tuple, as
    `lowering.patterns.boundary.rewrite_entry` compiles them), and the results are
    `result_leaf_shapes` (a single array keeps its layout, tuples are flattened)."""
    args: list[_Leaf] = []
    for i, shape in enumerate(exe.parameter_shapes):
        if shape.is_tuple():
            for j, leaf in enumerate(shape.flatten()):
                _require_array(leaf, f"parameter {i} leaf {j}")
                args.append(_Leaf("ARG", len(args), leaf,
                                  f"parameter {i} ({shape}), leaf {j}"))
        else:
            _require_array(shape, f"parameter {i}")
            args.append(_Leaf("ARG", len(args), shape, f"parameter {i}"))
    results: list[_Leaf] = []
    tuple_result = exe.result_shape.is_tuple()
    for j, leaf in enumerate(result_leaf_shapes(exe.result_shape)):
        _require_array(leaf, f"result leaf {j}")
        where = f"result element {j} of {exe.result_shape}" if tuple_result else "the result"
        results.append(_Leaf("RESULT", j, leaf, where))
    return args, results


def _refuse_runtime_calls(undefined: set[str], llvm_text: str) -> None:
    """custom_call, infeed, outfeed, send and recv call functions the Python runtime binds at
    JIT time (`lowering.ops.custom`); a library without Python has nothing to bind them to."""
    symbols = sorted(s.removeprefix("_mlir_ciface_") for s in undefined if "xlamlir_custom_" in s)
    if not symbols:
        return
    # The module attribute lists, per runtime-bound symbol, the custom-call target it stands for.
    targets = dict(re.findall(r'symbol = "(xlamlir_custom_\d+)", target = "([^"]*)"', llvm_text))
    names = ", ".join(repr(n) for n in sorted({targets.get(s, s) for s in symbols}))
    raise CompileError(f"export: the computation calls {names} through custom_call, infeed, "
                       f"outfeed, send or recv; the Python runtime binds those at JIT time "
                       f"(module attribute {CUSTOM_CALLS_ATTR}), so it cannot be exported "
                       f"without Python", "export")


def _require_array(shape: Shape, where: str) -> None:
    if not shape.is_array():
        raise CompileError(f"export: {where} is {shape}; only array parameters and results "
                           f"(and tuples of them) can be exported", "export")


def _tool(package: str, name: str) -> str:
    """A tool from the `mlir` or `llvm` wheel (bin/ beside the package), else from PATH."""
    try:
        module = importlib.import_module(package)
        for root in getattr(module, "__path__", []):
            candidate = Path(root) / "bin" / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    except ImportError:
        pass
    found = shutil.which(name)
    if found is None:
        raise CompileError(f"export: cannot find {name!r} (looked in the {package} wheel and PATH)",
                           "export")
    return found


def _cc() -> list[str]:
    """The system C compiler: $CC (which may carry flags, e.g. "ccache gcc"), else `cc`."""
    return shlex.split(os.environ.get("CC", "")) or ["cc"]


def _target_triple() -> str:
    """The C compiler's target, so the object links with the wrapper it compiles."""
    out = _run([*_cc(), "-dumpmachine"], Path.cwd(), "cc -dumpmachine")
    triple = out.strip()
    if not triple:
        raise CompileError("export: `cc -dumpmachine` printed no target triple", "export")
    return triple


def _run(command: Sequence[str], cwd: Path, what: str) -> str:
    try:
        proc = subprocess.run(list(command), cwd=cwd, capture_output=True, text=True,
                              timeout=_TOOL_TIMEOUT)
    except FileNotFoundError:
        raise CompileError(f"export: cannot run {command[0]!r}", "export") from None
    except subprocess.TimeoutExpired:
        raise CompileError(f"export: {what} timed out after {_TOOL_TIMEOUT}s", "export") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise CompileError(f"export: {what} failed (exit {proc.returncode}):\n{detail}", "export",
                           detail)
    return proc.stdout


def _symbols(obj: Path, cwd: Path) -> tuple[set[str], set[str]]:
    """(undefined, defined external) symbol names of an object file."""
    nm = _tool("llvm", "llvm-nm")
    undefined = set(_run([nm, "--undefined-only", "--format=just-symbols", str(obj)], cwd,
                         "llvm-nm").split())
    defined = set(_run([nm, "--defined-only", "--extern-only", "--format=just-symbols", str(obj)],
                       cwd, "llvm-nm").split())
    return undefined, defined


def _install(files: dict[Path, tuple[bytes, int]]) -> None:
    """Write every file beside its target under a unique name, then rename them all into
    place: readers never see a half-written library or a header without its library."""
    staged: list[tuple[str, Path]] = []
    try:
        for target, (data, mode) in files.items():
            fd, staging = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            staged.append((staging, target))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(staging, mode)
        for staging, target in staged:
            os.replace(staging, target)
    finally:
        for staging, _ in staged:
            if os.path.exists(staging):
                os.unlink(staging)


# ---- generated C ------------------------------------------------------------------------------


def _descriptor_struct(rank: int) -> str:
    arrays = f" int64_t sizes[{rank}]; int64_t strides[{rank}];" if rank else ""
    return (f"typedef struct {{ void *allocated; void *aligned; int64_t offset;{arrays} }} "
            f"memref_r{rank};")


# MLIR's CRunnerUtils `memrefCopy(elemSize, UnrankedMemRefType *src, *dst)`: a strided copy
# between two memrefs of the same shape, needed when finalize-memref-to-llvm cannot prove
# both sides contiguous. Written here so the library does not need libmlir_c_runner_utils.
MEMREF_COPY = r"""
typedef struct { int64_t rank; void *descriptor; } unranked_memref;
typedef struct { char *allocated; char *aligned; int64_t offset; int64_t rest[]; } ranked_memref;

void memrefCopy(int64_t elem_size, unranked_memref *src_arg, unranked_memref *dst_arg) {
  const ranked_memref *src = (const ranked_memref *)src_arg->descriptor;
  const ranked_memref *dst = (const ranked_memref *)dst_arg->descriptor;
  const int64_t rank = src_arg->rank;
  const int64_t *sizes = src->rest, *src_strides = src->rest + rank;
  const int64_t *dst_strides = dst->rest + rank;
  char *in = src->aligned + src->offset * elem_size;
  char *out = dst->aligned + dst->offset * elem_size;
  int64_t index[64] = {0};  /* memrefs of rank > 64 do not occur */
  for (int64_t d = 0; d < rank; ++d)
    if (sizes[d] == 0) return;
  if (rank == 0 || rank > 64) {
    memcpy(out, in, (size_t)elem_size);
    return;
  }
  for (;;) {
    int64_t in_at = 0, out_at = 0;
    for (int64_t d = 0; d < rank; ++d) {
      in_at += index[d] * src_strides[d];
      out_at += index[d] * dst_strides[d];
    }
    memcpy(out + out_at * elem_size, in + in_at * elem_size, (size_t)elem_size);
    int64_t d = rank - 1;
    while (d >= 0 && ++index[d] == sizes[d]) index[d--] = 0;
    if (d < 0) return;
  }
}
"""


# f32/f64 -> bf16, which LLVM's code generator calls on CPUs without bf16 conversion
# instructions (a fallback: the pipeline expands conversions in integer code, so none is
# left normally). compiler-rt has them, but libgcc only from GCC 13 on. The rules of
# lowering/passes/soft_float.py: round to nearest even, subnormals kept, a NaN keeps its sign and
# leading payload and becomes quiet; f64 goes through f32 first (as XLA and ml_dtypes).
_BF16_HELPERS = frozenset({"__truncsfbf2", "__truncdfbf2"})
_BF16_IR = """
define hidden bfloat @__truncsfbf2(float %f) {
  %u = bitcast float %f to i32
  %abs = and i32 %u, 2147483647
  %isnan = icmp ugt i32 %abs, 2139095040
  %high = lshr i32 %u, 16
  %lsb = and i32 %high, 1
  %bias = add i32 %lsb, 32767
  %sum = add i32 %u, %bias
  %rounded = lshr i32 %sum, 16
  %qnan = or i32 %high, 64
  %bits = select i1 %isnan, i32 %qnan, i32 %rounded
  %short = trunc i32 %bits to i16
  %result = bitcast i16 %short to bfloat
  ret bfloat %result
}

define hidden bfloat @__truncdfbf2(double %d) {
  %f = fptrunc double %d to float
  %result = call bfloat @__truncsfbf2(float %f)
  ret bfloat %result
}
"""


def _wrapper_source(name: str, args: list[_Leaf], results: list[_Leaf], memref_copy: bool,
                    seeded: bool) -> str:
    leaves = args + results
    ranks = sorted({leaf.shape.rank for leaf in leaves})
    lines = [
        f"/* Generated by xlamlir: the C entry point `{name}` over the compiled computation. */",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#include <string.h>",
        "",
        *(_descriptor_struct(r) for r in ranks),
        "",
        # Every descriptor is passed by pointer (llvm.emit_c_interface), so `void *` is exact.
        f"extern void _mlir_ciface_main({', '.join(['void *'] * len(leaves)) or 'void'});",
    ]
    if memref_copy:
        lines.append(MEMREF_COPY)
    if seeded:
        # The state `lowering.ops.rng` keeps: a 128-bit counter, low word first; seeding sets it
        # to (0, seed) as `set_rng_seed` does for the JIT, so both give the same numbers.
        lines += [
            "",
            f"extern uint64_t {RNG_STATE_GLOBAL}[2];",
            f"__attribute__((visibility(\"default\"))) void {name}_seed(uint64_t seed) {{",
            f"  {RNG_STATE_GLOBAL}[0] = 0;",
            f"  {RNG_STATE_GLOBAL}[1] = seed;",
            "}",
        ]
    lines += [
        "",
        f"__attribute__((visibility(\"default\"))) int {name}(void **args, void **results) {{",
    ]
    if args:
        lines.append("  if (args == NULL) return 1;")
    if results:
        lines.append("  if (results == NULL) return 1;")
    descriptors = []
    for k, leaf in enumerate(leaves):
        array = "args" if leaf.role == "ARG" else "results"
        pointer = f"{array}[{leaf.index}]"
        if leaf.shape.numel:
            # An empty array may come as NULL; the code never touches its data.
            lines.append(f"  if ({pointer} == NULL) return 1;")
        rank = leaf.shape.rank
        init = f"{pointer}, {pointer}, 0"
        if rank:
            init += (f", {{{', '.join(map(str, leaf.shape.dimensions))}}}, "
                     f"{{{', '.join(map(str, leaf.strides))}}}")
        lines.append(f"  memref_r{rank} d{k} = {{{init}}};")
        descriptors.append(f"&d{k}")
    lines += [
        f"  _mlir_ciface_main({', '.join(descriptors)});",
        "  return 0;",
        "}",
        "",
    ]
    return "\n".join(lines)


def _guard(text: str) -> str:
    return re.sub(r"\W", "_", text, flags=re.ASCII).upper()


def _needed(library: Path, cwd: Path) -> list[str]:
    """The shared libraries `library` links against (its ELF NEEDED entries)."""
    out = _run([_tool("llvm", "llvm-readelf"), "--dynamic-table", str(library)], cwd, "llvm-readelf")
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _header_source(name: str, library: Path, args: list[_Leaf], results: list[_Leaf], cpu: str,
                   triple: str, computation: str, seeded: bool, needed: list[str],
                   parks_blocks: bool = False) -> str:
    guard = f"XLAMLIR_{_guard(library.stem)}_{_guard(name)}_H_"
    if seeded:
        state = [
            " * array's pointer may be NULL).",
            " *",
            " * The computation draws random numbers: the library holds the generator's state,",
            f" * which starts at seed 0 when it is loaded and advances on every call; {name}_seed(n)",
            " * resets it to seed n. A call and seed give the same numbers as the Python executable",
            " * (exe.seed(n)). Calls running at the same time race on that state: serialize them.",
        ]
    elif parks_blocks:
        state = [" * array's pointer may be NULL). The function keeps no state but up to"
                 f" {SLOTS} freed",
                 f" * temporaries of {MIN_BYTES // 1024} KB or more, which later calls reuse (no page"
                 " faults of",
                 " * fresh memory) and unloading the library frees: concurrent calls are safe."]
    else:
        state = [" * array's pointer may be NULL). The function keeps no state: concurrent calls",
                 " * are safe."]
    lines = [
        f"/* {library.stem}.h: C interface of {library.name}, exported by xlamlir from the",
        f" * computation {computation!r} for {triple} (-mcpu={cpu}). Generated; do not edit.",
        " *",
        f" *   int {name}(void **args, void **results);",
        " *",
        f" * args[i] points to argument i's data ({name}_NUM_ARGS of them: one per parameter, a",
        " * tuple parameter taking one entry per leaf array, depth-first), results[j] to",
        f" * caller-allocated storage for result j ({name}_NUM_RESULTS: the array result, or each",
        " * element of a tuple result in order, nested tuples flattened depth-first). Arrays are",
        " * dense, with the element counts, sizes and types below, aligned at least to their",
        " * element size, and laid out as their shape's layout says: row-major (C order) unless",
        " * _LAYOUT gives another minor_to_major (e.g. {0,1}: column-major). pred is one byte per",
        " * element (0 or 1), f16/bf16 are raw 16-bit patterns, s2/s4/u2/u4 and the f8/f4 types",
        " * are one byte per element with the value's bits in its low bits (the rest zero, as",
        " * ml_dtypes stores them), c64/c128 are (real, imaginary) pairs of float/double.",
        " * Results must not overlap the arguments.",
        " *",
        " * Returns 0 on success, 1 if args, results or a pointer in them is NULL (an empty",
        *state,
        " *",
        f" * Machine code for the CPU {cpu}: it runs on CPUs with at least that one's instruction",
        " * sets, with results bit-identical to the Python executable's on any CPU.",
        (f" * The library links against {', '.join(needed)} only." if needed else
         " * The library links against no shared library at all, not even libc."),
        " */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stdint.h>",
        "",
        "/* Element types, numbered as XLA's PrimitiveType (shared by every exported header). */",
        "#ifndef XLAMLIR_TYPES_DEFINED",
        "#define XLAMLIR_TYPES_DEFINED",
        *(f"#define XLAMLIR_{t.name} {int(t)}" for t in _ARRAY_TYPES),
        "#endif",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f"#define {name}_NUM_ARGS {len(args)}",
        f"#define {name}_NUM_RESULTS {len(results)}",
        f"#define {name}_HAS_RNG_STATE {int(seeded)}",
        f"#define {name}_TARGET_CPU \"{cpu}\"",
    ]
    for leaf in args + results:
        lines += ["", *_leaf_macros(name, leaf)]
    lines += [
        "",
        f"int {name}(void **args, void **results);",
        *([f"void {name}_seed(uint64_t seed);"] if seeded else []),
        "",
        "#ifdef __cplusplus",
        "}  /* extern \"C\" */",
        "#endif",
        "",
        f"#endif  /* {guard} */",
        "",
    ]
    return "\n".join(lines)


def _leaf_macros(name: str, leaf: _Leaf) -> list[str]:
    shape = leaf.shape
    t = shape.element_type
    p = f"{name}_{leaf.role}{leaf.index}"
    mtm = shape.layout.minor_to_major if shape.layout is not None else ()
    lines = [
        f"/* {'args' if leaf.role == 'ARG' else 'results'}[{leaf.index}]: {leaf.where}, {shape} */",
        f'#define {p}_SHAPE "{shape}"',
        f'#define {p}_DTYPE "{t.text_name}"',
        f"#define {p}_TYPE XLAMLIR_{t.name}",
    ]
    if t in _C_TYPES:
        lines.append(f"#define {p}_CTYPE {_C_TYPES[t]}")
    lines += [
        f"#define {p}_ITEMSIZE {t.byte_width}",
        f"#define {p}_RANK {shape.rank}",
        *(f"#define {p}_DIM{d} {n}" for d, n in enumerate(shape.dimensions)),
        f"#define {p}_COUNT {shape.numel}",
        f"#define {p}_BYTES {shape.byte_size}",
        f'#define {p}_LAYOUT "{{{",".join(map(str, mtm))}}}"',
    ]
    return lines
