"""JAX programs run through xm.jit (jax lowers, xm.import_stablehlo imports, xlamlir compiles)
and compared with JAX's own results on XLA:CPU: training steps with grad, a CNN, attention,
layer norm, a scan RNN, sorting, linear algebra (LAPACK custom calls expanded), FFTs, control
flow, threefry random numbers, integer/bit ops, bf16/f16 code."""

from __future__ import annotations

import numpy as np
import pytest

import xlamlir as xm

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax

rng = np.random.default_rng(0)


def r(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def mlp_step(params, x, y):
    def loss(p):
        h = jnp.tanh(x @ p[0] + p[1])
        return jnp.mean((h @ p[2] + p[3] - y) ** 2)
    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, params, grads)


def cnn(w1, w2, x):
    y = lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = lax.reduce_window(jax.nn.relu(y), -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = lax.conv_general_dilated(y, w2, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    # Depthwise (feature_group_count = channels), dilated, with asymmetric padding.
    y = lax.conv_general_dilated(y, jnp.ones((2, 2, 1, 4)), (1, 1), ((0, 1), (1, 0)), rhs_dilation=(2, 1),
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=4)
    return jax.nn.softmax(y.reshape(y.shape[0], -1), axis=-1)


def cnn_grad(w1, w2, x):
    # Max-pool's gradient is a select_and_scatter; the convolutions' are transposed convolutions.
    return jax.grad(lambda a, b: (cnn(a, b, x) ** 2).sum(), argnums=(0, 1))(w1, w2)


def attention(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(q.shape[-1])
    s = jnp.where(jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool)), s, -1e9)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def layernorm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * lax.rsqrt(v + 1e-5) * g + b


def rnn(wx, wh, xs):
    def step(h, x):
        h = jnp.tanh(x @ wx + h @ wh)
        return h, h.sum()
    return lax.scan(step, jnp.zeros(wh.shape[0], jnp.float32), xs)


def sorting(x, i):
    return jnp.sort(x), jnp.argsort(x, stable=True), jnp.sort(i, axis=0), lax.top_k(x, 3)


def linalg(a, b, batch):
    spd = a @ a.T + 4 * jnp.eye(4)
    lu, pivots = jax.scipy.linalg.lu_factor(a)
    return (jnp.linalg.solve(spd, b), jnp.linalg.cholesky(spd), lu, pivots,
            jnp.linalg.solve(batch, batch[..., :1]),
            jax.scipy.linalg.solve_triangular(spd, b, lower=True, trans=1))


def ffts(x):
    return jnp.fft.fft(x), jnp.fft.rfft(x.real), jnp.fft.ifft2(x), jnp.fft.irfft(jnp.fft.rfft(x.real), 8)


def control(x, n, k):
    w = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5 + x), (0, x))
    c = lax.cond(n > 3, lambda a: a.sum(), lambda a: a.max(), x)
    s = lax.switch(k, [lambda a: a + 1, lambda a: a * 2, lambda a: -a], x)
    return w, c, s, lax.fori_loop(0, 5, lambda i, a: a + i * x, x)


