"""The entry function is not inlined into the ExecutionEngine's wrappers
(lowering/passes/jit_wrappers.py): `main` carries no_inline, its C-interface wrapper
does not, and the program still runs."""

from __future__ import annotations

import re

import numpy as np

import xlamlir as xm


def test_main_is_not_inlined_into_its_wrappers() -> None:
    b = xm.XlaBuilder("small_matmul")
    x = b.parameter(0, xm.Shape.array(xm.F32, (8, 8)))
    b.add(b.dot(x, x), x)
    exe = xm.compile(b.build())
    functions = dict(re.findall(r"llvm\.func @(\w+)\(.*?\)(?: -> \S+)? attributes \{([^}]*)\}",
                                exe.stages["llvm"]))
    assert "no_inline" in functions["main"] and "llvm.emit_c_interface" in functions["main"]
    assert "no_inline" not in functions["_mlir_ciface_main"]
    a = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    np.testing.assert_allclose(exe(a), a @ a + a, rtol=1e-6)
