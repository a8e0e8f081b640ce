"""Vectorizable f32 exp, tanh, log, log1p, sin, cos and pow, and f64 exp, log and tanh: the
math ops rewritten into arith polynomials.

LLVM has no vector exp/tanh: `convert-math-to-llvm` gives `llvm.intr.exp` on a vector,
which the backend splits into one libm call per lane (~25 ns an element), and
`math.tanh` goes to libm element by element. The upstream rewrite into
polynomials (`populateMathPolynomialApproximationPatterns`) is only reachable
through a test pass absent from the wheels, so this pass builds the same kind
of code with the Python bindings. Like XLA:CPU's own emitters:

- exp: Cody-Waite range reduction x = k ln2 + r, |r| <= ln2/2, Cephes' degree-7
  polynomial for e^r, then the scaling by 2^k in two steps (2^(k/2) twice) so that
  results in the subnormal range round once and overflow gives inf. ~1 ulp.
- tanh: Eigen's (and XLA's) rational approximation on [-7.9, 7.9] with x itself
  for |x| < 0.0004; a few ulp.
- log: x = m 2^k with m in [sqrt(1/2), sqrt(2)) read from the bits (subnormals scaled
  by 2^23 first), Cephes' logf polynomial for log(m), k ln2 added in two parts. Within
  1 ulp over every binade; log(+-0) = -inf, log(x < 0) = x86's default NaN (as libm's).
  libm's logf took 2.2 ms for 1M f32 (numpy 0.78), the polynomial 0.31.
- log1p: Goldberg's log(u) x / (u - 1) for u = 1 + x, x itself where u rounds to 1;
  within 3 ulp (log1pf's 1.9 ms for 1M -> 0.38).
- sin, cos: in f64, x - k pi/2 with pi/2 in three parts (fused steps), fdlibm's
  double kernels on |r| <= pi/4, the quadrant's choice and sign, one rounding to f32:
  within 1 ulp, tested at the floats nearest every multiple of pi/2 below 65536. Larger
  |x| (rare) call libm for their lane, inside a branch taken only when a lane needs it.
  sinf's 3.1 ms for 1M -> 0.52 (numpy 0.50).
- f64 exp and log: fdlibm's (e_exp.c: a rational form of exp(r) on |r| <= ln2/2, 2^k in
  two steps; e_log.c: log(1 + f) through s = f / (2 + f)), within 1 ulp against a
  50-digit reference: 1M exp 2.8 -> 0.67 ms (numpy 0.75), log 0.88 -> 0.29 for 256K
  (numpy 0.36).
- f64 tanh: Cephes' (x + x^3 P/Q near 0, 1 - 2 / (exp(2|x|) + 1) from |x| = 0.625 on):
  within 1.5 ulp; 256K 2.1 -> 0.35 ms (numpy 0.38).
- f32 pow: exp(y log|x|) in f64 (the two above), rounded once: within 0.5 ulp + a
  hair; C99's special cases after (signs of odd integer powers, x^0 = 1^y = 1 even for
  NaN). 256K 0.83 -> 0.59 ms; numpy's 0.23-0.31 stays ahead.

NaN inputs give NaN, -0.0 gives -0.0, +-inf give the limits. f32 and f64 (scalar or
vector) ops are rewritten (the rest of f64 keeps libm); f16/bf16 are computed in f32
already.
Imports nothing of ours.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import arith, math, scf, vector

# Cephes expf: e^r ~ 1 + r + r^2 * P(r) on |r| <= ln2 / 2.
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1)
_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375  # exact in a few bits: k * _LN2_HI is exact for |k| <= 256
_LN2_LO = -2.12194440e-4
# Below -104 the result rounds to +0; above 88.8 it overflows: clamping there keeps k small.
_EXP_LO, _EXP_HI = -104.0, 88.8

# Eigen's float tanh: x * P(x^2) / Q(x^2), clamped where tanh rounds to +-1.
_TANH_ALPHA = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
               5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
               4.89352455891786e-03)
_TANH_BETA = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
              4.89352518554385e-03)
# Cephes logf: log(1 + f) ~ f - f^2/2 + f^3 P(f) on [sqrt(1/2) - 1, sqrt(2) - 1].
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
          1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
          3.3333331174e-1)
_SQRT_HALF = 0.707106781186547524
_MIN_NORMAL = 1.17549435e-38
_TWO_23 = 8388608.0
_INF = float("inf")
_DEFAULT_NAN_BITS = -0x400000  # 0xFFC00000: x86's default NaN, what libm's logf(-1) gives
# fdlibm's __kernel_sin / __kernel_cos coefficients (double; |r| <= pi/4).
_SIN_S = (1.58969099521155010221e-10, -2.50507602534068634195e-08, 2.75573137070700676789e-06,
          -1.98412698298579493134e-04, 8.33333333332248946124e-03, -1.66666666666666324348e-01)
_COS_C = (-1.13596475577881948265e-11, 2.08757232129817482790e-09, -2.75573143513906633035e-07,
          2.48015872894767294178e-05, -1.38888888888741095749e-03, 4.16666666666666019037e-02)
_TWO_OVER_PI = 6.36619772367581382433e-01
# pi/2 in three doubles (fdlibm's pio2_1, pio2_2, pio2_3: 33 + 33 + 33 bits).
_PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21)
# fdlibm's exp (e_exp.c) and log (e_log.c) for f64.
_EXP64_P = (4.13813679705723846039e-08, -1.65339022054652515390e-06, 6.61375632143793436117e-05,
            -2.77777777770155933842e-03, 1.66666666666666019037e-01)
_EXP64_HI, _EXP64_LO = 7.09782712893383973096e+02, -7.45133219101941108420e+02
_INV_LN2 = 1.44269504088896338700e+00
_LN2_HI64, _LN2_LO64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_LG_ODD = (1.479819860511658591e-01, 1.818357216161805012e-01, 2.857142874366239149e-01,
           6.666666666666735130e-01)  # Lg7, Lg5, Lg3, Lg1 (in w = z^2)
_LG_EVEN = (1.531383769920937332e-01, 2.222219843214978396e-01, 3.999999999940941908e-01)  # Lg6, 4, 2
# Cephes tanh.c: P (highest first) and Q (monic, highest first, the leading 1 included).
_TANH64_P = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
_TANH64_Q = (1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)
_SQRT_TWO = 1.4142135623730951
_MIN_NORMAL64 = 2.2250738585072014e-308
_DEFAULT_NAN64_BITS = -0x8000000000000  # 0xFFF8000000000000: x86's default NaN
# Below this |x| the reduction in doubles is exact enough for every f32 (k < 41722): the
# floats nearest each multiple of pi/2 are tested. Larger arguments (rare) call libm.
_TRIG_LIMIT = 65536.0
_TANH_CLAMP = 7.90531110763549805
_TANH_TINY = 0.0004
_TANH_ONE = 9.1  # 1 - tanh(x) < 2^-25 from about 9.01 on


class _Emitter:
    """Builds arith ops of one float type (f32 or f64, or a vector of it) at the insertion
    point: constants of it and of the integer type of its width, Horner, 2^k."""

    def __init__(self, float_type: ir.Type) -> None:
        self.f = float_type
        element = ir.VectorType(float_type).element_type if _is_vector(float_type) else float_type
        self._float = element
        wide = isinstance(element, ir.F64Type)
        self._int = ir.IntegerType.get_signless(64 if wide else 32)
        self._bias, self._mantissa = (1023, 52) if wide else (127, 23)
        self._nan = _DEFAULT_NAN64_BITS if wide else _DEFAULT_NAN_BITS
        if _is_vector(float_type):
            self.i = ir.VectorType.get(ir.VectorType(float_type).shape, self._int)
        else:
            self.i = self._int

    def _const(self, shaped: ir.Type, attr: ir.Attribute) -> ir.Value:
        if _is_vector(shaped):
            return arith.constant(shaped, ir.DenseElementsAttr.get_splat(shaped, attr))
        return arith.constant(shaped, attr)

    def c(self, value: float) -> ir.Value:
        return self._const(self.f, ir.FloatAttr.get(self._float, value))

    def ci(self, value: int) -> ir.Value:
        return self._const(self.i, ir.IntegerAttr.get(self._int, value))

    def default_nan(self) -> ir.Value:
        """x86's default NaN (negative, quiet): what an invalid operation gives."""
        return arith.bitcast(self.f, self.ci(self._nan))

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        return math.fma(a, b, c)

    def horner(self, x: ir.Value, coefficients: tuple[float, ...]) -> ir.Value:
        acc = self.c(coefficients[0])
        for coefficient in coefficients[1:]:
            acc = self.fma(acc, x, self.c(coefficient))
        return acc

    def pow2(self, k: ir.Value) -> ir.Value:
        """2^k for an integer k (of the width's type) in the normal exponent range, built
        from its bits."""
        biased = arith.shli(arith.addi(k, self.ci(self._bias)), self.ci(self._mantissa))
        return arith.bitcast(self.f, biased)


