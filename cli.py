"""The `xlamlir` command line. Subcommands live in `_SUBCOMMANDS`; each adds its own parser.

    xlamlir export FILE.py --function NAME --output out/libfoo.so [--target-cpu CPU] [--symbol SYM]
    xlamlir stages FILE.py [--function build] [--stage NAME] [--after-each-pass] [--locations]
    xlamlir run FILE.mlir --args a.npy b.npy [--output out.npy]   (xhlo or StableHLO)
    xlamlir import FILE.mlir [--stage NAME]                        (StableHLO text or bytecode)
    xlamlir ops
    xlamlir reproduce DIR
    xlamlir bisect FILE.py [--function build] --args a.npy b.npy [--reference r.npy]
    xlamlir graph FILE.py [--function build] [--output graph.svg]
    xlamlir timings FILE.py [--function build]

`export` imports FILE.py, calls NAME() (a function returning an XlaComputation),
compiles it and writes the shared library and its header (out/libfoo.h) with
`runtime.export.export_executable`, for build systems. Exit status: 0 on
success, 1 if the computation cannot be loaded, built, compiled or exported,
2 on bad usage.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import traceback
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


class CliError(Exception):
    """A failure to report as one line on stderr (exit status 1), without a traceback."""


def _add_export(subparsers: Any) -> None:
    from .runtime.targets import PORTABLE

    p = subparsers.add_parser(
        "export", help="compile a computation ahead of time to a shared library and C header",
        description="Import FILE, call FUNCTION() (it must return an XlaComputation), compile "
                    "it and write OUTPUT (a shared library) and the C header beside it "
                    "(same stem, .h).")
    p.add_argument("file", metavar="FILE.py", help="Python file defining the function")
    p.add_argument("--function", "-f", required=True, metavar="NAME",
                   help="function of FILE taking no arguments and returning an XlaComputation")
    p.add_argument("--output", "-o", required=True, metavar="PATH",
                   help="the shared library to write, e.g. out/libfoo.so (header: out/libfoo.h)")
    p.add_argument("--target-cpu", "--cpu", dest="cpu", default=PORTABLE,
                   help=f"target CPU for the code (default {PORTABLE!r}, portable to any x86-64 "
                        "with AVX2 and FMA; 'host' for this machine's, or any LLVM CPU name)")
    p.add_argument("--symbol", default=None,
                   help="name of the exported C function (default: the computation's name made "
                        "a C identifier)")
    p.set_defaults(run=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    import xlamlir as xm

    from .runtime.export import export_executable, header_path

    computation = _call_builder(Path(args.file), args.function)
    # An Executable is accepted too: the function may want its own pipeline.
    exe = computation if isinstance(computation, xm.Executable) else xm.compile(computation)
    export_executable(exe, args.output, target_cpu=args.cpu, symbol=args.symbol)
    print(f"wrote {args.output} and {header_path(args.output)}")
    return 0


def _call_builder(file: Path, function: str) -> Any:
    """`function()` from the Python file `file`, checked to be a computation."""
    if not file.is_file():
        raise CliError(f"no such file: {file}")
    # A unique module name: importing two files with the same stem must not collide.
    spec = importlib.util.spec_from_file_location(f"_xlamlir_cli_{uuid.uuid4().hex}", file)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {file} (not a Python file?)")
    module = importlib.util.module_from_spec(spec)
    # The file's directory goes first on sys.path so it can import its sibling modules.
    sys.path.insert(0, str(file.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - any error in user code becomes one message
        raise CliError(f"importing {file} failed: {_describe(e)}") from e
    finally:
        sys.path.pop(0)
    fn = getattr(module, function, None)
    if not callable(fn):
        raise CliError(f"{file} has no function {function!r}")
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001 - as above
        raise CliError(f"{function}() failed: {_describe(e)}") from e
    if not hasattr(result, "as_mlir_text") and not hasattr(result, "stages"):
        raise CliError(f"{function}() returned {type(result).__name__}, expected an XlaComputation")
    return result


def _describe(e: BaseException) -> str:
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" (at {where.filename}:{where.lineno})" if where else ""
    return f"{type(e).__name__}: {e}{at}"


def _add_stages(subparsers: Any) -> None:
    p = subparsers.add_parser("stages", help="print the MLIR of every pipeline stage",
                              description="Import FILE, call FUNCTION() (returning an "
                              "XlaComputation), compile it and print its stages.")
    p.add_argument("file", metavar="FILE.py")
    p.add_argument("--function", "-f", default="build", metavar="NAME",
                   help="function of FILE returning an XlaComputation (default: build)")
    p.add_argument("--stage", metavar="NAME", help="print only this stage")
    p.add_argument("--after-each-pass", action="store_true",
                   help="print the module after every pass instead of after every stage")
    p.add_argument("--locations", action="store_true",
                   help="print every op with the Python file:line it came from")
    p.set_defaults(run=_run_stages)


def _run_stages(args: argparse.Namespace) -> int:
    import os

    import xlamlir as xm

    computation = _call_builder(Path(args.file), args.function)
    if args.after_each_pass:
        os.environ["XLAMLIR_DUMP_PASSES"] = "1"
    if args.locations:
        os.environ["XLAMLIR_STAGE_LOCATIONS"] = "1"
    if args.after_each_pass or args.locations:
        xm.runtime.clear_cache()  # a cached executable has neither
    exe = computation if isinstance(computation, xm.Executable) else xm.compile(computation)
    if args.stage is not None and args.stage not in exe.stages:
        raise CliError(f"no stage {args.stage!r}; stages are {', '.join(exe.stages)}")
    if args.after_each_pass:
        for stage, name, text in exe.pass_stages or []:
            if args.stage in (None, stage):
                print(f"// ----- {stage}: after {name}\n{text}")
        return 0
    for stage, text in exe.stages.items():
        if args.stage in (None, stage):
            print(f"// ----- stage {stage}\n{text}")
    return 0


def _add_run(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="compile and run a module given as MLIR text",
                              description="Compile FILE.mlir (the xhlo dialect, or StableHLO text "
                              "or bytecode; entry @main) and run it on arrays loaded from .npy files.")
    p.add_argument("file", metavar="FILE.mlir")
    p.add_argument("--args", nargs="*", default=[], metavar="ARG.npy",
                   help="one .npy file per parameter, in order")
    p.add_argument("--output", "-o", metavar="OUT.npy", help="also save an array result here")
    p.set_defaults(run=_run_run)


def _run_run(args: argparse.Namespace) -> int:
    import numpy as np

    import xlamlir as xm

    path = Path(args.file)
    if not path.is_file():
        raise CliError(f"no such file: {path}")
    exe = xm.compile(_import(path)) if _is_stablehlo(path) else xm.compile_mlir(path.read_text())
    values = [np.load(a) for a in args.args]
    result = exe(*values)
    np.set_printoptions(threshold=200)
    if isinstance(result, tuple):
        for i, value in enumerate(result):
            print(f"result {i}: {value!r}")
    else:
        print(repr(result))
        if args.output:
            np.save(args.output, result)
    return 0


def _is_stablehlo(path: Path) -> bool:
    """StableHLO (or MLIR bytecode) rather than the xhlo dialect that compile_mlir reads."""
    data = path.read_bytes()
    return data.startswith(b"ML\xefR") or b"xhlo." not in data


def _import(path: Path) -> Any:
    import xlamlir as xm

    if not path.is_file():
        raise CliError(f"no such file: {path}")
    return xm.import_stablehlo(path.read_bytes(), filename=str(path))  # text or bytecode


def _add_import(subparsers: Any) -> None:
    p = subparsers.add_parser("import", help="import a StableHLO module and print its stages",
                              description="Import FILE (StableHLO text, pretty or generic, or MLIR "
                              "bytecode / a portable artifact; entry @main), compile it and print "
                              "its pipeline stages (the imported module is the 'hlo' stage).")
    p.add_argument("file", metavar="FILE.mlir")
    p.add_argument("--stage", metavar="NAME", help="print only this stage")
    p.set_defaults(run=_run_import)


def _run_import(args: argparse.Namespace) -> int:
    import xlamlir as xm

    exe = xm.compile(_import(Path(args.file)))
    if args.stage is not None and args.stage not in exe.stages:
        raise CliError(f"no stage {args.stage!r}; stages are {', '.join(exe.stages)}")
    for stage, text in exe.stages.items():
        if args.stage in (None, stage):
            print(f"// ----- stage {stage}\n{text}")
    return 0


def _add_ops(subparsers: Any) -> None:
    p = subparsers.add_parser("ops", help="list every supported op", description="List every op "
                              "of the dialect registry with its operands, attributes and builder "
                              "methods.")
    p.set_defaults(run=_run_ops)


def _run_ops(args: argparse.Namespace) -> int:
    from .dialect.registry import REGISTRY

    for name in sorted(REGISTRY):
        print(op_signature(REGISTRY[name]))
    return 0


def op_signature(opdef: Any) -> str:
    """One line: `name(operands) {attributes} [computations] -> builder methods: doc`."""
    operands = ", ".join(o.name + ("..." if o.variadic else "") for o in opdef.operands)
    attrs = ", ".join(f"{k}: {v.name}" for k, v in opdef.attrs.items())
    comps = ", ".join(opdef.computations)
    parts = [f"{opdef.name}({operands})"]
    if attrs:
        parts.append(f"{{{attrs}}}")
    if comps:
        parts.append(f"[{comps}]")
    methods = ", ".join(opdef.builders) or "-"
    return f"{' '.join(parts)}  builder: {methods}  -- {opdef.doc}"


def _add_reproduce(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "reproduce", help="re-run the failing pass of a reproducer folder",
        description="Re-run the pass that failed in a reproducer folder (named in the "
                    "CompileError's message): mlir-opt for a textual pass, the Python pass "
                    "(imported by module:qualname) on the saved input otherwise. Exit status 1 "
                    "when the pass fails again, 0 when it now passes.")
    p.add_argument("folder", metavar="DIR", help="the reproducer folder")
    p.set_defaults(run=_run_reproduce)


def _run_reproduce(args: argparse.Namespace) -> int:
    from .lowering.reproducer import load_manifest, replay

    manifest = load_manifest(args.folder)
    what = (manifest.get("pipeline") if manifest["kind"] == "textual"
            else f"Python pass {manifest['python_pass']['name']}")
    result = replay(args.folder)
    print(result.output.rstrip())
    verdict = "failed again" if result.reproduced else "passed: the failure did not reproduce"
    print(f"xlamlir reproduce: stage {manifest['stage']!r}, {what}: {verdict}")
    return 1 if result.reproduced else 0


def _load_arrays(paths: Sequence[str]) -> list[Any]:
    import numpy as np

    arrays = []
    for path in paths:
        if not Path(path).is_file():
            raise CliError(f"no such file: {path}")
        arrays.append(np.load(path))
    return arrays


def _executable(file: str, function: str) -> Any:
    """FUNCTION() of FILE compiled with the default pipeline (an Executable is kept)."""
    import xlamlir as xm

    built = _call_builder(Path(file), function)
    return built if isinstance(built, xm.Executable) else xm.compile(built)


def _add_bisect(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bisect", help="find the first pass that changes the program's result",
        description="Import FILE, call FUNCTION() (an XlaComputation, or an Executable compiled "
                    "with its own pipeline), run the program after every pass of its pipeline "
                    "(finished by the default pipeline) and name the first pass whose result "
                    "differs from the reference. Exit status 1 when a pass changed the numbers.")
    p.add_argument("file", metavar="FILE.py")
    p.add_argument("--function", "-f", default="build", metavar="NAME",
                   help="function of FILE returning an XlaComputation or Executable (default: build)")
    p.add_argument("--args", nargs="*", default=[], metavar="ARG.npy",
                   help="one .npy file per parameter, in order")
    p.add_argument("--reference", nargs="*", metavar="REF.npy",
                   help="the expected result (several files: a tuple result); default: the "
                        "result of the linalg stage finished by the default pipeline")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-6)
    p.set_defaults(run=_run_bisect)


def _run_bisect(args: argparse.Namespace) -> int:
    from .runtime.bisect import bisect_executable

    exe = _executable(args.file, args.function)
    reference = None
    if args.reference:
        loaded = _load_arrays(args.reference)
        reference = loaded[0] if len(loaded) == 1 else tuple(loaded)
    report = bisect_executable(exe, tuple(_load_arrays(args.args)), reference=reference,
                               rtol=args.rtol, atol=args.atol)
    print(report)
    return 1 if report.first_bad is not None else 0


def _add_graph(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "graph", help="draw the computation's graph (Graphviz)",
        description="Import FILE, call FUNCTION() (an XlaComputation) and draw its ops as a "
                    "graph: OUTPUT's suffix picks the format (.svg, .png, .pdf need Graphviz's "
                    "`dot`: apt-get install graphviz; .dot writes the DOT text). Without "
                    "--output the DOT text is printed.")
    p.add_argument("file", metavar="FILE.py")
    p.add_argument("--function", "-f", default="build", metavar="NAME",
                   help="function of FILE returning an XlaComputation (default: build)")
    p.add_argument("--output", "-o", metavar="PATH", help="e.g. graph.svg or graph.dot")
    p.set_defaults(run=_run_graph)


def _run_graph(args: argparse.Namespace) -> int:
    import subprocess

    computation = _call_builder(Path(args.file), args.function)
    if not hasattr(computation, "to_dot"):
        raise CliError(f"{args.function}() returned an Executable; graph needs the XlaComputation")
    if args.output is None:
        print(computation.to_dot(), end="")
        return 0
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    if args.output.endswith(".dot") or args.output.endswith(".gv"):
        Path(args.output).write_text(computation.to_dot())
    else:
        try:
            computation.render(args.output)
        except RuntimeError as e:  # no Graphviz
            raise CliError(str(e)) from e
        except subprocess.CalledProcessError as e:
            raise CliError(f"Graphviz's dot failed for {args.output} (exit {e.returncode}): "
                           "is the suffix a format dot knows?") from e
    print(f"wrote {args.output}")
    return 0


def _add_timings(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "timings", help="compile and print the time of every stage and pass",
        description="Import FILE, call FUNCTION() (an XlaComputation), compile it with one "
                    "PassManager run per pass (XLAMLIR_PASS_TIMING=1) and print the wall time of "
                    "parsing, every stage, every pass and the JIT.")
    p.add_argument("file", metavar="FILE.py")
    p.add_argument("--function", "-f", default="build", metavar="NAME",
                   help="function of FILE returning an XlaComputation (default: build)")
    p.set_defaults(run=_run_timings)


def _run_timings(args: argparse.Namespace) -> int:
    import os

    import xlamlir as xm

    # Per-pass timing, and a fresh compile: a cached executable has neither.
    os.environ["XLAMLIR_PASS_TIMING"] = "1"
    xm.runtime.clear_cache()
    exe = _executable(args.file, args.function)
    print(format_timings(exe.compile_stats))
    return 0


def format_timings(stats: dict[str, Any]) -> str:
    """Compile statistics (runtime/inspection.compile_stats) as an indented table in ms."""
    total = stats.get("total_s") or 0.0

    def row(label: str, seconds: float, indent: int) -> str:
        share = f"{100 * seconds / total:5.1f}%" if total else ""
        return f"{' ' * indent}{label:<{60 - indent}} {seconds * 1e3:9.2f} ms {share}"

    lines = [row("total", total, 0), row("parse + verify", stats.get("parse_verify_s", 0.0), 2)]
    passes = stats.get("passes_s", [])
    for stage, seconds in stats.get("stages_s", {}).items():
        lines.append(row(f"stage {stage}", seconds, 2))
        lines += [row(name[:56], s, 4) for st, name, s in passes if st == stage]
    lines.append(row("JIT (LLVM)", stats.get("jit_s", 0.0), 2))
    if "binding_s" in stats:
        lines.append(row("custom-call binding", stats["binding_s"], 2))
    return "\n".join(lines)


# Other subcommands: add `(name, add_parser_function)` here; the function registers a parser
# on `subparsers` whose defaults set `run` to a `(Namespace) -> int` handler.
_SUBCOMMANDS: list[tuple[str, Callable[[Any], None]]] = [
    ("export", _add_export),
    ("stages", _add_stages),
    ("run", _add_run),
    ("import", _add_import),
    ("ops", _add_ops),
    ("reproduce", _add_reproduce),
    ("bisect", _add_bisect),
    ("graph", _add_graph),
    ("timings", _add_timings),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xlamlir", description="xlamlir command-line tools")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for _, add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits with 2 on bad usage)."""
    from .dialect.errors import XlaError

    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (CliError, XlaError, OSError) as e:
        message = str(e)
        # A failing Python pass or user function is the cause; its text is the useful part.
        cause = e.__cause__
        if cause is not None and str(cause) not in message:
            message += f"\n  caused by {type(cause).__name__}: {cause}"
        print(f"xlamlir {args.command}: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
