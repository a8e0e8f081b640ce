"""Target CPUs: which names are valid, whether this machine runs their code, and how
the JIT is made to generate code for one.

`target_cpu` is "host" (this machine, also spelled "native"), an x86-64 psABI level
("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4") or any LLVM CPU name for this
machine's target (`llc -mcpu=help`). The MLIR ExecutionEngine always builds its
TargetMachine for the host, and its Python binding takes no target: the code is
retargeted per function instead, with the LLVM function attributes "target-cpu"
and "target-features" (which replace the TargetMachine's CPU and host feature
string for that function). Imports `dialect`.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from mlir import ir

from ..dialect.errors import ArgumentError

HOST = "host"
ENV = "XLAMLIR_TARGET_CPU"
#: What `exe.export` generates code for by default: AVX2 + FMA, most x86-64 machines
#: since 2013-2015 (Haswell, Zen).
PORTABLE = "x86-64-v3"
LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")

# The /proc/cpuinfo flags each psABI level requires (cumulative), for "does this
# machine run code built for it".
_LEVEL_FLAGS: dict[str, tuple[str, ...]] = {
    "x86-64": ("cx8", "cmov", "fxsr", "mmx", "sse", "sse2"),
    "x86-64-v2": ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"),
    "x86-64-v3": ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"),
    "x86-64-v4": ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
}
_EXAMPLES = "'host', 'x86-64-v2', 'x86-64-v3', 'x86-64-v4' or an LLVM CPU name such as 'haswell' or 'znver4'"


def default_target() -> str:
    """$XLAMLIR_TARGET_CPU, else "host"."""
    return os.environ.get(ENV, "").strip() or HOST


def resolve(target_cpu: Any, *, runs_here: bool = True) -> str:
    """The canonical name of `target_cpu` ("host" for "host"/"native"); None means the
    default. Raises ArgumentError for an unknown name, or (`runs_here`) for a CPU whose
    instructions this machine lacks: the JIT runs the code here."""
    if target_cpu is None:
        target_cpu = default_target()
    if not isinstance(target_cpu, str) or not target_cpu.strip():
        raise ArgumentError(f"target_cpu must be a CPU name ({_EXAMPLES}), got {target_cpu!r}")
    name = target_cpu.strip()
    if name in (HOST, "native"):
        return HOST
    if name not in known_cpus():
        raise ArgumentError(f"target_cpu {name!r} is not a CPU LLVM knows for {host_triple()}: use "
                            f"{_EXAMPLES} (`llc -mcpu=help` lists them)")
    if runs_here:
        missing = missing_features(name)
        if missing:
            raise ArgumentError(
                f"target_cpu {name!r}: this machine ({host_cpu()}) lacks {', '.join(missing)}, so it "
                f"cannot run code built for it; the JIT runs here. Export a library for that CPU "
                f"instead (exe.export(path, target_cpu={name!r})).")
    return name


def _llvm_tool(name: str) -> str:
    try:
        for root in getattr(importlib.import_module("llvm"), "__path__", []):
            candidate = Path(root) / "bin" / name
            if candidate.is_file():
                return str(candidate)
    except ImportError:
        pass
    found = shutil.which(name)
    if found is None:
        raise ArgumentError(f"target_cpu: cannot find LLVM's {name!r} to check CPU names")
    return found


def _llc(*args: str) -> str:
    proc = subprocess.run([_llvm_tool("llc"), *args], capture_output=True, text=True, timeout=60)
    return proc.stdout + proc.stderr


@functools.cache
def _llc_version() -> str:
    return _llc("--version")


def host_cpu() -> str:
    """This machine's CPU as LLVM names it (what "host" compiles for)."""
    found = re.search(r"Host CPU:\s*(\S+)", _llc_version())
    return found.group(1) if found else "unknown"


def host_triple() -> str:
    found = re.search(r"Default target:\s*(\S+)", _llc_version())
    return found.group(1) if found else "x86_64-unknown-linux-gnu"


@functools.cache
def known_cpus() -> frozenset[str]:
    """The CPU names LLVM accepts for this machine's target."""
    text = _llc(f"-mtriple={host_triple()}", "-mcpu=help")
    listing = text.split("Available CPUs for this target:", 1)[-1].split("Available features", 1)[0]
    return frozenset(re.findall(r"^\s+([A-Za-z0-9_.+-]+)\s+- ", listing, flags=re.MULTILINE))


@functools.cache
def _host_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@functools.cache
def _cc_isa_macros(march: str) -> frozenset[str] | None:
    """The instruction-set macros (__AVX2__, __AVX512F__...) the C compiler defines for
    -march=`march`; None if it does not know that CPU."""
    try:
        proc = subprocess.run([os.environ.get("CC", "cc"), f"-march={march}", "-dM", "-E", "-x", "c",
                               os.devnull], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    # Upper-case names only: the lower-case ones name the CPU itself (__znver4__, __tune_...).
    return frozenset(m for m in re.findall(r"#define (__[A-Z0-9_]+__) 1$", proc.stdout, re.MULTILINE))


def missing_features(cpu: str) -> list[str]:
    """Instruction sets code for `cpu` may use that this machine lacks (empty: it runs here)."""
    if cpu in (HOST, host_cpu()):
        return []
    if cpu in LEVELS:
        flags = _host_flags()
        if not flags:  # no /proc/cpuinfo: assume the baseline only
            return [] if cpu == "x86-64" else [f"{cpu} (cannot read /proc/cpuinfo)"]
        needed = [f for level in LEVELS[: LEVELS.index(cpu) + 1] for f in _LEVEL_FLAGS[level]]
        return [f for f in needed if f not in flags]
    target, host = _cc_isa_macros(cpu), _cc_isa_macros("native")
    if target is None or host is None:
        return [f"what {cpu!r} has (the C compiler, used to compare it with this machine, "
                f"does not know it; use a psABI level)"]
    return sorted(m.strip("_").lower() for m in target - host)


def has_avx512(cpu: str) -> bool:
    """Whether code for `cpu` may use AVX-512 (512-bit vectors)."""
    if cpu == HOST:
        return "avx512f" in _host_flags()
    if cpu in LEVELS:
        return cpu == "x86-64-v4"
    return "__AVX512F__" in (_cc_isa_macros(cpu) or ())


def retarget(module: ir.Module, cpu: str) -> None:
    """Make every function of `module` (LLVM dialect) generate code for `cpu`.

    "target-features" must be set too: without it a function keeps the host's feature
    string (AVX-512 here) whatever its "target-cpu". "+cx8" (every x86-64 has it) adds
    nothing to the CPU's own features. The ExecutionEngine wraps each public function
    in a host-compiled `_mlir_<name>` wrapper that would inline it (the host has every
    feature of a lower target, so LLVM allows it): public functions are `no_inline`."""
    if cpu == HOST:
        return
    features = ir.Attribute.parse('#llvm.target_features<["+cx8"]>')
    for op in module.body.operations:
        if op.operation.name != "llvm.func" or not op.regions[0].blocks:
            continue
        op.attributes["target_cpu"] = ir.StringAttr.get(cpu)
        op.attributes["target_features"] = features
        linkage = str(op.attributes["linkage"]) if "linkage" in op.attributes else ""
        if "private" not in linkage and "internal" not in linkage:
            op.attributes["no_inline"] = ir.UnitAttr.get()