def _nan_through(x: ir.Value, r: ir.Value) -> ir.Value:
    """`r`, or x quieted (x + x) where x is NaN."""
    return arith.select(arith.cmpf(arith.CmpFPredicate.UNO, x, x), arith.addf(x, x), r)


def _log_limits(e: _Emitter, x: ir.Value, r: ir.Value) -> ir.Value:
    """log's special values over `r`: log(+-0) = -inf, log(x < 0) = x86's default NaN (as
    libm's), log(+inf) = +inf, NaN quieted."""
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, x, e.c(0.0)), e.c(-_INF), r)
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OLT, x, e.c(0.0)), e.default_nan(), r)
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, x, e.c(_INF)), x, r)
    return _nan_through(x, r)


def _wide(like: ir.Type) -> _Emitter:
    """An f64 emitter shaped like `like` (f32 sin/cos/pow compute in f64)."""
    f64 = ir.F64Type.get()
    return _Emitter(ir.VectorType.get(ir.VectorType(like).shape, f64) if _is_vector(like) else f64)


def _exp(e: _Emitter, x: ir.Value) -> ir.Value:
    # maxnumf/minnumf turn NaN into a bound, so k is always a finite integer; the
    # select at the end gives NaN back.
    clamped = arith.minnumf(arith.maxnumf(x, e.c(_EXP_LO)), e.c(_EXP_HI))
    kf = math.roundeven(arith.mulf(clamped, e.c(_LOG2E)))
    r = e.fma(arith.negf(kf), e.c(_LN2_HI), clamped)
    r = e.fma(arith.negf(kf), e.c(_LN2_LO), r)
    p = e.horner(r, _EXP_P)
    y = arith.addf(e.fma(p, arith.mulf(r, r), r), e.c(1.0))
    k = arith.fptosi(e.i, kf)
    half = arith.shrsi(k, e.ci(1))  # k in [-150, 128]: both halves in [-75, 64]
    y = arith.mulf(arith.mulf(y, e.pow2(half)), e.pow2(arith.subi(k, half)))
    nan = arith.cmpf(arith.CmpFPredicate.UNO, x, x)
    return arith.select(nan, x, y)


