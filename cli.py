"""The `xlamlir` command line. Subcommands live in `_SUBCOMMANDS`; each adds its own parser.

    xlamlir export FILE.py --function NAME --output out/libfoo.so [--cpu CPU] [--symbol SYM]
    xlamlir stages FILE.py [--function build] [--stage NAME] [--after-each-pass] [--locations]
    xlamlir run FILE.mlir --args a.npy b.npy [--output out.npy]   (xhlo or StableHLO)
    xlamlir import FILE.mlir [--stage NAME]                        (StableHLO text or bytecode)
    xlamlir ops

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
    from .runtime.export import HOST_CPU

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
    p.add_argument("--cpu", default=HOST_CPU,
                   help=f"target CPU for the code (default {HOST_CPU!r}: this machine's; use e.g. "
                        "'x86-64' or 'x86-64-v3' for a library meant for other machines)")
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
    export_executable(exe, args.output, cpu=args.cpu, symbol=args.symbol)
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
    data = path.read_bytes()
    return xm.import_stablehlo(data if data.startswith(b"ML\xefR") else data.decode(), filename=str(path))


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


# Other subcommands: add `(name, add_parser_function)` here; the function registers a parser
# on `subparsers` whose defaults set `run` to a `(Namespace) -> int` handler.
_SUBCOMMANDS: list[tuple[str, Callable[[Any], None]]] = [
    ("export", _add_export),
    ("stages", _add_stages),
    ("run", _add_run),
    ("import", _add_import),
    ("ops", _add_ops),
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
