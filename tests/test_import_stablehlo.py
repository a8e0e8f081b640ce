"""xm.import_stablehlo on hand-written StableHLO (tests/fixtures/stablehlo/): ops jax does not
emit, the generic and pretty forms, MLIR bytecode and portable artifacts; bad input raises
CompileError naming the op and its location; the CLI's `import` and `run`; export of an
imported program. Results are checked against numpy formulas."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import run

import xlamlir as xm

pytest.importorskip("jax")

FIXTURES = Path(__file__).parent / "fixtures" / "stablehlo"
rng = np.random.default_rng(0)


def load(name: str) -> xm.XlaComputation:
    path = FIXTURES / name
    return xm.import_stablehlo(path.read_bytes() if name.endswith("bc") else path.read_text(),
                               filename=str(path))


def imported(text: str) -> xm.XlaComputation:
    return xm.import_stablehlo(text)


# -- fixtures -------------------------------------------------------------------------------------

def test_batch_norm_ops():
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    scale, offset = rng.random(3).astype(np.float32) + 0.5, rng.random(3).astype(np.float32)
    grad = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y, mean, var, inf, gx, gs, go = run(load("batch_norm.mlir"), x, scale, offset, grad)
    eps = 1e-3
    m = x.mean(axis=(0, 2))
    v = x.var(axis=(0, 2))  # biased, as the spec says
    c = lambda a: a[None, :, None]  # noqa: E731
    want = (x - c(m)) / np.sqrt(c(v) + eps) * c(scale) + c(offset)
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(inf, want, rtol=1e-4, atol=1e-5)
    xhat = (x - c(m)) / np.sqrt(c(v) + eps)
    np.testing.assert_allclose(go, grad.sum(axis=(0, 2)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gs, (grad * xhat).sum(axis=(0, 2)), rtol=1e-4, atol=1e-5)
    n = 8
    want_gx = c(scale) / np.sqrt(c(v) + eps) / n * (
        n * grad - c(grad.sum(axis=(0, 2))) - xhat * c((grad * xhat).sum(axis=(0, 2))))
    np.testing.assert_allclose(gx, want_gx, rtol=1e-3, atol=1e-4)


def test_linalg_ops_and_dot_forms():
    import ml_dtypes

    g = rng.standard_normal((2, 3, 3)).astype(np.float32)
    a = g @ g.transpose(0, 2, 1) + 3 * np.eye(3, dtype=np.float32)
    b = rng.standard_normal((2, 3, 2)).astype(np.float32)
    m = rng.standard_normal((4, 3)).astype(ml_dtypes.bfloat16)
    n = rng.standard_normal(3).astype(ml_dtypes.bfloat16)
    l, x, xt, d, e = run(load("linalg.mlir"), a, b, m, n)
    np.testing.assert_allclose(l, np.linalg.cholesky(a), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(x, np.linalg.solve(l, b), rtol=1e-4, atol=1e-5)
    unit = np.tril(l, -1) + np.eye(3, dtype=np.float32)
    np.testing.assert_allclose(xt, np.linalg.solve(unit.transpose(0, 2, 1), b), rtol=1e-4, atol=1e-5)
    exact = m.astype(np.float32) @ n.astype(np.float32)
    assert d.dtype == np.float32 and e.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(d, exact, rtol=1e-6)
    np.testing.assert_allclose(e.astype(np.float32), exact, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("k, sign", [(0, 1), (1, -1), (7, -1), (-3, -1)])
def test_generic_form_case_while_capture_map_barrier(k, sign):
    x = np.array([1.0, -2.0, 3.5], np.float32)
    c, w, s, m = run(load("control_generic.mlir"), np.int32(k), x, np.float32(0.5))
    np.testing.assert_array_equal(c, sign * x)  # an index out of range runs the last branch
    np.testing.assert_array_equal(w, x + 4 * 0.5)  # the body captured %s from the function
    assert s == np.float32(0.5)
    np.testing.assert_array_equal(m, x * (x + 2.0))


def test_misc_ops():
    x = np.array([[1.5, -2.5, 0.1], [3.14159, 2.5, -0.5]], np.float32)
    u = np.array([0, 1, 0xF0F0, 0x80000001], np.uint32)
    rp, row, size, dbl, bc, if_true, r, cx, pc, lz, ge, dbc = run(load("misc.mlir"), x, True, u)
    e5m2 = x.astype(np.float16)  # e5m2 has f16's exponent range with 2 mantissa bits
    assert rp[0, 1] == -2.5 and rp[1, 0] == 3.0 and np.all(np.abs(rp - e5m2) <= np.abs(e5m2) / 4)
    np.testing.assert_array_equal(row, x[1])
    assert size == 3
    np.testing.assert_array_equal(dbl, 2 * x)
    np.testing.assert_array_equal(bc, np.broadcast_to(x, (4, 2, 3)))
    np.testing.assert_array_equal(if_true, 2 * x)  # the true branch returned a captured value
    np.testing.assert_array_equal(r, [[2, -3, 0], [3, 3, -1]])  # halves away from zero
    np.testing.assert_array_equal(cx, x + 1j * r)
    np.testing.assert_array_equal(pc, [0, 1, 8, 2])
    np.testing.assert_array_equal(lz, [32, 31, 16, 0])
    np.testing.assert_array_equal(ge, [False, False, False, True])  # unsigned compare
    np.testing.assert_array_equal(dbc, np.zeros((2, 4), np.float32))
    if_false = run(load("misc.mlir"), x, False, u)[5]
    np.testing.assert_array_equal(if_false, -x)


def test_rng_ops():
    import jax

    state = np.array([1, 2], np.uint64)
    new_state, bits, uniform, normal = run(load("rng.mlir"), state)
    # THREE_FRY is bit-exact with XLA: jax (XLA:CPU) gives the same stream. jax takes the
    # u64[2] state as u32[4] (it has no u64 without x64) and bitcasts it back.
    want_state, want_bits = jax.jit(lambda s: jax.lax.rng_bit_generator(
        s, (4,), np.uint32, algorithm=jax.lax.RandomAlgorithm.RNG_THREE_FRY))(state.view(np.uint32))
    np.testing.assert_array_equal(bits, want_bits)
    np.testing.assert_array_equal(new_state, np.asarray(want_state).view(np.uint64))
    assert uniform.min() >= 2.0 and uniform.max() < 3.0 and abs(uniform.mean() - 2.5) < 0.05
    assert abs(normal.mean() - 2.0) < 0.3 and abs(normal.std() - 3.0) < 0.3


def test_bytecode_and_portable_artifact_equal_text():
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    want = np.maximum(x @ w + b, 0)
    text = load("affine.mlir")
    for name in ("affine.mlirbc", "affine.vhlo.mlirbc"):
        comp = load(name)
        assert comp.as_mlir_text() == text.as_mlir_text()
        np.testing.assert_allclose(xm.compile(comp)(x, w, b), want, rtol=1e-5, atol=1e-6)


def test_pretty_and_generic_forms_import_the_same():
    from jaxlib.mlir import ir

    from xlamlir.stablehlo_import import parsing

    pretty = (FIXTURES / "misc.mlir").read_text()
    with parsing.context():
        generic = ir.Module.parse(pretty).operation.get_asm(print_generic_op_form=True)
    assert '"stablehlo.composite"' in generic
    assert imported(generic).as_mlir_text() == imported(pretty).as_mlir_text()


def test_constants_keep_their_bits():
    import ml_dtypes

    text = """
    func.func @main() -> (tensor<3xbf16>, tensor<2xcomplex<f64>>, tensor<3xf16>, tensor<2xui64>,
                          tensor<2x3xi1>, tensor<200xbf16>, tensor<20xi1>) {
      %0 = stablehlo.constant dense<[1.5, 0x7FC0, 0xFF80]> : tensor<3xbf16>
      %1 = stablehlo.constant dense<[(1.0, -2.5), (0x7FF0000000000000, 0.0)]> : tensor<2xcomplex<f64>>
      %2 = stablehlo.constant dense<[6.103520e-05, -0.0, 65504.0]> : tensor<3xf16>
      %3 = stablehlo.constant dense<[18446744073709551615, 1]> : tensor<2xui64>
      %4 = stablehlo.constant dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>
      %5 = stablehlo.iota dim = 0 : tensor<200xbf16>
      %6 = stablehlo.constant dense<true> : tensor<20xi1>
      return %0, %1, %2, %3, %4, %5, %6 : tensor<3xbf16>, tensor<2xcomplex<f64>>, tensor<3xf16>,
             tensor<2xui64>, tensor<2x3xi1>, tensor<200xbf16>, tensor<20xi1>
    }"""
    bf, c, h, u, p, big, splat = xm.compile(imported(text))()
    assert bf.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(bf.view(np.uint16), [0x3FC0, 0x7FC0, 0xFF80])
    np.testing.assert_array_equal(c, [1 - 2.5j, complex(np.inf, 0)])
    np.testing.assert_array_equal(h.view(np.uint16), [0x0400, 0x8000, 0x7BFF])
    np.testing.assert_array_equal(u, [2**64 - 1, 1])
    np.testing.assert_array_equal(p, [[True, False, True], [False, False, True]])
    np.testing.assert_array_equal(big, np.arange(200).astype(ml_dtypes.bfloat16))
    assert splat.all()


def test_dense_resource_constants():
    # Exporters from other frameworks keep weights as blobs in the module's dialect_resources.
    text = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %w = stablehlo.constant dense_resource<weights.0> : tensor<3xf32>
      %0 = stablehlo.multiply %x, %w : tensor<3xf32>
      return %0 : tensor<3xf32>
    }
    {-#
      dialect_resources: {
        builtin: {
          weights.0: "0x040000000000803F00000040000040C0"
        }
      }
    #-}"""
    np.testing.assert_array_equal(xm.compile(imported(text))(np.ones(3, np.float32)), [1, 2, -3])
    missing = text.replace("dense_resource<weights.0>", "dense_resource<other>")
    with pytest.raises(xm.CompileError, match=r"constant at <input>:2:\d+: .*resource 'other' is missing"):
        imported(missing)