def _tanh(e: _Emitter, x: ir.Value) -> ir.Value:
    # minimumf/maximumf propagate NaN through the clamp and the rational function.
    clamped = arith.maximumf(arith.minimumf(x, e.c(_TANH_CLAMP)), e.c(-_TANH_CLAMP))
    x2 = arith.mulf(clamped, clamped)
    p = arith.mulf(clamped, e.horner(x2, _TANH_ALPHA))
    q = e.horner(x2, _TANH_BETA)
    ratio = arith.divf(p, q)
    magnitude = math.absf(x)
    # The rational function stops 2 ulp short of +-1; tanh rounds to +-1 from ~9.01 on.
    ratio = arith.select(arith.cmpf(arith.CmpFPredicate.OGE, magnitude, e.c(_TANH_ONE)),
                         math.copysign(e.c(1.0), x), ratio)
    tiny = arith.cmpf(arith.CmpFPredicate.OLT, magnitude, e.c(_TANH_TINY))
    return arith.select(tiny, x, ratio)  # tanh(x) == x in f32 there, -0.0 included


def _log(e: _Emitter, x: ir.Value) -> ir.Value:
    # Subnormals scaled into the normal range first (their exponent field reads 0).
    small = arith.cmpf(arith.CmpFPredicate.OLT, x, e.c(_MIN_NORMAL))
    scaled = arith.select(small, arith.mulf(x, e.c(_TWO_23)), x)
    bits = arith.bitcast(e.i, scaled)
    k = arith.subi(arith.andi(arith.shrui(bits, e.ci(23)), e.ci(0xFF)), e.ci(126))
    k = arith.subi(k, arith.select(small, e.ci(23), e.ci(0)))
    # m in [0.5, 1): the mantissa with the exponent of 0.5; x = m 2^k.
    m = arith.bitcast(e.f, arith.ori(arith.andi(bits, e.ci(0x007FFFFF)), e.ci(0x3F000000)))
    below = arith.cmpf(arith.CmpFPredicate.OLT, m, e.c(_SQRT_HALF))
    k = arith.subi(k, arith.select(below, e.ci(1), e.ci(0)))
    # f = m - 1 (or 2m - 1, exact) in [sqrt(1/2) - 1, sqrt(2) - 1]
    f = arith.subf(arith.select(below, arith.addf(m, m), m), e.c(1.0))
    z = arith.mulf(f, f)
    y = arith.mulf(arith.mulf(e.horner(f, _LOG_P), f), z)
    kf = arith.sitofp(e.f, k)
    y = e.fma(kf, e.c(_LN2_LO), y)
    y = e.fma(z, e.c(-0.5), y)
    return _log_limits(e, x, e.fma(kf, e.c(_LN2_HI), arith.addf(f, y)))


