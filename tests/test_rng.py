"""Tests of the rng family: rng_bit_generator bit for bit, rng_uniform/normal/bernoulli by
their statistics, the executable's state, shape rules and the IR.

Known-answer vectors: `KNOWN_ANSWERS` were produced by XLA itself, with jax 0.10.2
(jaxlib 0.10.2, CPU, JAX_ENABLE_X64=1): `jax.lax.rng_bit_generator` for u64[2] states,
and for u64[3] Philox states (which jax does not accept) a hand-written StableHLO
module `stablehlo.rng_bit_generator %s, algorithm = PHILOX` compiled and run by
jaxlib's CPU client. jax is not needed to run these tests.

`reference_bits` is a numpy transcription of XLA's RngBitGeneratorExpander
(xla/hlo/builder/lib/prng.cc). It is checked against the known answers here, then
used for many more shapes than the vectors cover.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check_ir, stage_text

import xlamlir as xm

M32, M64 = (1 << 32) - 1, (1 << 64) - 1
U = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}

# (algorithm, initial state, shape, type, new state, values (row-major)), from XLA (see above).
KNOWN_ANSWERS = [
    ("THREE_FRY", [0x123456789abcdef, 0xfedcba9876543210], (2, 3), "u32",
     [0x123456789abcdef, 0xfedcba9876543213],
     [0xaed4a37f, 0xc3cc4d02, 0xaee5264e, 0x1130d111, 0x798e402e, 0xb089da7a]),
    ("THREE_FRY", [0x2a, 0xfffffffffffffffe], (5,), "u32", [0x2a, 0x1],
     [0x4e5c8aa8, 0x5635bfea, 0xc9ef714a, 0x5ab67f20, 0xde79f4b9]),
    ("THREE_FRY", [0x7, 0xb], (3,), "u64", [0x7, 0xe],
     [0x2d2c6d4e843c52a3, 0x70fa81ca5713dc7b, 0xe966c72088b5a788]),
    ("THREE_FRY", [0x7, 0xb], (), "u32", [0x7, 0xc], [0x843c52a3]),
    ("THREE_FRY", [0x1, 0x2], (3, 1), "u16", [0x1, 0x4], [0xe954, 0xd53b, 0x92d3]),
    ("PHILOX", [0x123456789abcdef, 0xfedcba9876543210], (2, 3), "u32",
     [0x123456789abcdef, 0xfedcba9876543212],
     [0x1ec53d42, 0xcfa390b5, 0xf2235702, 0xe71ff917, 0xcb472319, 0xd682777a]),
    ("PHILOX", [0x2a, 0xffffffffffffffff], (5,), "u64", [0x2a, 0x2],
     [0xf01cb6b365983a1c, 0x4af0744fe3dbc3, 0xfb5366f8781bb199, 0x5e3bf7412f114053,
      0xe115fc774602c003]),
    ("PHILOX", [0x3, 0xffffffffffffffff, 0x9], (6,), "u32", [0x3, 0x1, 0xa],
     [0x9ee8732, 0x6015d56e, 0xed5edb36, 0xd296290e, 0x5a521c85, 0xae3e5eb1]),
    ("PHILOX", [0x3, 0x5, 0xffffffffffffffff], (3,), "u64", [0x3, 0x7, 0xffffffffffffffff],
     [0xb5a2ec459a63b7b3, 0x4eba8cd86d11ef81, 0x9d1232a5d8557317]),
    ("PHILOX", [0x1, 0x2], (3,), "u8", [0x1, 0x3], [0x49, 0xe8, 0xd7]),
    ("DEFAULT", [0x1, 0x2], (5,), "u32", [0x1, 0x4],
     [0x7d34a749, 0xa9b8bbe8, 0x7ba423d7, 0x2fb324d9, 0x6cf923fe]),
]


# -- a numpy transcription of XLA's expander ------------------------------------------------------

def _threefry2x32(x0: np.ndarray, x1: np.ndarray, key: int) -> tuple[np.ndarray, np.ndarray]:
    ks = [np.uint32(key & M32), np.uint32(key >> 32)]
    ks.append(np.uint32(0x1BD11BDA ^ int(ks[0]) ^ int(ks[1])))
    rotations = (13, 15, 26, 6, 17, 29, 16, 24)
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for block in range(5):
        for r in rotations[4 * (block % 2): 4 * (block % 2) + 4]:
            x0 = x0 + x1
            x1 = x0 ^ ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r)))
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + ks[(block + 2) % 3] + np.uint32(block + 1)
    return x0, x1


def _split_in_halves(dims: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    if not dims:
        return 0, (1,)
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
    if split is None:
        split = max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = list(dims)
    half[split] = (dims[split] + 1) // 2
    return split, tuple(half)


def _words(counter: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (counter & np.uint64(M32)).astype(np.uint32), (counter >> np.uint64(32)).astype(np.uint32)


def _threefry_bits(state: list[int], dims: tuple[int, ...], bits: int) -> tuple[list[int], np.ndarray]:
    key, counter = state
    if bits == 64:
        n = int(np.prod(dims))
        c = np.arange(n, dtype=np.uint64) + np.uint64(counter)
        x0, x1 = _threefry2x32(*_words(c), key)
        values = (x0.astype(np.uint64) | (x1.astype(np.uint64) << np.uint64(32))).reshape(dims)
        return [key, (counter + n) & M64], values
    split, half = _split_in_halves(dims)
    n = int(np.prod(half))
    x0, x1 = _threefry2x32(*_words(np.arange(n, dtype=np.uint64) + np.uint64(counter)), key)
    if not dims:
        return [key, (counter + 1) & M64], x0.reshape(())
    pairs = np.stack([x0.reshape(half), x1.reshape(half)], axis=split + 1)
    full = list(dims)
    full[split] = 2 * half[split]
    values = pairs.reshape(full)[tuple(slice(0, d) for d in dims)]
    return [key, (counter + n) & M64], values


def _philox4x32(words: list[np.ndarray], key: int) -> list[np.ndarray]:
    x = [w.astype(np.uint64) for w in words]
    k0, k1 = key & M32, key >> 32
    for _ in range(10):
        p0, p1 = x[0] * np.uint64(0xD2511F53), x[2] * np.uint64(0xCD9E8D57)
        x = [(p1 >> np.uint64(32)) ^ x[1] ^ np.uint64(k0), p1 & np.uint64(M32),
             (p0 >> np.uint64(32)) ^ x[3] ^ np.uint64(k1), p0 & np.uint64(M32)]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return [w.astype(np.uint32) for w in x]


def _philox_bits(state: list[int], dims: tuple[int, ...], bits: int) -> tuple[list[int], np.ndarray]:
    key = state[0]
    lo, hi = (state[1], state[2]) if len(state) == 3 else (state[1], state[0])
    n = int(np.prod(dims))
    blocks = ((2 * n if bits == 64 else n) + 3) // 4
    counters = [lo + i for i in range(blocks)]  # Python ints: the carry into `hi` is exact
    lows = np.array([c & M64 for c in counters], np.uint64)
    highs = np.array([(hi + (c >> 64)) & M64 for c in counters], np.uint64)
    out = _philox4x32([*_words(lows), *_words(highs)], key)
    if bits == 64:
        pairs = [out[0].astype(np.uint64) | (out[1].astype(np.uint64) << np.uint64(32)),
                 out[2].astype(np.uint64) | (out[3].astype(np.uint64) << np.uint64(32))]
        values = np.stack(pairs, axis=1).reshape(-1)[:n]
    else:
        values = np.stack(out, axis=1).reshape(-1)[:n]
    new = lo + blocks
    new_state = [key, new & M64] + ([(hi + (new >> 64)) & M64] if len(state) == 3 else [])
    return new_state, values.reshape(dims)


def reference_bits(algorithm: str, state: list[int], dims: tuple[int, ...],
                   dtype) -> tuple[np.ndarray, np.ndarray]:
    bits = np.dtype(dtype).itemsize * 8
    generate = _threefry_bits if algorithm == "THREE_FRY" else _philox_bits
    with np.errstate(over="ignore"):
        new_state, values = generate([int(s) for s in state], tuple(dims), 64 if bits == 64 else 32)
    return np.array(new_state, np.uint64), values.astype(dtype)


# -- helpers ----------------------------------------------------------------------------------

def bit_generator(algorithm: str, state_size: int, dims: tuple[int, ...], dtype) -> xm.Executable:
    b = xm.XlaBuilder("bits")
    state = b.parameter(0, xm.Shape.array(xm.U64, (state_size,)))
    b.rng_bit_generator(algorithm, state, xm.Shape.array(xm.type_of(np.dtype(dtype)), dims))
    return xm.compile(b.build())


def seed(exe: xm.Executable, n: int) -> None:
    """exe.seed(n), or, until the runtime has it, the same reset done directly."""
    if hasattr(exe, "seed"):
        exe.seed(n)
    else:
        from xlamlir.lowering.ops.rng import set_rng_seed

        set_rng_seed(exe._engine, n)


def sampler(method: str, t, lo, hi, dims: tuple[int, ...]) -> xm.Executable:
    b = xm.XlaBuilder(f"{method}_{t}")
    dtype = xm.dtype_of(t)
    getattr(b, method)(b.constant(np.asarray(lo).astype(dtype)), b.constant(np.asarray(hi).astype(dtype)),
                       xm.Shape.array(t, dims))
    return xm.compile(b.build())


# -- rng_bit_generator ------------------------------------------------------------------------

def test_the_reference_reproduces_the_known_answers() -> None:
    for algorithm, state, dims, t, new_state, values in KNOWN_ANSWERS:
        got_state, got = reference_bits(algorithm, state, dims, U[t])
        assert got_state.tolist() == new_state, algorithm
        assert got.ravel().tolist() == values, (algorithm, dims, t)


@pytest.mark.parametrize("case", KNOWN_ANSWERS, ids=lambda c: f"{c[0]}-{len(c[1])}-{c[3]}{list(c[2])}")
def test_known_answers_from_xla(case) -> None:
    algorithm, state, dims, t, new_state, values = case
    got_state, got = bit_generator(algorithm, len(state), dims, U[t])(np.array(state, np.uint64))
    assert got_state.dtype == np.uint64 and got_state.tolist() == new_state
    assert got.dtype == U[t] and got.shape == dims
    assert got.ravel().tolist() == values


@pytest.mark.parametrize("algorithm, state_size", [("THREE_FRY", 2), ("PHILOX", 2), ("PHILOX", 3)])
@pytest.mark.parametrize("t", ["u32", "u64", "u16"])
def test_bit_generator_matches_the_reference(algorithm: str, state_size: int, t: str) -> None:
    rng = np.random.default_rng(len(t) + state_size)
    for dims in [(), (1,), (7,), (4, 33), (3, 5, 2), (5, 1, 3), (0, 4)]:
        state = rng.integers(0, 2**64, state_size, dtype=np.uint64)
        state[1] = np.uint64(2**64 - 3)  # the counter wraps inside the draw
        got_state, got = bit_generator(algorithm, state_size, dims, U[t])(state)
        ref_state, ref = reference_bits(algorithm, state, dims, U[t])
        np.testing.assert_array_equal(got_state, ref_state)
        np.testing.assert_array_equal(got, ref)
        assert got.shape == dims


def test_default_is_philox(b: xm.XlaBuilder) -> None:
    state = np.array([5, 6, 7], np.uint64)
    default = bit_generator("DEFAULT", 3, (9,), np.uint32)(state)
    philox = bit_generator("PHILOX", 3, (9,), np.uint32)(state)
    np.testing.assert_array_equal(default[1], philox[1])


def test_chaining_the_state_never_repeats() -> None:
    exe = bit_generator("THREE_FRY", 2, (64,), np.uint32)
    state = np.array([1, 0], np.uint64)
    seen: list[np.ndarray] = []
    for _ in range(4):
        state, values = exe(state)
        seen.append(values)
    everything = np.concatenate(seen)
    assert len(np.unique(everything)) == everything.size
    assert state.tolist() == [1, 4 * 32]  # 32 pairs per draw


def test_bit_generator_accepts_xla_and_jax_spellings(b: xm.XlaBuilder) -> None:
    class RandomAlgorithm:  # jax's lax.RandomAlgorithm.RNG_PHILOX has .name
        name = "RNG_PHILOX"

    state = b.parameter(0, xm.Shape.array(xm.U64, (2,)))
    out = b.rng_bit_generator(RandomAlgorithm(), state, xm.Shape.array(xm.U32, (2,)))
    assert out.shape == xm.Shape.tuple([xm.Shape.array(xm.U64, (2,)), xm.Shape.array(xm.U32, (2,))])
    b.rng_bit_generator("rng_three_fry", state, (3,))  # a plain size list gives u32


@pytest.mark.parametrize("algorithm, state, shape, rule", [
    ("MERSENNE", (xm.U64, (2,)), (xm.U32, (2,)), "algorithm must be one of"),
    ("THREE_FRY", (xm.U64, (3,)), (xm.U32, (2,)), r"u64\[2\] state"),
    ("PHILOX", (xm.U64, (4,)), (xm.U32, (2,)), r"u64\[2\] or u64\[3\]"),
    ("PHILOX", (xm.U32, (2,)), (xm.U32, (2,)), "u64 vector"),
    ("PHILOX", (xm.U64, (2, 1)), (xm.U32, (2,)), "u64 vector"),
    ("PHILOX", (xm.U64, (2,)), (xm.F32, (2,)), "output element type"),
    ("PHILOX", (xm.U64, (2,)), (xm.S32, (2,)), "output element type"),
])
def test_bit_generator_shape_errors(b: xm.XlaBuilder, algorithm: str, state, shape, rule: str) -> None:
    p = b.parameter(0, xm.Shape.array(*state))
    with pytest.raises(xm.ShapeError, match=rule):
        b.rng_bit_generator(algorithm, p, xm.Shape.array(*shape))


def test_bit_generator_ir(b: xm.XlaBuilder) -> None:
    b.rng_bit_generator("PHILOX", b.parameter(0, xm.Shape.array(xm.U64, (3,))), xm.Shape.array(xm.U64, (5,)))
    comp = b.build()
    check_ir(stage_text(comp, "hlo"), """
        CHECK: "xhlo.rng_bit_generator"(%arg0)
        CHECK-SAME: algorithm = "PHILOX", dimensions = array<i64: 5>, element_type = ui64
        CHECK-SAME: (tensor<3xui64>) -> (tensor<3xui64>, tensor<5xui64>)
    """)
    check_ir(stage_text(comp, "linalg"), """
        CHECK: linalg.generic
        CHECK: linalg.index
        CHECK: arith.muli {{.*}} : i64
        CHECK: tensor.from_elements
    """)


# -- rng_uniform, rng_normal, rng_bernoulli ---------------------------------------------------

@pytest.mark.parametrize("t, lo, hi", [
    (xm.F32, -2.0, 3.0), (xm.F64, 0.5, 0.75), (xm.F16, -1.0, 1.0), (xm.BF16, 10.0, 12.0),
    (xm.S32, -5, 7), (xm.U32, 3, 1000), (xm.S64, -(2**40), 2**40), (xm.U64, 0, 2**63),
])
def test_uniform_statistics(t, lo, hi) -> None:
    values = sampler("rng_uniform", t, lo, hi, (4000,))()
    assert values.dtype == xm.dtype_of(t)
    x = values.astype(np.float64)
    assert x.min() >= lo and x.max() < hi  # [a, b) (SEMANTICS D6)
    span = float(hi) - float(lo)
    discrete = not np.issubdtype(values.dtype, np.floating) and values.dtype != xm.dtype_of(xm.BF16)
    mean = (lo + hi - (1 if discrete else 0)) / 2  # integers: uniform on lo..hi-1
    variance = (span**2 - (1 if discrete else 0)) / 12
    # 4000 draws: the mean is within 5 standard errors, the variance within 15%.
    assert abs(x.mean() - mean) < 5 * np.sqrt(variance / 4000)
    assert abs(x.var() / variance - 1) < 0.15
    if t == xm.S32:
        assert len(np.unique(values)) == hi - lo  # every one of the 12 integers is drawn


def test_uniform_rounding_never_reaches_b() -> None:
    """f32 draws just below 1 round to 1.0 in f16; they become 1.0's predecessor instead."""
    values = sampler("rng_uniform", xm.F16, 0.0, 1.0, (20000,))()
    assert values.max() < 1.0 and values.max() == np.nextafter(np.float16(1), np.float16(0))