def test_hex_constant_of_a_large_array():
    from jaxlib.mlir import ir

    from xlamlir.stablehlo_import import parsing

    values = np.arange(300, dtype=np.float32) * 0.5
    with parsing.context():
        attr = ir.DenseElementsAttr.get(values)
        text = f"""func.func @main() -> tensor<300xf32> {{
          %0 = stablehlo.constant {attr}
          return %0 : tensor<300xf32>
        }}"""
    # Printed as raw bytes ("0x...") by MLIR: read without numpy's conversion.
    from xlamlir.stablehlo_import.constants import literal_array

    hexed = "0x" + values.tobytes().hex().upper()
    np.testing.assert_array_equal(literal_array(f'"{hexed}"', xm.Shape.array(xm.F32, [300])), values)
    np.testing.assert_array_equal(xm.compile(imported(text))(), values)


# -- bad input ------------------------------------------------------------------------------------

def test_malformed_text_names_the_line():
    with pytest.raises(xm.CompileError, match=r"model\.mlir:2:\d+") as info:
        xm.import_stablehlo("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                            "  %0 = stablehlo.add %x : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}",
                            filename="model.mlir")
    assert "does not parse" in str(info.value)


def test_op_without_counterpart_names_op_and_location():
    text = """func.func @main(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
      %0 = "stablehlo.unary_einsum"(%x) {einsum_config = "i->i"} : (tensor<4xf32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }"""
    with pytest.raises(xm.CompileError, match=r"stablehlo\.unary_einsum at m\.mlir:2:\d+: no xlamlir"):
        xm.import_stablehlo(text, filename="m.mlir")
    nested = """func.func @main(%p: tensor<i1>, %x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "stablehlo.if"(%p) ({
        "stablehlo.return"(%x) : (tensor<4xf32>) -> ()
      }, {
        %n = stablehlo.constant dense<2> : tensor<i32>
        %y = "stablehlo.unary_einsum"(%x) {einsum_config = "i->i"} : (tensor<4xf32>) -> tensor<4xf32>
        "stablehlo.return"(%y) : (tensor<4xf32>) -> ()
      }) : (tensor<i1>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }"""
    with pytest.raises(xm.CompileError, match=r"unary_einsum at <input>:6:\d+"):
        imported(nested)  # the op inside the region is named, not the if