def randoms(seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    return (jax.random.uniform(k1, (5,)), jax.random.normal(k2, (3, 2)), jax.random.randint(k1, (4,), 0, 10),
            jax.random.bits(k2, (3,), jnp.uint32), jax.random.permutation(k1, 6))


def intbits(a, b, u):
    return (a & b, a | b, a ^ b, ~a, a << 3, a >> 2, u >> 3, lax.population_count(a), lax.clz(u),
            a // (b | 1), a % (b | 1), jnp.maximum(a, b), lax.shift_right_logical(a, 1), a > b,
            u.astype(jnp.int8), lax.bitcast_convert_type(a, jnp.float32), jnp.abs(a))


def halfs(x, y):
    return ((x * y + jnp.exp(x)).astype(jnp.bfloat16), jnp.tanh(y.astype(jnp.float16)), (x @ y.T).sum(),
            jnp.sqrt(jnp.abs(y.astype(jnp.float16))) + 1)


def elementwise(x):
    return (jnp.cbrt(x), jnp.tan(x), jnp.expm1(x), jnp.log1p(jnp.abs(x)), jax.nn.sigmoid(x), jnp.round(x),
            jnp.isfinite(x / 0), jnp.arctan2(x, x + 1), jnp.remainder(x, 0.7), jnp.power(jnp.abs(x), 1.3),
            lax.erf(x), jax.scipy.special.erfinv(jnp.clip(x, -0.9, 0.9)), jnp.sinh(x),
            jnp.arcsin(jnp.clip(x, -1, 1)), jnp.cumsum(x), x.at[jnp.array([0, 2])].add(5.0),
            jnp.take(x, jnp.array([3, 1, 1])), jnp.pad(x, (2, 1)), jnp.flip(x), jnp.roll(x, 2),
            lax.dynamic_slice(x, (jnp.int32(2),), (3,)), jnp.argmax(x), (x + 1j * x).astype(jnp.complex64),
            jnp.clip(x, -0.5, 0.5), lax.reduce_precision(x, 5, 2), jnp.abs(x + 2j * x),
            jnp.imag(jnp.exp(1j * x)), jnp.conj(x + 1j),
            jax.grad(jax.checkpoint(lambda v: (jnp.sin(v) * v).sum()))(x))  # remat: an optimization_barrier


def batched_indexing(x, i, u):
    # vmap gives gathers and scatters with batching dimensions; segment_sum a scatter-add
    # with repeated indices.
    picked = jax.vmap(lambda row, k: row[k])(x, i)
    updated = jax.vmap(lambda row, k, v: row.at[k].set(v))(x, i, u)
    sums = jax.ops.segment_sum(u, i, num_segments=4)
    return picked, updated, sums, jax.vmap(lambda row, k: lax.dynamic_slice(row, (k,), (2,)))(x, i)


def nn_and_cumulative(x):
    return (jax.nn.gelu(x), jax.nn.gelu(x, approximate=False), jax.scipy.special.logsumexp(x, axis=0),
            jax.nn.log_softmax(x), jax.nn.one_hot(jnp.argmax(x, 1), 5), jnp.cumsum(x, 1), jnp.cumprod(x, 0),
            lax.cummax(x, 1), lax.associative_scan(jnp.add, x, axis=1))


def convolutions_1d_3d(x, w, x3, w3):
    return (jnp.convolve(x, w, mode="same"), lax.conv(x3, w3, (1, 1, 1), "SAME"),
            lax.conv_transpose(x3, w3, (2, 2, 2), "SAME", dimension_numbers=("NCDHW", "OIDHW", "NCDHW")))


def complex_math(z):
    return jnp.sqrt(z), jnp.log(z), jnp.exp(z), z * z.conj(), jnp.angle(z), jnp.tanh(z)


def rbg_random(key_data):
    # The "rbg" PRNG is built on rng_bit_generator.
    return jax.random.uniform(jax.random.wrap_key_data(key_data, impl="rbg"), (6,))


PROGRAMS = {
    "mlp_training_step": (mlp_step, lambda: ((r(8, 16), r(16), r(16, 4), r(4)), r(32, 8), r(32, 4))),
    "cnn": (cnn, lambda: (r(3, 3, 3, 8), r(2, 2, 8, 4), r(2, 16, 16, 3))),
    "cnn_grad": (cnn_grad, lambda: (r(3, 3, 3, 8), r(2, 2, 8, 4), r(2, 16, 16, 3))),
    "attention": (attention, lambda: (r(2, 8, 16), r(2, 8, 16), r(2, 8, 16))),
    "layernorm": (layernorm, lambda: (r(4, 32), r(32), r(32))),
    "scan_rnn": (rnn, lambda: (r(4, 8), r(8, 8), r(10, 4))),
    "sort_argsort_top_k": (sorting, lambda: (r(5, 7), rng.integers(-9, 9, (5, 7)).astype(np.int32))),
    "solve_cholesky_lu": (linalg, lambda: (r(4, 4), r(4), r(2, 3, 3) + 3 * np.eye(3, dtype=np.float32))),
    "fft": (ffts, lambda: ((r(4, 8) + 1j * r(4, 8)).astype(np.complex64),)),
    "while_cond_switch": (control, lambda: (r(3), np.int32(5), np.int32(1))),
    "threefry_random": (randoms, lambda: (np.uint32(42),)),
    "integer_bit_ops": (intbits, lambda: (rng.integers(-100, 100, 8).astype(np.int32),
                                          rng.integers(-100, 100, 8).astype(np.int32),
                                          rng.integers(0, 2**32, 8, dtype=np.uint64).astype(np.uint32))),
    "bf16_f16": (halfs, lambda: (r(4, 4).astype(jnp.bfloat16), r(4, 4).astype(jnp.bfloat16))),
    "elementwise_and_indexing": (elementwise, lambda: (r(6),)),
    "nn_and_cumulative": (nn_and_cumulative, lambda: (r(4, 5),)),
    "conv_1d_3d_transposed": (convolutions_1d_3d, lambda: (r(10), r(3), r(1, 2, 4, 4, 4), r(3, 2, 2, 2, 2))),
    "complex_math": (complex_math, lambda: ((r(5) + 1j * r(5)).astype(np.complex64),)),
    "rbg_random": (rbg_random, lambda: (np.arange(4, dtype=np.uint32),)),
    "batched_indexing": (batched_indexing, lambda: (r(5, 6), np.array([0, 3, 5, 3, 1], np.int32), r(5))),
}


def assert_same(got, want) -> None:
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        w = np.asarray(w)
        assert isinstance(g, np.ndarray) and g.dtype == w.dtype and g.shape == w.shape, (i, g, w)
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=f"result {i}")
        else:
            half = w.dtype.itemsize == 2
            as64 = np.complex128 if w.dtype.kind == "c" else np.float64
            np.testing.assert_allclose(g.astype(as64), w.astype(as64), rtol=2e-2 if half else 2e-4,
                                       atol=1e-2 if half else 1e-5, err_msg=f"result {i}")


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_jax_program(name):
    fn, make_args = PROGRAMS[name]
    args = make_args()
    assert_same(xm.jit(fn)(*args), jax.jit(fn)(*args))