def _log1p(e: _Emitter, x: ir.Value) -> ir.Value:
    # Goldberg's: log1p(x) = log(u) * x / (u - 1) for u = 1 + x rounded, exact where
    # u == 1 (x itself, -0.0 included); the division corrects u's rounding error.
    u = arith.addf(x, e.c(1.0))
    log_u = _log(e, u)
    r = arith.mulf(log_u, arith.divf(x, arith.subf(u, e.c(1.0))))
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, u, e.c(_INF)), u, r)
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, u, e.c(1.0)), x, r)
    # u - 1 == 0 only with u == 1; x == -1: log(0) * (-1 / -1) = -inf; x < -1: NaN from log.
    return _nan_through(x, r)


def _exp64(w: _Emitter, x: ir.Value) -> ir.Value:
    """fdlibm's exp: x = k ln2 + r (ln2 in two parts), exp(r) = 1 + 2r / (2 - r + r R(r^2))
    in its rearranged form, scaled by 2^k in two steps (subnormal results round once)."""
    clamped = arith.minnumf(arith.maxnumf(x, w.c(_EXP64_LO - 1.0)), w.c(_EXP64_HI + 1.0))
    k = math.roundeven(arith.mulf(clamped, w.c(_INV_LN2)))
    hi = math.fma(arith.negf(k), w.c(_LN2_HI64), clamped)  # exact: k ln2_hi has 32 bits
    lo = arith.mulf(k, w.c(_LN2_LO64))
    r = arith.subf(hi, lo)
    t = arith.mulf(r, r)
    c = arith.subf(r, arith.mulf(t, w.horner(t, _EXP64_P)))
    y = arith.subf(w.c(1.0), arith.subf(arith.subf(lo, arith.divf(arith.mulf(r, c),
                                                                  arith.subf(w.c(2.0), c))), hi))
    ki = arith.fptosi(w.i, k)  # in [-1077, 1026]: both halves in the normal range
    half = arith.shrsi(ki, w.ci(1))
    y = arith.mulf(arith.mulf(y, w.pow2(half)), w.pow2(arith.subi(ki, half)))
    y = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, w.c(_EXP64_HI)), w.c(_INF), y)
    y = arith.select(arith.cmpf(arith.CmpFPredicate.OLT, x, w.c(_EXP64_LO)), w.c(0.0), y)
    return _nan_through(x, y)