def test_narrow_types_import():
    f8 = """func.func @main(%x: tensor<4xf32>, %y: tensor<4xi4>) -> (tensor<4xf8E4M3FN>, tensor<2xi8>) {
      %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
      %c = stablehlo.constant dense<[0.5, -2.0, 448.0, 1.0]> : tensor<4xf8E4M3FN>
      %1 = stablehlo.add %0, %c : tensor<4xf8E4M3FN>
      %k = stablehlo.constant dense<[1, -2, 7, -8]> : tensor<4xi4>
      %2 = stablehlo.multiply %y, %k : tensor<4xi4>
      %3 = stablehlo.reshape %2 : (tensor<4xi4>) -> tensor<2x2xi4>
      %4 = stablehlo.bitcast_convert %3 : (tensor<2x2xi4>) -> tensor<2xi8>
      return %1, %4 : tensor<4xf8E4M3FN>, tensor<2xi8>
    }"""
    comp = imported(f8)
    x = np.array([1.0, 3.0, 100.0, -1.0], np.float32)
    y = np.array([3, 3, -1, 1], ml_dtypes.int4)
    f, packed = xm.compile(comp)(x, y)
    assert f.dtype == ml_dtypes.float8_e4m3fn
    # 100 -> 96 (a tie, to even); 96 + 448 = 544 is past e4m3fn's largest, 448: NaN (no inf).
    assert f.astype(np.float32)[[0, 1, 3]].tolist() == [1.5, 1.0, 0.0] and np.isnan(float(f[2]))
    # s4 products 3, -6, -7, -8 wrap in 4 bits; packed two per byte, element 0 in the low bits.
    assert packed.tolist() == [np.int8(np.uint8(0xA3)), np.int8(np.uint8(0x89))]