def lapack_complex(a, b):
    spd = a @ a.conj().T + 3 * jnp.eye(3)
    return jnp.linalg.solve(a, b), jnp.linalg.cholesky(spd), jax.scipy.linalg.lu_factor(a)


def lapack_singular_and_swaps(singular, swap, not_pd):
    # A zero pivot (info > 0), a row swap, cholesky of a matrix that is not positive definite.
    lu_factor = jax.scipy.linalg.lu_factor
    return lu_factor(singular), lu_factor(swap), jnp.linalg.cholesky(not_pd)


def qr_modes(a, wide):
    return jnp.linalg.qr(a), jnp.linalg.qr(a, mode="complete"), jnp.linalg.qr(wide, mode="r")


def complex_matrix() -> np.ndarray:
    return (r(3, 3) + 1j * r(3, 3)).astype(np.complex64)


LAPACK_CASES = {
    "complex": (lapack_complex, lambda: (complex_matrix(), complex_matrix()[:, 0].copy())),
    "singular_and_swaps": (lapack_singular_and_swaps, lambda: (
        np.array([[1, 2], [2, 4]], np.float32), np.array([[0, 1], [1, 0]], np.float32),
        -np.eye(2, dtype=np.float32))),
    "non_square": (lambda a: (lax.linalg.lu(a), lax.linalg.lu(a.T)), lambda: (r(4, 3),)),
    "qr_modes": (qr_modes, lambda: (r(4, 3), r(3, 5))),
    "qr_complex_batched": (lambda z, a: (jnp.linalg.qr(z), jnp.linalg.qr(a)),
                           lambda: (complex_matrix(), r(2, 4, 3))),
}


@pytest.mark.parametrize("case", list(LAPACK_CASES))
def test_lapack_custom_calls(case):
    fn, make_args = LAPACK_CASES[case]
    args = make_args()
    assert_same(xm.jit(fn)(*args), jax.jit(fn)(*args))


@pytest.mark.parametrize("shape, x64", [((2, 5, 5), False), ((6, 6), True), ((1, 1), False)])
def test_eigh(shape, x64):
    # Eigenvalues equal LAPACK's; eigenvectors are defined up to sign, so compare |V^T V_jax|.
    g = rng.standard_normal(shape)
    a = g + np.swapaxes(g, -1, -2)
    a = a if x64 else a.astype(np.float32)
    with jax.enable_x64(x64):
        (w, v), (want_w, want_v) = xm.jit(jnp.linalg.eigh)(a), jax.jit(jnp.linalg.eigh)(a)
        values_only = xm.jit(jnp.linalg.eigvalsh)(a)
    tol = 1e-10 if x64 else 2e-5
    assert w.dtype == a.dtype and v.dtype == a.dtype
    np.testing.assert_allclose(w, want_w, atol=tol * 10)
    np.testing.assert_allclose(values_only, want_w, atol=tol * 10)
    overlap = np.abs(np.swapaxes(v, -1, -2) @ np.asarray(want_v))
    np.testing.assert_allclose(overlap, np.broadcast_to(np.eye(shape[-1]), overlap.shape), atol=tol * 10)
    np.testing.assert_allclose(v @ (w[..., None] * np.swapaxes(v, -1, -2)), a, atol=tol * 10)