def _tanh64(w: _Emitter, x: ir.Value) -> ir.Value:
    """Cephes' tanh: x + x^3 P(x^2) / Q(x^2) for |x| <= 0.625, else 1 - 2 / (exp(2|x|) + 1)
    with the sign of x (exp as `_exp64`); +-1 from |x| = 22 on (tanh rounds to it)."""
    magnitude = math.absf(x)
    z = arith.mulf(x, x)
    p = arith.mulf(z, w.horner(z, _TANH64_P))
    q = w.horner(z, _TANH64_Q)
    near_zero = math.fma(x, arith.divf(p, q), x)
    e = _exp64(w, arith.minnumf(arith.addf(magnitude, magnitude), w.c(44.0)))
    far = math.copysign(arith.subf(w.c(1.0), arith.divf(w.c(2.0), arith.addf(e, w.c(1.0)))), x)
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OLE, magnitude, w.c(0.625)), near_zero, far)
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OGE, magnitude, w.c(22.0)),
                     math.copysign(w.c(1.0), x), r)
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, x, w.c(0.0)), x, r)  # tanh(-0) = -0
    return _nan_through(x, r)


def _reduced(w: _Emitter, bits: ir.Value, k: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(k', m) with 2^k' m the f64 of `bits` whose exponent is k, m in [sqrt(1/2), sqrt(2)):
    the mantissa with 1.0's exponent, halved (and k' one more) above sqrt(2)."""
    m = arith.bitcast(w.f, arith.ori(arith.andi(bits, w.ci(0x000FFFFFFFFFFFFF)),
                                     w.ci(0x3FF0000000000000)))
    above = arith.cmpf(arith.CmpFPredicate.OGT, m, w.c(_SQRT_TWO))
    return (arith.addi(k, arith.select(above, w.ci(1), w.ci(0))),
            arith.select(above, arith.mulf(m, w.c(0.5)), m))


def _log64(w: _Emitter, x: ir.Value) -> ir.Value:
    """fdlibm's log: x = 2^k (1 + f), sqrt(1/2) <= 1 + f < sqrt(2), s = f / (2 + f),
    log(1 + f) = f - (hfsq - s (hfsq + R(s^2))), k ln2 added in two parts."""
    small = arith.cmpf(arith.CmpFPredicate.OLT, x, w.c(_MIN_NORMAL64))
    scaled = arith.select(small, arith.mulf(x, w.c(2.0**54)), x)
    bits = arith.bitcast(w.i, scaled)
    k = arith.subi(arith.andi(arith.shrui(bits, w.ci(52)), w.ci(0x7FF)), w.ci(1023))
    k, m = _reduced(w, bits, arith.subi(k, arith.select(small, w.ci(54), w.ci(0))))
    f = arith.subf(m, w.c(1.0))
    s_ = arith.divf(f, arith.addf(w.c(2.0), f))
    z = arith.mulf(s_, s_)
    v = arith.mulf(z, z)
    t1 = arith.mulf(v, w.horner(v, _LG_EVEN))
    t2 = arith.mulf(z, w.horner(v, _LG_ODD))
    big_r = arith.addf(t2, t1)
    hfsq = arith.mulf(w.c(0.5), arith.mulf(f, f))
    kf = arith.sitofp(w.f, k)
    inner = arith.addf(arith.mulf(s_, arith.addf(hfsq, big_r)), arith.mulf(kf, w.c(_LN2_LO64)))
    r = arith.subf(arith.mulf(kf, w.c(_LN2_HI64)), arith.subf(arith.subf(hfsq, inner), f))
    return _log_limits(w, x, r)


def _trig(e: _Emitter, x: ir.Value, cosine: bool) -> ir.Value:
    """sin or cos of f32 x: reduced by pi/2 in f64 (k = round(x 2/pi), r = x - k pi/2 in
    three fused steps: exact enough for every |x| < _TRIG_LIMIT), fdlibm's kernels on
    |r| <= pi/4 in f64, the quadrant's choice and sign, one rounding to f32. Non-finite x
    gives x - x (NaN, as libm); |x| >= _TRIG_LIMIT calls libm for that lane."""
    w = _wide(e.f)
    xd = arith.extf(w.f, x)
    k = math.roundeven(arith.mulf(xd, w.c(_TWO_OVER_PI)))
    minus_k = arith.negf(k)
    r = xd
    for part in _PIO2:
        r = math.fma(minus_k, w.c(part), r)
    z = arith.mulf(r, r)
    sin_r = math.fma(arith.mulf(r, z), w.horner(z, _SIN_S), r)
    cos_r = math.fma(arith.mulf(z, z), w.horner(z, _COS_C), math.fma(z, w.c(-0.5), w.c(1.0)))
    # The quadrant n = k mod 4 (k is at most ~41722 where this is used; junk elsewhere).
    n = arith.fptosi(w.i, arith.maximumf(arith.minimumf(k, w.c(2.0**40)), w.c(-(2.0**40))))
    odd = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(n, w.ci(1)), w.ci(0))
    quadrant = arith.addi(n, w.ci(1)) if cosine else n
    negative = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(quadrant, w.ci(2)), w.ci(0))
    value = arith.select(odd, sin_r, cos_r) if cosine else arith.select(odd, cos_r, sin_r)
    value = arith.select(negative, arith.negf(value), value)
    result = arith.truncf(e.f, value)
    if not cosine:  # sin(-0) = -0 (the reduction's x - 0 * pi/2 made it +0)
        result = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, x, e.c(0.0)), x, result)
    magnitude = math.absf(x)
    finite = arith.cmpf(arith.CmpFPredicate.OLT, magnitude, e.c(_INF))
    result = arith.select(finite, result, arith.subf(x, x))
    large = arith.andi(finite, arith.cmpf(arith.CmpFPredicate.OGE, magnitude, e.c(_TRIG_LIMIT)))
    return _with_libm(large, x, result, "math.cos" if cosine else "math.sin")


def _with_libm(large: ir.Value, x: ir.Value, result: ir.Value, op_name: str) -> ir.Value:
    """`result` with libm's value (the op `op_name` on a scalar: LLVM calls sinf/cosf) in
    the lanes where `large`, computed only when a lane is."""
    i1 = ir.IntegerType.get_signless(1)
    vector_type = _is_vector(x.type)
    any_large = vector.reduction(i1, vector.CombiningKind.OR, large) if vector_type else large
    branch = scf.IfOp(any_large, [result.type], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        if vector_type:
            lanes = ir.VectorType(x.type).shape[0]
            values = []
            for lane in range(lanes):
                xi = vector.extract(x, [], [lane])
                exact = ir.Operation.create(op_name, results=[xi.type], operands=[xi]).results[0]
                values.append(arith.select(vector.extract(large, [], [lane]), exact,
                                           vector.extract(result, [], [lane])))
            scf.YieldOp([vector.from_elements(result.type, values)])
        else:
            scf.YieldOp([ir.Operation.create(op_name, results=[x.type], operands=[x]).results[0]])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([result])
    return branch.results[0]


# f32 pow's log and exp in f64, without a division: log1p(t) = t Q(t) on [sqrt(1/2) - 1,
# sqrt(2) - 1] (Q of degree 16, Chebyshev-fitted: relative error 1.3e-14) and exp(r) =
# 1 + r + r^2 E(r) on [-ln2/2, ln2/2] (E: Taylor to r^12, 4.7e-16). fdlibm's forms
# (`_log64`, `_exp64`) divide once each: 4 vdivpd per 16 lanes were half of pow's time.
_POW_LOG_Q = (0.03564454386388931, -0.07447460185988995, 0.07807316868240015, -0.07171589117893185,
              0.07525333323920909, -0.08309219293738979, 0.09102746104514091, -0.1000236782753003,
              0.11110662651900366, -0.1249989649938264, 0.14285723316545196, -0.16666668846259508,
              0.1999999991108197, -0.24999999980318843, 0.33333333333677184, -0.5000000000005075,
              0.9999999999999976)
_POW_EXP_E = (2.08767569878681e-09, 2.505210838544172e-08, 2.755731922398589e-07,
              2.7557319223985893e-06, 2.48015873015873e-05, 0.0001984126984126984,
              0.001388888888888889, 0.008333333333333333, 0.041666666666666664,
              0.16666666666666666, 0.5)
_LN2_64 = 0.6931471805599453
# exp's argument clamped here: e^+-160 is far outside f32's range either way, and k stays
# in 2^k's normal range (one scaling).
_POW_EXP_BOUND = 160.0


def _log_for_pow(w: _Emitter, a: ir.Value) -> ir.Value:
    """log(a) for a = |x|, x an f32 widened to f64 (so a is 0, inf, NaN or normal in f64),
    relative error ~1.3e-14: a = 2^k m, m in [sqrt(1/2), sqrt(2)), log m = t Q(t), t = m - 1."""
    bits = arith.bitcast(w.i, a)
    k, m = _reduced(w, bits, arith.subi(arith.andi(arith.shrui(bits, w.ci(52)), w.ci(0x7FF)),
                                        w.ci(1023)))
    t = arith.subf(m, w.c(1.0))
    log_m = arith.mulf(t, w.horner(t, _POW_LOG_Q))
    r = math.fma(arith.sitofp(w.f, k), w.c(_LN2_64), log_m)
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, a, w.c(0.0)), w.c(-_INF), r)
    return arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, a, w.c(_INF)), w.c(_INF), r)


def _exp_for_pow(w: _Emitter, z: ir.Value) -> ir.Value:
    """e^z in f64 where the f32 result is all that matters (relative error ~1e-14 inside
    f32's range; beyond it, far beyond either way): z = k ln2 + r (ln2 in two parts),
    e^r = 1 + r + r^2 E(r), times 2^k. NaN through."""
    clamped = arith.minnumf(arith.maxnumf(z, w.c(-_POW_EXP_BOUND)), w.c(_POW_EXP_BOUND))
    k = math.roundeven(arith.mulf(clamped, w.c(_INV_LN2)))
    hi = math.fma(arith.negf(k), w.c(_LN2_HI64), clamped)  # exact: k ln2_hi has 32 bits
    r = arith.subf(hi, arith.mulf(k, w.c(_LN2_LO64)))
    y = arith.addf(math.fma(arith.mulf(r, r), w.horner(r, _POW_EXP_E), r), w.c(1.0))
    y = arith.mulf(y, w.pow2(arith.fptosi(w.i, k)))
    return _nan_through(z, y)


def _pow(e: _Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    """f32 pow as exp(y log|x|) in f64 (`_log_for_pow`, `_exp_for_pow`: |y log|x|| <= ~104
    where the result is a finite nonzero f32, so its relative error stays ~1e-12), rounded
    once; then C99's special cases (SEMANTICS.md Pow: pow(x, 0) = 1 even for NaN)."""
    w = _wide(e.f)
    xd, yd = arith.extf(w.f, x), arith.extf(w.f, y)
    magnitude = arith.truncf(e.f, _exp_for_pow(w, arith.mulf(yd, _log_for_pow(w, math.absf(xd)))))
    one = e.c(1.0)
    # y an integer (every f32 of 2^24 and more is, and even), and odd.
    integer = arith.cmpf(arith.CmpFPredicate.OEQ, math.floor(yd), yd)
    half = arith.mulf(yd, w.c(0.5))
    odd = arith.andi(integer, arith.cmpf(arith.CmpFPredicate.ONE, math.floor(half), half))
    negative = arith.cmpf(arith.CmpFPredicate.OLT, x, e.c(0.0))
    minus_zero = arith.andi(arith.cmpf(arith.CmpFPredicate.OEQ, x, e.c(0.0)),
                            arith.cmpi(arith.CmpIPredicate.slt, arith.bitcast(e.i, x), e.ci(0)))
    flip = arith.andi(odd, arith.ori(negative, minus_zero))
    r = arith.select(flip, arith.negf(magnitude), magnitude)
    finite_y = arith.cmpf(arith.CmpFPredicate.OLT, math.absf(y), e.c(_INF))
    finite_x = arith.cmpf(arith.CmpFPredicate.OGT, x, e.c(-_INF))
    # A negative finite x to a finite non-integer power: x86's default NaN (pow(-inf, y)
    # takes the magnitude's limit). UNE and UGE: the negations of OEQ and OLT.
    not_integer = arith.cmpf(arith.CmpFPredicate.UNE, math.floor(yd), yd)
    invalid = arith.andi(arith.andi(arith.andi(negative, finite_x), finite_y), not_integer)
    r = arith.select(invalid, e.default_nan(), r)
    # (-1)^(+-inf) = 1; NaNs quieted; 1^y = 1 and x^0 = 1 whatever the other is.
    minus_one = arith.cmpf(arith.CmpFPredicate.OEQ, x, e.c(-1.0))
    not_finite_y = arith.cmpf(arith.CmpFPredicate.UGE, math.absf(y), e.c(_INF))
    r = arith.select(arith.andi(minus_one, not_finite_y), one, r)
    r = _nan_through(x, _nan_through(y, r))
    r = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, x, one), one, r)
    return arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, y, e.c(0.0)), one, r)