def test_unsupported_types_are_refused():
    f6 = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf6E2M3FN> {
      %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xf6E2M3FN>
      return %0 : tensor<4xf6E2M3FN>
    }"""
    with pytest.raises(xm.CompileError, match=r"stablehlo\.convert at <input>:2:\d+: element type f6E2M3FN"):
        imported(f6)
    i3 = "func.func @main(%x: tensor<4xi3>) -> tensor<4xi3> {\n  return %x : tensor<4xi3>\n}"
    with pytest.raises(xm.CompileError, match=r"parameter 0 of @main .*i3"):
        imported(i3)


def test_dynamic_shapes_that_stay_dynamic_are_refused():
    text = """func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
      %0 = stablehlo.abs %x : tensor<?xf32>
      return %0 : tensor<?xf32>
    }"""
    with pytest.raises(xm.CompileError, match="dynamic shape"):
        imported(text)
    slice_text = """func.func @main(%x: tensor<4xf32>, %s: tensor<1xi32>) -> tensor<?xf32> {
      %l = stablehlo.constant dense<4> : tensor<1xi32>
      %t = stablehlo.constant dense<1> : tensor<1xi32>
      %0 = stablehlo.real_dynamic_slice %x, %s, %l, %t
          : (tensor<4xf32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<?xf32>
      return %0 : tensor<?xf32>
    }"""
    with pytest.raises(xm.CompileError, match=r"real_dynamic_slice at <input>:4:\d+: .*dynamic"):
        imported(slice_text)


def test_other_bad_modules():
    with pytest.raises(xm.CompileError, match="no entry function @main .*@f"):
        imported("func.func @f() -> tensor<i32> {\n  %0 = stablehlo.constant dense<1> : tensor<i32>\n"
                 "  return %0 : tensor<i32>\n}")
    with pytest.raises(xm.CompileError, match="neither MLIR bytecode"):
        xm.import_stablehlo(b"\xff\xfe\x00garbage")
    with pytest.raises(xm.CompileError, match="bytecode does not parse"):
        xm.import_stablehlo(b"ML\xefR\x00\x01broken")
    with pytest.raises(xm.CompileError, match="got int"):
        xm.import_stablehlo(42)
    # A reduce body may not use a non-constant value of the function (XLA computations are closed).
    captured = """func.func @main(%x: tensor<4xf32>, %y: tensor<f32>) -> tensor<f32> {
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %0 = stablehlo.reduce(%x init: %z) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
        reducer(%a: tensor<f32>, %b: tensor<f32>) {
          %s = stablehlo.add %a, %y : tensor<f32>
          stablehlo.return %s : tensor<f32>
        }
      return %0 : tensor<f32>
    }"""
    with pytest.raises(xm.CompileError, match=r"stablehlo\.reduce at <input>:3:\d+: .*non-constant"):
        imported(captured)


def test_unsupported_dot_algorithm():
    """ANY_F8_ANY_F8_F32 is refused (the presets: test_import_dot_algorithms.py)."""
    text = """func.func @main(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> tensor<2x2xf32> {
      %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0],
          algorithm = <lhs_precision_type = f8E4M3FN, rhs_precision_type = f8E4M3FN, accumulation_type = f32,
                       lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1,
                       allow_imprecise_accumulation = false>
          : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }"""
    with pytest.raises(xm.CompileError, match=r"dot_general at <input>:2:\d+: .*f8e4m3fn"):
        imported(text)
    ok = text.replace("f8E4M3FN", "f32")
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_array_equal(xm.compile(imported(ok))(a, a), a @ a)


# -- CLI, custom calls, export ----------------------------------------------------------------------

def test_cli_import_and_run(tmp_path, capsys):
    from xlamlir.cli import main

    assert main(["import", str(FIXTURES / "affine.mlir"), "--stage", "hlo"]) == 0
    out = capsys.readouterr().out
    assert "// ----- stage hlo" in out and "xhlo.dot_general" in out and "stage linalg" not in out
    x, w, b = (np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), -np.arange(4, dtype=np.float32))
    paths = []
    for i, a in enumerate((x, w, b)):
        paths.append(str(tmp_path / f"a{i}.npy"))
        np.save(paths[-1], a)
    out_path = tmp_path / "out.npy"
    for source in ("affine.mlir", "affine.vhlo.mlirbc"):
        assert main(["run", str(FIXTURES / source), "--args", *paths, "--output", str(out_path)]) == 0
        np.testing.assert_array_equal(np.load(out_path), np.maximum(x @ w + b, 0))
    capsys.readouterr()
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @main() {\n  %0 = stablehlo.nonsense\n}\n")
    assert main(["import", str(bad)]) == 1
    assert re.search(r"bad\.mlir:2:\d+", capsys.readouterr().err)
    bad.write_bytes(b"\xff\xfe not text")
    assert main(["run", str(bad)]) == 1
    assert "neither MLIR bytecode" in capsys.readouterr().err


def test_custom_call_to_a_registered_target():
    xm.register_custom_call("import_test_axpy", lambda a, x: 2 * a + x)
    text = """func.func @main(%a: tensor<3xf32>, %x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = stablehlo.custom_call @import_test_axpy(%a, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      return %0 : tensor<3xf32>
    }"""
    a = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(xm.compile(imported(text))(a, a), 3 * a)


def test_export_of_an_imported_program(tmp_path):
    exe = xm.compile(load("affine.vhlo.mlirbc"))
    exe.export(str(tmp_path / "libaffine.so"))
    header = (tmp_path / "libaffine.h").read_text()
    assert (tmp_path / "libaffine.so").stat().st_size > 0
    assert re.search(r"int main\(void \*\*args, void \*\*results\)|int \w+\(void \*\*args", header)


def test_collectives_with_the_modules_replica_count():
    comp = load("collectives.mlir")
    assert comp.num_replicas == 2
    exe = xm.compile(comp, num_replicas=comp.num_replicas)
    x0, x1 = np.arange(4, dtype=np.float32), 10 + np.arange(4, dtype=np.float32)
    (s0, g0, r0, a0, p0, i0), (s1, g1, r1, a1, p1, i1) = exe.execute_replicated([[x0], [x1]])
    np.testing.assert_array_equal(s0, x0 + x1)
    np.testing.assert_array_equal(s1, x0 + x1)
    np.testing.assert_array_equal(g1, np.concatenate([x0, x1]))
    np.testing.assert_array_equal(r0, x1[:2])
    np.testing.assert_array_equal(r1, x1[2:])
    np.testing.assert_array_equal(a0, np.concatenate([x0[:2], x1[:2]]))
    np.testing.assert_array_equal(a1, np.concatenate([x0[2:], x1[2:]]))
    np.testing.assert_array_equal(p0, np.zeros(4))  # nothing is sent to replica 0
    np.testing.assert_array_equal(p1, x0)
    assert (i0, i1) == (0, 1)


def test_bad_replica_count_is_refused():
    text = (FIXTURES / "collectives.mlir").read_text()
    text = text.replace("mhlo.num_replicas = 2", "mhlo.num_replicas = 0")
    with pytest.raises(xm.CompileError, match="mhlo.num_replicas is 0"):
        imported(text)


def test_tokens_infeed_outfeed():
    exe = xm.compile(load("tokens.mlir"))
    x = np.array([1, 2, 3], np.float32)
    exe.infeed.put(np.array([10, 20, 30], np.float32))
    np.testing.assert_array_equal(exe(x), 2 * (x + [10, 20, 30]))
    np.testing.assert_array_equal(exe.outfeed.get(timeout=10), x + [10, 20, 30])


def test_without_jax_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "jaxlib.mlir", None)
    with pytest.raises(xm.CompileError, match=r"needs jax .*xlamlir\[jax\]"):
        xm.import_stablehlo("func.func @main() {\n  return\n}")


def test_every_stablehlo_op_is_imported_or_documented_as_not():
    from jaxlib.mlir.dialects import _stablehlo_ops_gen as generated

    from xlamlir.stablehlo_import.importer import HANDLERS
    from xlamlir.stablehlo_import.registry import load_handlers

    load_handlers()
    ops = {cls.OPERATION_NAME for cls in vars(generated).values()
           if isinstance(cls, type) and hasattr(cls, "OPERATION_NAME")}
    not_imported = {"async_start", "async_done", "einsum", "unary_einsum", "torch_index_select",
                    "set_dimension_size", "uniform_quantize", "uniform_dequantize", "return"}
    assert {f"stablehlo.{n}" for n in not_imported} <= ops
    assert sorted(ops - set(HANDLERS) - {f"stablehlo.{n}" for n in not_imported}) == []
    doc = (Path(__file__).parent.parent / "docs" / "importing.md").read_text()
    for name in not_imported - {"return"}:
        assert f"`{name}`" in doc, name


def test_regions_that_differ_only_in_operand_order_stay_apart():
    # Identical closed regions share one computation; a subtract with swapped operands is not one.
    reducer = """stablehlo.reduce(%x init: %z) across dimensions = [0]
          : (tensor<1xf32>, tensor<f32>) -> tensor<f32>
        reducer(%a: tensor<f32>, %b: tensor<f32>) {
          %s = stablehlo.subtract LHS, RHS : tensor<f32>
          stablehlo.return %s : tensor<f32>
        }"""
    text = f"""func.func @main(%x: tensor<1xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {{
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %0 = {reducer.replace("LHS", "%a").replace("RHS", "%b")}
      %1 = {reducer.replace("LHS", "%b").replace("RHS", "%a")}
      %2 = {reducer.replace("LHS", "%a").replace("RHS", "%b")}
      return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<f32>
    }}"""
    comp = imported(text)
    assert comp.as_mlir_text().count("func.func") == 3  # main and two reducers
    # One element: the reducer runs once, as reducer(init, x).
    assert xm.compile(comp)(np.array([5.0], np.float32)) == (-5.0, 5.0, -5.0)


def test_nested_regions_capture_through_every_level():
    # %scale is used only inside a while that is inside an if: both levels thread it through;
    # the constant %two is rebuilt where it is used.
    text = """func.func @main(%p: tensor<i1>, %x: tensor<3xf32>, %scale: tensor<3xf32>) -> tensor<3xf32> {
      %two = stablehlo.constant dense<2> : tensor<i32>
      %r = "stablehlo.if"(%p) ({
        %zero = stablehlo.constant dense<0> : tensor<i32>
        %w:2 = stablehlo.while(%i = %zero, %acc = %x) : tensor<i32>, tensor<3xf32>
          cond {
            %lt = stablehlo.compare LT, %i, %two : (tensor<i32>, tensor<i32>) -> tensor<i1>
            stablehlo.return %lt : tensor<i1>
          } do {
            %one = stablehlo.constant dense<1> : tensor<i32>
            %i1 = stablehlo.add %i, %one : tensor<i32>
            %m = stablehlo.multiply %acc, %scale : tensor<3xf32>
            stablehlo.return %i1, %m : tensor<i32>, tensor<3xf32>
          }
        "stablehlo.return"(%w#1) : (tensor<3xf32>) -> ()
      }, {
        "stablehlo.return"(%scale) : (tensor<3xf32>) -> ()
      }) : (tensor<i1>) -> tensor<3xf32>
      return %r : tensor<3xf32>
    }"""
    exe = xm.compile(imported(text))
    x, scale = np.array([1, 2, 3], np.float32), np.array([2, 3, -1], np.float32)
    np.testing.assert_array_equal(exe(True, x, scale), x * scale * scale)
    np.testing.assert_array_equal(exe(False, x, scale), scale)


def test_dynamic_ops_with_static_results():
    # Shape operands that are not constants: the static result type decides (a shape operand
    # that disagrees with it makes the program invalid StableHLO).
    text = """func.func @main(%x: tensor<6xf32>, %s: tensor<2xi32>, %n: tensor<1xi32>)
        -> (tensor<2x3xf32>, tensor<4xi32>, tensor<2x6xf32>) {
      %0 = stablehlo.dynamic_reshape %x, %s : (tensor<6xf32>, tensor<2xi32>) -> tensor<2x3xf32>
      %1 = stablehlo.dynamic_iota %n, dim = 0 : (tensor<1xi32>) -> tensor<4xi32>
      %2 = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = [1]
          : (tensor<6xf32>, tensor<2xi32>) -> tensor<2x6xf32>
      return %0, %1, %2 : tensor<2x3xf32>, tensor<4xi32>, tensor<2x6xf32>
    }"""
    x = np.arange(6, dtype=np.float32)
    r, i, bc = xm.compile(imported(text))(x, np.array([2, 3], np.int32), np.array([4], np.int32))
    np.testing.assert_array_equal(r, x.reshape(2, 3))
    np.testing.assert_array_equal(i, np.arange(4))
    np.testing.assert_array_equal(bc, np.broadcast_to(x, (2, 6)))


def test_composite_is_imported_as_a_composite_call_that_keeps_its_name():
    text = """
    func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>) {
      %d, %s = stablehlo.composite "my.double_and_sum" %x {
          composite_attributes = {n = 1 : i32, scale = 2.0 : f32},
          decomposition = @double_and_sum, version = 3 : i32}
        : (tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>)
      %plain = stablehlo.composite "my.plain" %d {decomposition = @inner}
        : (tensor<3xf32>) -> tensor<3xf32>
      return %plain, %s : tensor<3xf32>, tensor<f32>
    }
    func.func private @double_and_sum(%a: tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>) {
      %0 = stablehlo.add %a, %a : tensor<3xf32>
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %1 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0]
        : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
      return %0, %1 : tensor<3xf32>, tensor<f32>
    }
    func.func private @inner(%a: tensor<3xf32>) -> tensor<3xf32> {
      %0 = stablehlo.negate %a : tensor<3xf32>
      return %0 : tensor<3xf32>
    }"""
    comp = imported(text)
    x = np.float32([1, -2, 4.5])
    plain, total = run(comp, x)
    np.testing.assert_array_equal(plain, -2 * x)
    assert total == np.float32(3.5)
    mlir = comp.as_mlir_text()
    assert mlir.count("xhlo.composite_call") == 2
    hlo = comp.as_hlo_text()
    assert 'composite.name="my.double_and_sum"' in hlo and 'composite.version="3"' in hlo
    assert "composite.attributes={n = 1 : i32, scale = 2.000000e+00 : f32}" in hlo
    assert 'composite.name="my.plain"' in hlo and 'composite.version="0"' in hlo
