"""Shared test helpers: a fresh builder fixture and FileCheck-based IR checks.

`check_ir(text, checks)` runs the PyPI `filecheck` (a Python clone of LLVM's
FileCheck) on `text` with the dedented `checks`; `check_ir_here(text)` takes
the checks from the calling test's own `# CHECK...` comments, so the
expectations sit next to the code that produced the IR. `@isolated` runs a test
in a child interpreter, so inputs that could crash the process fail one test.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
from mlir import ir

import xlamlir as xm
from xlamlir.dialect.context import new_context

# The persistent compile cache is off for the suite (tests expect real compiles, and nothing
# may land in ~/.cache); tests/test_disk_cache.py turns it on in temporary directories.
# XLAMLIR_TEST_CACHE_DIR=dir runs the suite through a cache in `dir` instead.
os.environ["XLAMLIR_CACHE_DIR"] = os.environ.get("XLAMLIR_TEST_CACHE_DIR", "off")

# MLIR's verifier after every pass, not only at the end of each stage as compiles do by
# default (lowering/pass_managers.py): a bug of ours shows at the pass that made it.
# The verification only reads the module: the code is the same. tests/test_pipeline.py
# runs the default way too.
os.environ.setdefault("XLAMLIR_VERIFY_EACH_PASS", "1")

# What the suite's code writes to the temporary directory goes into one folder per test
# process, removed when it exits: the reproducer folders of the passes tests make fail
# (lowering/reproducer.py: ~60 a run were left in /tmp), the C builds and the cache
# writer's scratch. pytest's own temporary folders stay where they were.
os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
_SCRATCH = tempfile.mkdtemp(prefix="xlamlir-tests-")
os.environ["TMPDIR"] = tempfile.tempdir = _SCRATCH
atexit.register(shutil.rmtree, _SCRATCH, True)

_CHECK_COMMENT = re.compile(r"^\s*#\s*(CHECK[A-Z0-9-]*(?:\{[^}]*\})?:.*)$")


@pytest.fixture(autouse=True)
def _compile_afresh_when_patched(request: pytest.FixtureRequest) -> None:
    """With XLAMLIR_TEST_CACHE_DIR, a test that patches the library (monkeypatch: a
    lowering's threshold, a schedule's parameters) compiles with the disk cache off: the
    key knows the library's files, not its patched attributes, so the test would load
    what an unpatched compile stored (~110 tests compared a path with itself). A test
    that sets XLAMLIR_CACHE_DIR itself still does."""
    if os.environ.get("XLAMLIR_TEST_CACHE_DIR") and "monkeypatch" in request.fixturenames:
        request.getfixturevalue("monkeypatch").setenv("XLAMLIR_CACHE_DIR", "off")


@pytest.fixture
def b() -> xm.XlaBuilder:
    """A fresh builder named "test"."""
    return xm.XlaBuilder("test")


def _run_filecheck(text: str, checks: str, extra_args: tuple[str, ...] = ()) -> None:
    fd, path = tempfile.mkstemp(suffix=".checks", text=True)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(checks)
        proc = subprocess.run(
            [sys.executable, "-m", "filecheck", *extra_args, path],
            input=text, capture_output=True, text=True, timeout=120,
        )
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        report = (proc.stdout + proc.stderr).strip()
        pytest.fail(
            f"FileCheck failed (exit {proc.returncode}):\n{report}\n\n"
            f"---- checks ----\n{checks}\n---- IR ----\n{text}",
            pytrace=False,
        )


def check_ir(text: str, checks: str, *extra_args: str) -> None:
    """Run FileCheck with `checks` (dedented) over `text`; pytest.fail with the report on failure."""
    checks = textwrap.dedent(checks).strip("\n") + "\n"
    if "CHECK" not in checks:
        raise ValueError("check_ir: no CHECK lines given")
    _run_filecheck(text, checks, extra_args)


def _caller_checks(frame) -> str:
    """The `# CHECK...` comment lines of the function running in `frame`."""
    lines, _ = inspect.getsourcelines(frame.f_code)
    checks = []
    for line in lines:
        m = _CHECK_COMMENT.match(line)
        if m:
            checks.append(m.group(1).rstrip())
    return "\n".join(checks) + "\n"


def check_ir_here(text: str, *extra_args: str) -> None:
    """Like check_ir, with the checks read from the calling test's `# CHECK...` comments."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    caller = frame.f_back
    try:
        checks = _caller_checks(caller)
    finally:
        del frame, caller
    if "CHECK" not in checks:
        raise ValueError("check_ir_here: the calling function has no '# CHECK' comments")
    _run_filecheck(text, checks, extra_args)


# ---- crash isolation ------------------------------------------------------------------------

_ISOLATED_ENV = "XLAMLIR_TEST_ISOLATED"
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def isolated(test):
    """Run `test` in a fresh interpreter (a child pytest on its node id).

    For tests of inputs that could bring the interpreter down (broken IR,
    unusual layouts): a crash then fails this one test, with the child's
    output, instead of killing the whole session.
    """

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        if os.environ.get(_ISOLATED_ENV) == "1":
            return test(*args, **kwargs)
        nodeid = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        env = dict(os.environ, **{_ISOLATED_ENV: "1"})
        env.pop("PYTEST_ADDOPTS", None)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header",
             "-W", "ignore::pytest.PytestUnraisableExceptionWarning", nodeid],
            cwd=_ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
        if proc.returncode == 0:
            return None
        if proc.returncode < 0:
            how = f"the interpreter CRASHED ({signal.Signals(-proc.returncode).name})"
        else:
            how = f"the test failed in a child interpreter (exit {proc.returncode})"
        output = (proc.stdout + "\n" + proc.stderr).strip()
        pytest.fail(f"{how}:\n{output[-6000:]}", pytrace=False)

    return wrapper


def stage_text(computation: xm.XlaComputation, stage: str) -> str:
    """The module after `stage`, running only the stages up to it (nothing is JIT-compiled)."""
    pipeline = xm.Pipeline.default()
    names = pipeline.stage_names
    for later in names[names.index(stage) + 1:]:
        pipeline.replace(later, [])
    with new_context(), ir.Location.unknown():
        return pipeline.run(ir.Module.parse(computation.as_mlir_text()))[stage]


def data(shape: tuple[int, ...], dtype=np.float32, seed: int = 0, lo: int = -3,
         hi: int = 4) -> np.ndarray:
    """Small integers (exact in every type); complex values get an imaginary part too."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        lo = max(lo, 0)
    values = rng.integers(lo, hi, shape)
    if dtype.kind == "c":
        values = values + 1j * rng.integers(lo, hi, shape)
    return values.astype(dtype)


def param_shape(a: np.ndarray) -> xm.Shape:
    return xm.Shape.array(xm.type_of(a.dtype), a.shape)


def run(build, *arrays: np.ndarray, **compile_kwargs):
    """Compile and call a computation on `arrays`.

    `build` is an XlaComputation, or `build(b, *params)` with one parameter shaped like each
    array; the computation's root is what it returns (the last op built if it returns None).
    `compile_kwargs` go to xm.compile.
    """
    if not isinstance(build, xm.XlaComputation):
        b = xm.XlaBuilder("t")
        params = [b.parameter(i, param_shape(a)) for i, a in enumerate(arrays)]
        root = build(b, *params)
        build = b.build() if root is None else b.build(root)
    return xm.compile(build, **compile_kwargs)(*arrays)
