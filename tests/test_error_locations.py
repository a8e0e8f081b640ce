"""Every ShapeError names the user's file and line, whichever builder method raised it
(issue #18), and a misspelled custom-call target is caught with a suggestion."""

from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

import xlamlir as xm

F32 = xm.F32


def _raises_here(fn, line: int) -> str:
    with pytest.raises(xm.ShapeError) as info:
        fn()
    message = str(info.value)
    assert message.endswith(f"(at {__file__}:{line})"), message
    assert message.count(" (at ") == 1, message
    return message


def test_every_failing_builder_method_names_the_callers_line() -> None:
    b = xm.XlaBuilder("errors")
    x = b.parameter(0, xm.Shape.array(F32, (4, 3)))
    v = b.parameter(1, xm.Shape.array(F32, (5,)))
    cases = [
        (lambda: b.add(x, v), "broadcast_dimensions"),  # implicit broadcasting
        (lambda: x + v, "broadcast_dimensions"),  # an operator
        (lambda: b.dot(x, v), "contracted"),
        (lambda: b.get_tuple_element(x, 0), "tuple"),
        (lambda: b.reduce(x, b.constant(np.float32(0)), lambda a: a, (0,)), "2 parameters"),
        (lambda: b.transpose(x, (0, 0)), "transpose"),
        (lambda: b.reshape(x, (7,)), "reshape"),
        (lambda: b.slice(x, (0, 0), (5, 3), (1, 1)), "slice"),
        (lambda: b.broadcast(x, "a"), "must be"),  # an argument of the wrong kind
        (lambda: b.clz(x), "element type"),
        (lambda: b.tuple([x, 3.5j]), ""),
    ]
    for fn, words in cases:
        message = _raises_here(fn, inspect.getsourcelines(fn)[1])
        assert words in message


def test_errors_inside_a_traced_computation_name_the_computations_line() -> None:
    b = xm.XlaBuilder("traced")
    x = b.parameter(0, xm.Shape.array(F32, (4,)))

    def body(a, c):
        return b.reshape(a, (2,)) + c  # a scalar has 1 element, not 2: fails in the trace

    with pytest.raises(xm.ShapeError) as info:
        b.reduce(x, b.constant(np.float32(0)), body, (0,))
    assert f"(at {__file__}:{inspect.getsourcelines(body)[1] + 1})" in str(info.value)


def test_a_model_file_in_the_repository_root_is_the_users(tmp_path: Path) -> None:
    """The package's directory is the repository root: a user's model.py there (or an
    example) is still the user's file, also when the CLI loads it."""
    root = Path(xm.__file__).parent
    folder = root / f".test-user-{uuid.uuid4().hex}"
    folder.mkdir()
    try:
        model = folder / "model.py"
        model.write_text(
            "import xlamlir as xm\n"
            "\n"
            "def build():\n"
            "    b = xm.XlaBuilder('m')\n"
            "    x = b.parameter(0, xm.Shape.array(xm.F32, (4, 3)))\n"
            "    b.add(x, b.parameter(1, xm.Shape.array(xm.F32, (5,))))\n"
            "    return b.build()\n")
        proc = subprocess.run([sys.executable, "-m", "xlamlir.cli", "stages", str(model), "-f", "build"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode != 0
        assert f"(at {model}:6)" in proc.stderr, proc.stderr
    finally:
        shutil.rmtree(folder)


def test_messages_name_the_operands_and_the_method_called() -> None:
    b = xm.XlaBuilder("messages")
    x = b.parameter(0, xm.Shape.array(F32, (4, 3)))
    cases = [
        (lambda: b.map([x], lambda a, c: a, (0, 1)), "map(f32[4,3]): the computation must take 1"),
        (lambda: b.reduce(x, b.constant(np.float32(0)), lambda a: a, (0,)),
         "reduce(f32[4,3], f32[]): the computation must take 2"),
        (lambda: b.sort(x, lambda a: a), "sort(f32[4,3]): the comparator must take 2"),
        (lambda: b.clz(x), "clz(f32[4,3]): element type f32"),
    ]
    for fn, start in cases:
        message = _raises_here(fn, inspect.getsourcelines(fn)[1])
        assert message.startswith(start), message
    clz = cases[-1][0]
    assert "[clz builds count_leading_zeros]" in _raises_here(clz, inspect.getsourcelines(clz)[1])