def test_uniform_with_an_empty_interval_gives_a() -> None:
    values = sampler("rng_uniform", xm.S32, 4, 4, (16,))()
    np.testing.assert_array_equal(values, 4)


def test_normal_statistics() -> None:
    x = sampler("rng_normal", xm.F32, 1.5, 2.0, (3, 2001))().astype(np.float64)
    assert abs(x.mean() - 1.5) < 5 * 2.0 / np.sqrt(x.size)
    assert abs(x.std() / 2.0 - 1) < 0.05
    assert abs(((x - 1.5) / 2.0 > 1).mean() - 0.1587) < 0.02  # a normal tail, not a uniform one


@pytest.mark.parametrize("t", [xm.F64, xm.F16])
def test_normal_sigma_zero_is_mu(t) -> None:
    np.testing.assert_array_equal(sampler("rng_normal", t, -3.0, 0.0, (5, 3))(), -3.0)


def test_bernoulli(b: xm.XlaBuilder) -> None:
    mean = b.parameter(0, xm.Shape.array(xm.F32, ()))
    b.rng_bernoulli(mean, xm.Shape.array(xm.U32, (50, 100)))
    exe = xm.compile(b.build())
    x = exe(np.float32(0.3))
    assert x.dtype == np.uint32 and set(np.unique(x)) <= {0, 1}
    assert abs(x.mean() - 0.3) < 5 * np.sqrt(0.21 / x.size)
    assert exe(np.float32(0.0)).sum() == 0
    assert (exe(np.float32(1.0)) == 1).all()