def test_f64_and_i64_with_x64():
    def f(a, i):
        return jnp.sin(a) @ a, i * i + 2**40, a.astype(jnp.float32), jnp.cumsum(i)

    args = (rng.standard_normal((3, 3)), np.arange(4, dtype=np.int64))
    with jax.enable_x64(True):
        got, want = xm.jit(f)(*args), jax.jit(f)(*args)
    assert got[0].dtype == np.float64 and got[1].dtype == np.int64
    assert_same(got, want)


def test_jit_caches_per_signature_and_converts_arguments():
    calls = []

    def f(x, y):
        calls.append(1)  # jax traces once per lowering
        return {"sum": x + y, "first": x[0]}

    g = xm.jit(f)
    out = g(np.ones(3), np.arange(3.0))  # float64 -> float32 as jax does without x64
    assert out["sum"].dtype == np.float32 and out["first"] == 1.0
    g(np.zeros(3), np.ones(3))
    assert len(calls) == 1
    g(np.zeros(4), np.ones(4))
    assert len(calls) == 2
    comp = g.lower(np.zeros(2, np.float32), np.zeros(2, np.float32))
    assert isinstance(comp, xm.XlaComputation)
    assert [str(s) for s in comp.program_shape()[0]] == ["f32[2]", "f32[2]"]
    h = xm.jit(lambda a, *, scale, shift: {"y": a * scale["s"] + shift})
    out = h(np.ones(2, np.float32), shift=np.float32(1), scale={"s": np.float32(3)})  # keyword pytrees
    np.testing.assert_array_equal(out["y"], [4, 4])
    # keep_unused: an argument jax would drop still is a parameter.
    np.testing.assert_array_equal(xm.jit(lambda a, b: a * 2)(np.ones(2, np.float32), np.ones(5)), [2, 2])


def test_import_of_a_lowered_object_and_its_text():
    lowered = jax.jit(layernorm).lower(*PROGRAMS["layernorm"][1]())
    from_object = xm.import_stablehlo(lowered)
    from_text = xm.import_stablehlo(lowered.as_text())
    assert from_object.as_mlir_text() == from_text.as_mlir_text()
    assert from_object.name == "jit_layernorm"
    ir_module = lowered.compiler_ir()
    assert xm.import_stablehlo(ir_module).as_mlir_text() == from_text.as_mlir_text()
    assert str(ir_module) == str(lowered.compiler_ir())  # the caller's module is not changed


def test_error_in_a_jax_program_names_the_python_line():
    # A custom call nobody registered (it may be registered after the import, so the call
    # fails): the error names the target and the user's line of the op.
    def f(x):
        return jax.ffi.ffi_call("my_mistyped_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    with pytest.raises(xm.XlaError, match=r"my_mistyped_target(.|\n)*custom_call at "
                                          r".*test_jax_programs\.py:\d+"):
        xm.jit(f)(np.eye(3, dtype=np.float32))


def test_narrow_float_conversion_equals_jax():
    # (This was the unsupported-type example before the narrow types landed.)
    def f(x):
        return x.astype(jnp.float8_e4m3fn)

    x = np.concatenate([np.linspace(-500, 500, 101, dtype=np.float32), np.float32([np.nan, np.inf, -0.0])])
    ours, theirs = np.asarray(xm.jit(f)(x)), np.asarray(jax.jit(f)(x))
    np.testing.assert_array_equal(ours.view(np.uint8), theirs.view(np.uint8))


def test_jax_export_artifacts():
    from jax import export

    x, w = np.ones((3, 4), np.float32), np.arange(20, dtype=np.float32).reshape(4, 5)
    exported = export.export(jax.jit(lambda a, b: jnp.tanh(a @ b)))(x, w)
    for source in (exported, exported.mlir_module_serialized):  # the object, its portable artifact
        np.testing.assert_allclose(xm.compile(xm.import_stablehlo(source))(x, w), np.tanh(x @ w), rtol=1e-6)
    (n,) = export.symbolic_shape("n")
    symbolic = export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((n, 4), np.float32))
    with pytest.raises(xm.CompileError, match=r"parameter 0 of @main .*tensor<\?x4xf32> has a dynamic shape"):
        xm.import_stablehlo(symbolic)


def test_sharding_annotations_are_identities():
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))

    def f(a):
        return lax.with_sharding_constraint(a * 2, NamedSharding(mesh, PartitionSpec("x"))) + 1

    a = np.arange(4, dtype=np.float32)
    assert "sharding_constraint" in jax.jit(f).lower(a).as_text()
    np.testing.assert_array_equal(xm.jit(f)(a), 2 * a + 1)