def _sin(e: _Emitter, x: ir.Value) -> ir.Value:
    return _trig(e, x, cosine=False)


def _cos(e: _Emitter, x: ir.Value) -> ir.Value:
    return _trig(e, x, cosine=True)


_REWRITES = {"math.exp": _exp, "math.tanh": _tanh, "math.log": _log, "math.log1p": _log1p,
             "math.sin": _sin, "math.cos": _cos, "math.powf": _pow}
_REWRITES64 = {"math.exp": _exp64, "math.log": _log64, "math.tanh": _tanh64}


def _is_vector(t: ir.Type) -> bool:
    return str(t).startswith("vector<")


def _is_f32(t: ir.Type) -> bool:
    return str(t) == "f32" or (_is_vector(t) and str(t).endswith("xf32>"))


def _is_f64(t: ir.Type) -> bool:
    return str(t) == "f64" or (_is_vector(t) and str(t).endswith("xf64>"))


def approximate_math(op: Any, pass_: Any) -> None:
    """Rewrite every f32 math.exp / tanh / log / log1p / sin / cos / powf and f64 math.exp /
    log / tanh under `op` into a polynomial."""
    found: list[ir.Operation] = []

    def visit(inner: Any) -> ir.WalkResult:
        t = inner.results[0].type if len(inner.results) == 1 else None
        if (inner.name in _REWRITES and _is_f32(t)) or (inner.name in _REWRITES64 and _is_f64(t)):
            found.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    for target in found:
        result = target.results[0]
        with ir.InsertionPoint(target), target.location:
            rewrites = _REWRITES if _is_f32(result.type) else _REWRITES64
            new = rewrites[target.name](_Emitter(result.type), *target.operands)
        result.replace_all_uses_with(new)
        target.erase()