def test_the_state_advances_on_every_call_and_seed_resets_it() -> None:
    exe = sampler("rng_uniform", xm.F32, 0.0, 1.0, (8,))
    seed(exe, 0)
    first, second = exe(), exe()
    assert not np.array_equal(first, second)
    seed(exe, 0)
    np.testing.assert_array_equal(exe(), first)
    seed(exe, 7)
    other = exe()
    assert not np.array_equal(other, first)
    seed(exe, 7)
    np.testing.assert_array_equal(exe(), other)


def test_two_draws_in_one_computation_differ(b: xm.XlaBuilder) -> None:
    zero, one = b.constant(np.float32(0)), b.constant(np.float32(1))
    shape = xm.Shape.array(xm.F32, (32,))
    u, v = xm.compile(b.build([b.rng_uniform(zero, one, shape), b.rng_uniform(zero, one, shape)]))()
    assert not np.intersect1d(u, v).size


@pytest.mark.parametrize("method, a, c, shape, rule", [
    ("rng_uniform", (xm.F32, (2,)), (xm.F32, ()), (xm.F32, (3,)), "must be a scalar"),
    ("rng_uniform", (xm.F32, ()), (xm.F64, ()), (xm.F32, (3,)), "same element type"),
    ("rng_uniform", (xm.PRED, ()), (xm.PRED, ()), (xm.PRED, (3,)), "UNIFORM takes one of"),
    ("rng_uniform", (xm.S8, ()), (xm.S8, ()), (xm.S8, (3,)), "UNIFORM takes one of"),
    ("rng_uniform", (xm.F32, ()), (xm.F32, ()), (xm.F64, (3,)), "output element type"),
    ("rng_normal", (xm.S32, ()), (xm.S32, ()), (xm.S32, (3,)), "NORMAL takes one of"),
])
def test_distribution_shape_errors(b: xm.XlaBuilder, method: str, a, c, shape, rule: str) -> None:
    pa, pc = b.parameter(0, xm.Shape.array(*a)), b.parameter(1, xm.Shape.array(*c))
    with pytest.raises(xm.ShapeError, match=rule):
        getattr(b, method)(pa, pc, xm.Shape.array(*shape))
    assert not any(op.opdef is not None and op.opdef.name == "rng_get_and_update_state" for op in b.ops)


