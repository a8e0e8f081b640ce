"""Tests of cholesky and triangular_solve: numerics against numpy, shape rules, the IR.

References: np.linalg.cholesky (in float64 / complex128) for cholesky; for
triangular_solve, np.linalg.solve on the triangle that op(a) takes (built with
np.tril / np.triu, the diagonal replaced by ones for unit_diagonal), transposed
for the right-side form. Inputs are random but well conditioned (a diagonal
shift), so the float32 results agree to ~1e-5. The triangle that must not be
read is filled with NaN: any read of it would show in the result.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir, stage_text

import xlamlir as xm

REAL = {"f32": np.float32, "f64": np.float64}
COMPLEX = {"c64": np.complex64, "c128": np.complex128}
ALL = {**REAL, **COMPLEX}
TOL = {np.float32: 2e-5, np.complex64: 2e-5, np.float64: 1e-12, np.complex128: 1e-12}
KINDS = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")


def shape_of(a: np.ndarray) -> xm.Shape:
    return xm.Shape.array(xm.type_of(a.dtype), a.shape)


def random(shape: tuple[int, ...], dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x


def hermitian_pd(n: int, dtype, batch: tuple[int, ...] = (), seed: int = 0) -> np.ndarray:
    x = random(batch + (n, n), dtype, seed)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(dtype)


def wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def poison(a: np.ndarray, keep_lower: bool, diagonal_too: bool = False) -> np.ndarray:
    """A copy of `a` with NaN in the triangle that must not be read."""
    n = a.shape[-1]
    above = np.triu(np.ones((n, n), bool), 1)
    mask = above if keep_lower else above.T
    if diagonal_too:
        mask = mask | np.eye(n, dtype=bool)
    out = a.copy()
    out[..., mask] = np.nan
    return out


def run_cholesky(a: np.ndarray, lower: bool = True) -> np.ndarray:
    b = xm.XlaBuilder("cholesky")
    b.cholesky(b.parameter(0, shape_of(a)), lower)
    return xm.compile(b.build())(a)


def run_solve(a: np.ndarray, rhs: np.ndarray, left: bool, lower: bool, unit: bool, kind: str) -> np.ndarray:
    b = xm.XlaBuilder("triangular_solve")
    b.triangular_solve(b.parameter(0, shape_of(a)), b.parameter(1, shape_of(rhs)), left, lower, unit, kind)
    return xm.compile(b.build())(a, rhs)


def reference_solve(a: np.ndarray, rhs: np.ndarray, left: bool, lower: bool, unit: bool,
                    kind: str) -> np.ndarray:
    t = np.tril(wide(a)) if lower else np.triu(wide(a))
    if unit:
        n = a.shape[-1]
        t = t * (1 - np.eye(n)) + np.eye(n)
    op = {"NO_TRANSPOSE": t, "TRANSPOSE": np.swapaxes(t, -1, -2),
          "ADJOINT": np.conj(np.swapaxes(t, -1, -2))}[kind]
    if left:
        return np.linalg.solve(op, wide(rhs))
    # x op = rhs  <=>  op^T x^T = rhs^T
    return np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(wide(rhs), -1, -2)), -1, -2)


# -- cholesky -----------------------------------------------------------------------------------

def test_cholesky_textbook_example() -> None:
    a = np.array([[4, 12, -16], [12, 37, -43], [-16, -43, 98]], np.float32)
    out = run_cholesky(a)
    np.testing.assert_array_equal(np.tril(out), [[2, 0, 0], [6, 1, 0], [-8, 5, 3]])
    upper = run_cholesky(a, lower=False)
    np.testing.assert_array_equal(np.triu(upper), [[2, 6, -8], [0, 1, 5], [0, 0, 3]])


@pytest.mark.parametrize("name", list(ALL))
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_matches_numpy(name: str, lower: bool) -> None:
    dtype = ALL[name]
    a = hermitian_pd(5, dtype, (2, 3), seed=1)
    out = run_cholesky(poison(a, keep_lower=lower), lower)
    assert out.dtype == dtype and out.shape == a.shape
    ref = np.linalg.cholesky(wide(a))
    if lower:
        got = np.tril(out)
    else:
        got = np.conj(np.swapaxes(np.triu(out), -1, -2))  # u = l^H
    np.testing.assert_allclose(got, ref, rtol=TOL[dtype], atol=TOL[dtype] * 10)


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_reconstructs_the_input(lower: bool) -> None:
    a = hermitian_pd(6, np.complex128, seed=2)
    out = run_cholesky(a, lower)
    if lower:
        l_ = np.tril(out)
        np.testing.assert_allclose(l_ @ np.conj(l_.T), a, rtol=1e-12, atol=1e-12)
    else:
        u = np.triu(out)
        np.testing.assert_allclose(np.conj(u.T) @ u, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_cholesky_half_precision_is_computed_in_f32(dtype) -> None:
    a = hermitian_pd(4, np.float32, seed=3)
    out = run_cholesky(a.astype(dtype))
    assert out.dtype == np.dtype(dtype)
    ref = np.linalg.cholesky(a.astype(dtype).astype(np.float64))
    np.testing.assert_allclose(np.tril(out.astype(np.float64)), ref, rtol=2e-2, atol=2e-2)


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_nan() -> None:
    good = hermitian_pd(3, np.float32, seed=4)
    bad = np.array([[1, 2, 0], [2, 1, 0], [0, 0, 1]], np.float32)  # eigenvalue -1
    out = run_cholesky(np.stack([good, bad, good]))
    assert np.isnan(out[1]).all()  # XLA's expander: the whole matrix is NaN
    np.testing.assert_allclose(np.tril(out[0]), np.linalg.cholesky(good), rtol=1e-5)
    np.testing.assert_allclose(np.tril(out[2]), np.linalg.cholesky(good), rtol=1e-5)


def test_cholesky_edge_shapes() -> None:
    np.testing.assert_array_equal(run_cholesky(np.array([[9.0]], np.float64)), [[3.0]])
    assert run_cholesky(np.zeros((0, 3, 3), np.float32)).shape == (0, 3, 3)
    assert run_cholesky(np.zeros((2, 0, 0), np.float32)).shape == (2, 0, 0)
    a = hermitian_pd(2, np.float32, (1, 2, 1), seed=5)
    np.testing.assert_allclose(np.tril(run_cholesky(a)), np.linalg.cholesky(a), rtol=1e-5)


@pytest.mark.parametrize("shape, lower, rule", [
    (xm.Shape.array(xm.F32, (3,)), True, "rank >= 2"),
    (xm.Shape.array(xm.F32, (2, 3)), True, "square"),
    (xm.Shape.array(xm.S32, (2, 2)), True, "floating-point or complex"),
    (xm.Shape.array(xm.F32, (2, 2)), 1, "bool"),
])
def test_cholesky_shape_errors(b: xm.XlaBuilder, shape: xm.Shape, lower, rule: str) -> None:
    with pytest.raises(xm.ShapeError, match=rule):
        b.cholesky(b.parameter(0, shape), lower)


def test_cholesky_ir(b: xm.XlaBuilder) -> None:
    b.cholesky(b.parameter(0, xm.Shape.array(xm.F32, (2, 3, 3))), False)
    comp = b.build()
    check_ir(stage_text(comp, "hlo"), """
        CHECK: "xhlo.cholesky"(%arg0) {lower = false} : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    """)
    check_ir(stage_text(comp, "linalg"), """
        CHECK: scf.for
        CHECK: math.sqrt
        CHECK: tensor.insert
        CHECK: linalg.transpose
        CHECK-NOT: xhlo.
    """)


# -- triangular_solve ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["f32", "c64"])
@pytest.mark.parametrize("left, lower, unit, kind", list(itertools.product(
    [True, False], [True, False], [True, False], KINDS)))
def test_triangular_solve_every_combination(name: str, left: bool, lower: bool, unit: bool,
                                            kind: str) -> None:
    dtype = ALL[name]
    m, k = 4, 3
    a = (random((2, m, m), dtype, seed=6) + 4 * np.eye(m)).astype(dtype)
    rhs = random((2, m, k) if left else (2, k, m), dtype, seed=7).astype(dtype)
    out = run_solve(poison(a, keep_lower=lower, diagonal_too=unit), rhs, left, lower, unit, kind)
    ref = reference_solve(a, rhs, left, lower, unit, kind)
    assert out.dtype == dtype and out.shape == rhs.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["f64", "c128"])
@pytest.mark.parametrize("left, kind", [(True, "ADJOINT"), (False, "TRANSPOSE"), (False, "NO_TRANSPOSE")])
def test_triangular_solve_double_precision(name: str, left: bool, kind: str) -> None:
    dtype = ALL[name]
    a = (random((3, 5, 5), dtype, seed=8) + 5 * np.eye(5)).astype(dtype)
    rhs = random((3, 5, 2) if left else (3, 2, 5), dtype, seed=9).astype(dtype)
    out = run_solve(a, rhs, left, False, False, kind)
    np.testing.assert_allclose(out, reference_solve(a, rhs, left, False, False, kind), rtol=1e-12)


def test_triangular_solve_seed_shapes_and_batches() -> None:
    """a [..., M, M], b [..., M, K] (left) or [..., K, M] (right), batch dims equal."""
    a = (random((2, 1, 3, 3), np.float32, seed=10) + 3 * np.eye(3)).astype(np.float32)
    rhs = random((2, 1, 2, 3), np.float32, seed=11).astype(np.float32)
    out = run_solve(a, rhs, False, True, False, "NO_TRANSPOSE")
    np.testing.assert_allclose(out, reference_solve(a, rhs, False, True, False, "NO_TRANSPOSE"),
                               rtol=1e-5)


def test_triangular_solve_exact_small_system() -> None:
    a = np.array([[2, 0], [1, 4]], np.float32)
    rhs = np.array([[1, 2], [3, 4]], np.float32)
    np.testing.assert_array_equal(run_solve(a, rhs, True, True, False, "NO_TRANSPOSE"),
                                  [[0.5, 1.0], [0.625, 0.75]])


def test_triangular_solve_half_precision_and_edges() -> None:
    a = (np.eye(3) * 2 + np.tril(np.ones((3, 3)), -1)).astype(np.float16)
    rhs = np.ones((3, 1), np.float16)
    out = run_solve(a, rhs, True, True, False, "NO_TRANSPOSE")
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64),
                               reference_solve(a, rhs, True, True, False, "NO_TRANSPOSE"), rtol=1e-3)
    assert run_solve(np.ones((0, 2, 2), np.float32), np.ones((0, 2, 5), np.float32), True, True, False,
                     "TRANSPOSE").shape == (0, 2, 5)
    assert run_solve(np.ones((2, 2), np.float32), np.ones((2, 0), np.float32), True, True, True,
                     "NO_TRANSPOSE").shape == (2, 0)


def test_triangular_solve_accepts_enum_like_and_lowercase_transpose(b: xm.XlaBuilder) -> None:
    class Transpose:  # XLA's TriangularSolveOptions.Transpose members have a .name
        name = "ADJOINT"

    a = b.parameter(0, xm.Shape.array(xm.F32, (2, 2)))
    x = b.parameter(1, xm.Shape.array(xm.F32, (2, 1)))
    assert b.triangular_solve(a, x, True, True, False, Transpose()).attrs["transpose_a"] == "ADJOINT"
    assert b.triangular_solve(a, x, True, True, False, "transpose").attrs["transpose_a"] == "TRANSPOSE"


@pytest.mark.parametrize("a, rhs, left, kind, rule", [
    ((xm.F32, (3,)), (xm.F32, (3, 1)), True, "NO_TRANSPOSE", "rank >= 2"),
    ((xm.S32, (2, 2)), (xm.S32, (2, 1)), True, "NO_TRANSPOSE", "floating-point or complex"),
    ((xm.F32, (2, 2)), (xm.F64, (2, 1)), True, "NO_TRANSPOSE", "same element type"),
    ((xm.F32, (2, 2)), (xm.F32, (1, 2, 1)), True, "NO_TRANSPOSE", "same rank"),
    ((xm.F32, (2, 3)), (xm.F32, (2, 1)), True, "NO_TRANSPOSE", "square"),
    ((xm.F32, (2, 2, 2)), (xm.F32, (3, 2, 1)), True, "NO_TRANSPOSE", "batch dimensions"),
    ((xm.F32, (2, 2)), (xm.F32, (3, 1)), True, "NO_TRANSPOSE", "second-minor dimension"),
    ((xm.F32, (2, 2)), (xm.F32, (1, 3)), False, "NO_TRANSPOSE", "minor dimension"),
    ((xm.F32, (2, 2)), (xm.F32, (2, 1)), True, "CONJUGATE", "transpose_a must be one of"),
])
def test_triangular_solve_shape_errors(b: xm.XlaBuilder, a, rhs, left: bool, kind: str, rule: str) -> None:
    pa = b.parameter(0, xm.Shape.array(*a))
    pb = b.parameter(1, xm.Shape.array(*rhs))
    with pytest.raises(xm.ShapeError, match=rule):
        b.triangular_solve(pa, pb, left, True, False, kind)


def test_triangular_solve_flags_must_be_bools(b: xm.XlaBuilder) -> None:
    a = b.parameter(0, xm.Shape.array(xm.F32, (2, 2)))
    x = b.parameter(1, xm.Shape.array(xm.F32, (2, 1)))
    with pytest.raises(xm.ShapeError, match="unit_diagonal must be a bool"):
        b.triangular_solve(a, x, True, True, None, "NO_TRANSPOSE")


def test_triangular_solve_ir(b: xm.XlaBuilder) -> None:
    a = b.parameter(0, xm.Shape.array(xm.C64, (3, 3)))
    x = b.parameter(1, xm.Shape.array(xm.C64, (2, 3)))
    b.triangular_solve(a, x, False, True, True, "ADJOINT")
    comp = b.build()
    check_ir(stage_text(comp, "hlo"), """
        CHECK: "xhlo.triangular_solve"(%arg0, %arg1)
        CHECK-SAME: left_side = false, lower = true, transpose_a = "ADJOINT", unit_diagonal = true
    """)
    check_ir(stage_text(comp, "linalg"), """
        CHECK: scf.for
        CHECK: complex.conj
        CHECK: complex.mul
        CHECK-NOT: complex.div
        CHECK: tensor.insert
    """)


def test_a_parsed_module_is_verified_with_the_shape_rule() -> None:
    b = xm.XlaBuilder("t")
    b.cholesky(b.parameter(0, xm.Shape.array(xm.F32, (2, 2))))
    text = b.build().as_mlir_text().replace("tensor<2x2xf32>) -> tensor<2x2xf32>",
                                            "tensor<2x2xf32>) -> tensor<3x3xf32>")
    text = text.replace("return %0 : tensor<2x2xf32>", "return %0 : tensor<3x3xf32>")
    text = text.replace("-> tensor<2x2xf32> {", "-> tensor<3x3xf32> {")
    with pytest.raises(xm.CompileError, match="cholesky"):
        xm.compile_mlir(text)
