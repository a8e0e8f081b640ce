"""The IR of control flow: the "hlo" stage keeps sub-computations as private functions
referenced by symbol, it round-trips through compile_mlir, and "linalg" holds scf.while,
scf.index_switch and scf.if; helpers in tests/control_support.py."""

from __future__ import annotations

import re

import numpy as np
from conftest import check_ir
from control_support import (
    S32,
    assert_same,
    c,
    computation,
    factorial_program,
    sh,
)

import xlamlir as xm

# ---- the IR ---------------------------------------------------------------------------------


def control_program() -> xm.XlaComputation:
    """fact(n) by while, a 3-way conditional, calls, a map and a pred conditional."""
    sq = computation("sq", [S32], lambda v: v * v)
    b = xm.XlaBuilder("ctl")
    n = b.parameter(0, S32)
    x = b.parameter(1, sh(xm.S32, (3,)))
    fact = factorial_program(b, n)
    picked = b.conditional(n, [lambda v: v + 1, lambda v: v * 2, lambda v: -v], [x, x, x])
    squares = b.map([picked], lambda e: e * e, [0])
    both = b.call(sq, [fact]) + b.call(sq, [n])
    flag = b.conditional(b.gt(n, c(b, 2)), [lambda v: v + 100, lambda v: v - 100], [both, both])
    return b.build([fact, squares, flag])


def control_reference(n: int, x: np.ndarray) -> tuple:
    fact = int(np.prod(np.arange(1, n + 1)))
    picked = [x + 1, x * 2, -x][n if 0 <= n < 3 else 2]
    both = fact * fact + n * n
    return (np.int32(fact), (picked * picked).astype(np.int32),
            np.int32(both + 100 if n > 2 else both - 100))


def test_hlo_text_references_private_functions_by_symbol() -> None:
    text = control_program().as_mlir_text()
    assert re.search(r"func\.func @main\(", text)
    refs: list[str] = []
    for attr in ("cond", "body", "to_apply", "computation"):
        found = re.findall(rf"\b{attr} = @([\w.$-]+)", text)
        assert found, f"no {attr} = @... in\n{text}"
        refs += found
    branch_lists = re.findall(r"branches = \[(@[\w.$-]+(?:, @[\w.$-]+)*)\]", text)
    assert sorted(len(lst.split(", ")) for lst in branch_lists) == [2, 3], text
    refs += [s.strip().lstrip("@") for lst in branch_lists for s in lst.split(",")]
    for sym in set(refs):
        assert re.search(rf"func\.func private @{re.escape(sym)}\(", text), (sym, text)
    # One function per computation, however often it is used.
    assert len(re.findall(r"func\.func private @sq\(", text)) == 1
    assert "to_apply = @sq" in text
    # Sub-computations are not inlined as regions into the ops.
    check_ir(text, """
        CHECK: func.func @main(
        CHECK: "xhlo.while"({{.*}}) {body = @[[BODY:[A-Za-z0-9_]+]], cond = @[[COND:[A-Za-z0-9_]+]]}
        CHECK: "xhlo.case"({{.*}}) {branches = [@{{[A-Za-z0-9_]+}}, @{{[A-Za-z0-9_]+}}, @{{[A-Za-z0-9_]+}}]
        CHECK: "xhlo.map"({{.*}}) {computation = @
        CHECK: "xhlo.call"({{.*}}to_apply = @sq}
        CHECK-DAG: func.func private @[[COND]](
        CHECK-DAG: func.func private @[[BODY]](
    """)


def test_control_program_runs_and_round_trips_through_compile_mlir() -> None:
    comp = control_program()
    exe = xm.compile(comp)
    text = exe.stages["hlo"]
    again = xm.compile_mlir(text)
    x = np.int32([2, -3, 5])
    for n in (-1, 0, 1, 2, 3, 5):
        expected = control_reference(n, x)
        assert_same(exe(np.int32(n), x), expected)
        assert_same(again(np.int32(n), x), expected)
    assert again.stages["hlo"] == text


def test_while_program_hlo_round_trip() -> None:
    b = xm.XlaBuilder("fact")
    factorial_program(b, b.parameter(0, S32))
    exe = xm.compile(b.build())
    again = xm.compile_mlir(exe.stages["hlo"])
    for n in (0, 1, 5, 10):
        assert_same(again(np.int32(n)), exe(np.int32(n)))
    assert_same(again(np.int32(6)), np.int32(720))


def test_linalg_stage_has_structured_control_flow() -> None:
    stages = xm.compile(control_program()).stages
    check_ir(stages["linalg"], """
        CHECK-NOT: xhlo.
        CHECK-DAG: scf.while
        CHECK-DAG: scf.condition
        CHECK-DAG: scf.if
        CHECK-NOT: xhlo.
    """)
    # s32 conditionals are nested scf.if: bufferization loses read-only operands through
    # scf.index_switch (tests/test_buffer_aliasing.py).
    assert "scf.index_switch" not in stages["linalg"]
    assert "func.func private @sq" not in stages["linalg"]