def test_bernoulli_shape_errors(b: xm.XlaBuilder) -> None:
    mean = b.parameter(0, xm.Shape.array(xm.F32, ()))
    with pytest.raises(xm.ShapeError, match="must be u32"):
        b.rng_bernoulli(mean, xm.Shape.array(xm.S32, (2,)))
    with pytest.raises(xm.ShapeError, match="floating-point scalar"):
        b.rng_bernoulli(b.parameter(1, xm.Shape.array(xm.S32, ())), (2,))


def test_distribution_ir(b: xm.XlaBuilder) -> None:
    b.rng_normal(b.constant(np.float32(0)), b.constant(np.float32(1)), xm.Shape.array(xm.F32, (3, 5)))
    comp = b.build()
    check_ir(stage_text(comp, "hlo"), """
        CHECK: %[[S:.*]] = "xhlo.rng_get_and_update_state"() {delta = 15 : i64} : () -> tensor<2xui64>
        CHECK: "xhlo.rng"(%{{.*}}, %{{.*}}, %[[S]])
        CHECK-SAME: {dimensions = array<i64: 3, 5>, rng_distribution = "NORMAL"}
    """)
    check_ir(stage_text(comp, "linalg"), """
        CHECK: memref.global @_mlir_xhlo_rng_state : memref<2xi64> = dense<0>
        CHECK: memref.get_global @_mlir_xhlo_rng_state
        CHECK: memref.load
        CHECK: memref.store
        CHECK: math.log
        CHECK: math.sin
    """)


def test_executable_seed_and_fresh_streams() -> None:
    def build():
        b = xm.XlaBuilder("seeded")
        b.rng_uniform(b.constant(np.float32(0)), b.constant(np.float32(1)), xm.Shape.array(xm.F32, (8,)))
        return b.build()

    exe = xm.compile(build())
    first, second = exe(), exe()
    assert not np.array_equal(first, second)  # the state advances between calls
    np.testing.assert_array_equal(xm.compile(build())(), first)  # a fresh executable: seed 0
    exe.seed(0)
    np.testing.assert_array_equal(exe(), first)
    exe.seed(7)
    seven = exe()
    assert not np.array_equal(seven, first)
    exe.seed(7)
    np.testing.assert_array_equal(exe(), seven)
    with pytest.raises(xm.ArgumentError):
        exe.seed("7")
