/* Vectorised exp, erf, GELU (exact and tanh) and SwiGLU row kernels (see
 * ops/vmath.h), compiled once per kernel set on ops/simd.h. */
#include <math.h>

#include "ops/kernels/set.h"

enum { V = HL_VL, PARTS = HL_SUM_LANES / HL_VL };
_Static_assert(HL_SUM_LANES % HL_VL == 0, "whole vectors of partial sums");

#if defined(HL_REAL_DOUBLE)

/* The double build calls libm per element: it exists for tight gradient
 * checks, not for speed. Its sums keep the same HL_SUM_LANES partials. */
static hl_real vexp1(hl_real x) { return exp(x); }

hl_real HL_SIMD_FN(hl_vmath_max)(const hl_real *x, size_t n)
{
    hl_real best = -INFINITY;
    int any_nan = 0;
    for (size_t i = 0; i < n; i++) {
        any_nan |= x[i] != x[i];
        best = x[i] > best ? x[i] : best;
    }
    return any_nan ? (hl_real)NAN : best;
}

double HL_SIMD_FN(hl_vmath_exp_sum)(const hl_real *x, hl_real shift, hl_real *y, size_t n)
{
    double lanes[HL_SUM_LANES] = {0};
    for (size_t i = 0; i < n; i++) {
        const hl_real e = vexp1(x[i] - shift);
        if (y)
            y[i] = e;
        lanes[i % HL_SUM_LANES] += e;
    }
    return hl_sum_lanes_total(lanes);
}

void HL_SIMD_FN(hl_vmath_exp_sum_rows)(hl_real *x, size_t ldx, int rows, size_t n,
                                       const hl_real *shift, double *sum)
{
    for (int r = 0; r < rows; r++) {
        hl_real *row = x + (size_t)r * ldx;
        sum[r] = HL_SIMD_FN(hl_vmath_exp_sum)(row, shift[r], row, n);
    }
}

void HL_SIMD_FN(hl_vmath_exp)(const hl_real *x, hl_real a, hl_real b, hl_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = vexp1(x[i] - a - b);
}

void HL_SIMD_FN(hl_vmath_erf)(const hl_real *x, hl_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = erf(x[i]);
}

#define GELU_SQRT1_2 0.70710678118654752440      /* 1/√2 */
#define GELU_INV_SQRT_2PI 0.39894228040143267794 /* 1/√(2π) */

static hl_real normal_cdf(hl_real x) { return 0.5 * (1 + erf(x * GELU_SQRT1_2)); }

void HL_SIMD_FN(hl_vmath_gelu)(const hl_real *x, hl_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * normal_cdf(x[i]);
}

void HL_SIMD_FN(hl_vmath_gelu_grad)(const hl_real *x, const hl_real *dy, hl_real *dx, size_t n,
                                    bool overwrite)
{
    for (size_t i = 0; i < n; i++) {
        const hl_real pdf = GELU_INV_SQRT_2PI * exp(-0.5 * x[i] * x[i]);
        const hl_real d = dy[i] * (normal_cdf(x[i]) + x[i] * pdf);
        dx[i] = overwrite ? d : dx[i] + d;
    }
}

/* GELU's tanh form as x·σ(2u) (see ops/vmath.h), 2u = 2√(2/π)·(x + κ·x³). */
#define GELU_TANH_2BETA 1.59576912160573071176 /* 2·√(2/π) */
#define GELU_TANH_KAPPA 0.044715
/* Past this |x| σ(2u) is exactly 0 or 1 (e^(-2u) overflows or vanishes
 * beside 1) and so the slope's second term is 0; x is clamped to it there,
 * where x·x could overflow and make it 0·inf. */
#define GELU_TANH_FLAT 30.0

static hl_real gelu_tanh_2u(hl_real x)
{
    return GELU_TANH_2BETA * (x + GELU_TANH_KAPPA * (x * x * x));
}

void HL_SIMD_FN(hl_vmath_gelu_tanh)(const hl_real *x, hl_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] / (1 + exp(-gelu_tanh_2u(x[i])));
}

void HL_SIMD_FN(hl_vmath_gelu_tanh_grad)(const hl_real *x, const hl_real *dy, hl_real *dx,
                                         size_t n, bool overwrite)
{
    for (size_t i = 0; i < n; i++) {
        const hl_real s = 1 / (1 + exp(-gelu_tanh_2u(x[i])));
        /* Comparisons keep NaN, where fmin and fmax would drop it. */
        const hl_real xc = x[i] < -GELU_TANH_FLAT  ? -GELU_TANH_FLAT
                           : x[i] > GELU_TANH_FLAT ? GELU_TANH_FLAT
                                                   : x[i];
        const hl_real du = GELU_TANH_2BETA * (1 + 3 * GELU_TANH_KAPPA * (xc * xc));
        const hl_real d = dy[i] * (s + xc * (s * (1 - s)) * du);
        dx[i] = overwrite ? d : dx[i] + d;
    }
}

void HL_SIMD_FN(hl_vmath_swiglu)(const hl_real *gate, const hl_real *up, hl_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = gate[i] / (1 + exp(-gate[i])) * up[i];
}

void HL_SIMD_FN(hl_vmath_swiglu_grad)(const hl_real *gate, const hl_real *up, const hl_real *dy,
                                      hl_real *dgate, hl_real *dup, size_t n, bool overwrite)
{
    for (size_t i = 0; i < n; i++) {
        const hl_real sig = 1 / (1 + exp(-gate[i]));
        const hl_real dg = dy[i] * up[i] * sig * (1 + gate[i] * (1 - sig));
        const hl_real du = dy[i] * gate[i] * sig;
        dgate[i] = overwrite ? dg : dgate[i] + dg;
        dup[i] = overwrite ? du : dup[i] + du;
    }
}

void HL_SIMD_FN(hl_vmath_xent_grad)(const hl_real *x, hl_real a, hl_real b, hl_real scale,
                                    size_t hot, hl_real *y, size_t n, bool overwrite)
{
    for (size_t i = 0; i < n; i++) {
        const hl_real d = scale * (vexp1(x[i] - a - b) - (hl_real)(i == hot));
        y[i] = overwrite ? d : y[i] + d;
    }
}

void HL_SIMD_FN(hl_vmath_softcap)(const hl_real *x, hl_real cap, hl_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = cap * tanh(x[i] / cap);
}

void HL_SIMD_FN(hl_vmath_softcap_xent_grad)(const hl_real *x, hl_real cap, hl_real a, hl_real b,
                                            hl_real scale, size_t hot, hl_real *y, size_t n,
                                            bool overwrite)
{
    for (size_t i = 0; i < n; i++) {
        const hl_real t = tanh(x[i] / cap);
        const hl_real p = vexp1(cap * t - a - b);
        const hl_real d = scale * (p - (hl_real)(i == hot)) * (1 - t * t);
        y[i] = overwrite ? d : y[i] + d;
    }
}

void HL_SIMD_FN(hl_vmath_add)(const hl_real *x, hl_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

#else /* float */

/* ---- exp: e^x = 2^n·e^r with n = round(x/ln 2) and |r| ≤ ln2/2, e^r by its
 * Taylor polynomial of degree 7 (truncation error below 6e-9 relative).
 * ln 2 = LN2_HI + LN2_LO, LN2_HI with 15 significant bits, so n·LN2_HI is
 * exact for |n| < 512 and so is x - n·LN2_HI (Cody and Waite). Inputs are
 * clamped to [-104, 89] first: e^-104 rounds to 0 and e^89 overflows, so
 * the clamp changes no result, and it keeps n in [-150, 128]. hl_vmin and
 * hl_vmax return their second operand when either is NaN, so the clamp
 * keeps NaN. */
#define EXP_LO -104.0f
#define EXP_HI 89.0f
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693145751953125f
#define LN2_LO 1.42860682030941723e-6f

HL_SIMD_INLINE hl_vec vexp(hl_vec x)
{
    x = hl_vmin(hl_vset1(EXP_HI), hl_vmax(hl_vset1(EXP_LO), x));
    const hl_vec n = hl_vround(hl_vmul(x, hl_vset1(LOG2E)));
    hl_vec r = hl_vfma(n, hl_vset1(-LN2_HI), x);
    r = hl_vfma(n, hl_vset1(-LN2_LO), r);
    hl_vec p = hl_vset1(1.0f / 5040);
    p = hl_vfma(p, r, hl_vset1(1.0f / 720));
    p = hl_vfma(p, r, hl_vset1(1.0f / 120));
    p = hl_vfma(p, r, hl_vset1(1.0f / 24));
    p = hl_vfma(p, r, hl_vset1(1.0f / 6));
    p = hl_vfma(p, r, hl_vset1(0.5f));
    p = hl_vfma(p, r, hl_vset1(1.0f));
    p = hl_vfma(p, r, hl_vset1(1.0f));
    return hl_vscale2(p, n);
}

/* ---- erf, odd, in two pieces by |x| = a, each a polynomial fitted to
 * Chebyshev nodes with mpmath (tools/fit_vmath.py, which prints the
 * coefficients and their error):
 *   a < 2:  erf = a·G(a² - 2), G(z - 2) = erf(√z)/√z, error 4.9e-10;
 *   a ≥ 2:  erf = 1 - E(a - 3), E(t - 3) = erfc(t) on [2, 4], error 9.1e-10.
 * Above 3.92 erf rounds to 1, so a is clamped to 4. */
static const float ERF_G[] = {
    2.587563979e-09f,  -2.949438958e-08f, 2.797864658e-07f, -2.609178768e-06f,
    2.195576011e-05f,  -1.636059349e-04f, 1.070520672e-03f, -6.082835675e-03f,
    2.986978483e-02f,  -1.305559328e-01f, 6.749332360e-01f,
};
static const float ERF_E[] = {
    9.620902835e-06f,  -2.214484321e-05f, -1.231837759e-05f, 1.411915331e-04f,
    -3.914576359e-04f, 7.349403191e-04f,  -1.016332202e-03f, 1.045097117e-03f,
    -7.891193661e-04f, 4.177003607e-04f,  -1.392527909e-04f, 2.209131054e-05f,
};

/* Σ c[i]·t^(n-1-i) by Horner's rule, highest power first. */
HL_SIMD_INLINE hl_vec horner(const float *c, int n, hl_vec t)
{
    hl_vec p = hl_vset1(c[0]);
    for (int i = 1; i < n; i++)
        p = hl_vfma(p, t, hl_vset1(c[i]));
    return p;
}

HL_SIMD_INLINE hl_vec verf(hl_vec x)
{
    const hl_vec a = hl_vmin(hl_vset1(4.0f), hl_vabs(x));
    const int ng = (int)(sizeof ERF_G / sizeof ERF_G[0]);
    const int ne = (int)(sizeof ERF_E / sizeof ERF_E[0]);
    const hl_vec small = hl_vmul(a, horner(ERF_G, ng, hl_vfma(a, a, hl_vset1(-2.0f))));
    /* Most vectors of a network's pre-activations lie wholly below 2 (GELU
     * takes erf at x/√2): they skip the second polynomial, with the same bits. */
    if (hl_vall_lt(a, hl_vset1(2.0f)))
        return hl_vcopysign(small, x);
    const hl_vec large = hl_vsub(hl_vset1(1.0f), horner(ERF_E, ne, hl_vsub(a, hl_vset1(3.0f))));
    return hl_vcopysign(hl_vselect_lt(a, hl_vset1(2.0f), small, large), x);
}

#define GELU_SQRT1_2 0.70710678118654752440f      /* 1/√2 */
#define GELU_INV_SQRT_2PI 0.39894228040143267794f /* 1/√(2π) */

/* Φ(x) = 0.5·(1 + erf(x/√2)), as PyTorch's CPU kernel. */
HL_SIMD_INLINE hl_vec normal_cdf(hl_vec x)
{
    return hl_vmul(hl_vset1(0.5f),
                   hl_vadd(hl_vset1(1), verf(hl_vmul(x, hl_vset1(GELU_SQRT1_2)))));
}

HL_SIMD_INLINE hl_vec gelu(hl_vec x) { return hl_vmul(x, normal_cdf(x)); }

/* d/dx x·Φ(x) = Φ(x) + x·φ(x), φ(x) = e^(-x²/2)/√(2π). */
HL_SIMD_INLINE hl_vec gelu_slope(hl_vec x)
{
    const hl_vec pdf = hl_vmul(hl_vset1(GELU_INV_SQRT_2PI),
                               vexp(hl_vmul(hl_vmul(hl_vset1(-0.5f), x), x)));
    return hl_vadd(normal_cdf(x), hl_vmul(x, pdf));
}

/* ---- The row kernels. A row is whole vectors, then a partial one whose
 * missing lanes are zeros that are never stored or summed. */

/* The max is exact whatever the order; NaN is tracked on the side, since
 * max instructions drop it. */
hl_real HL_SIMD_FN(hl_vmath_max)(const hl_real *x, size_t n)
{
    hl_real best = -INFINITY;
    size_t i = 0;
    int any_nan = 0;
    if (n >= (size_t)V) {
        hl_vec m = hl_vload(x);
        for (; i + V <= n; i += V) {
            const hl_vec v = hl_vload(x + i);
            any_nan |= hl_vhas_nan(v);
            m = hl_vmax(m, v);
        }
        _Alignas(64) hl_real lanes[V];
        hl_vstore(lanes, m);
        for (int j = 0; j < V; j++)
            best = lanes[j] > best ? lanes[j] : best;
    }
    for (; i < n; i++) {
        any_nan |= x[i] != x[i];
        best = x[i] > best ? x[i] : best;
    }
    return any_nan ? (hl_real)NAN : best;
}

/* Element i goes to partial sum i mod HL_SUM_LANES, whatever the width. */
HL_SIMD_INLINE double exp_sum(const hl_real *x, hl_real shift, hl_real *y, size_t n)
{
    const hl_vec s = hl_vset1(shift);
    hl_dsum sum = hl_dsum_zero();
    size_t i = 0;
    for (; i + HL_SUM_LANES <= n; i += HL_SUM_LANES)
#pragma GCC unroll 4
        for (int part = 0; part < PARTS; part++) {
            const size_t at = i + (size_t)part * V;
            const hl_vec e = vexp(hl_vsub(hl_vload(x + at), s));
            if (y)
                hl_vstore(y + at, e);
            hl_dsum_add(&sum, part, e);
        }
    for (int part = 0; i < n; part++, i += V) {
        const int left = n - i < (size_t)V ? (int)(n - i) : V;
        const hl_vmask m = hl_vmask_first(left);
        const hl_vec e = hl_vkeep_n(vexp(hl_vsub(hl_vload_mask(x + i, m), s)), left);
        if (y)
            hl_vstore_mask(y + i, e, m);
        hl_dsum_add(&sum, part, e);
    }
    return hl_dsum_total(&sum);
}

double HL_SIMD_FN(hl_vmath_exp_sum)(const hl_real *x, hl_real shift, hl_real *y, size_t n)
{
    return exp_sum(x, shift, y, n);
}

/* A score tile's rows are short (64 keys in the fused attention): one call
 * for all of them saves a call, the constants' loads and the wait for each
 * row's sum before the next row starts. */
void HL_SIMD_FN(hl_vmath_exp_sum_rows)(hl_real *x, size_t ldx, int rows, size_t n,
                                       const hl_real *shift, double *sum)
{
    for (int r = 0; r < rows; r++)
        sum[r] = exp_sum(x + (size_t)r * ldx, shift[r], x + (size_t)r * ldx, n);
}

void HL_SIMD_FN(hl_vmath_exp)(const hl_real *x, hl_real a, hl_real b, hl_real *y, size_t n)
{
    const hl_vec va = hl_vset1(a), vb = hl_vset1(b);
#define EXP_AB(v) vexp(hl_vsub(hl_vsub(v, va), vb))
    HL_ROW_MAP(x, y, n, EXP_AB);
#undef EXP_AB
}

void HL_SIMD_FN(hl_vmath_erf)(const hl_real *x, hl_real *y, size_t n) { HL_ROW_MAP(x, y, n, verf); }

void HL_SIMD_FN(hl_vmath_gelu)(const hl_real *x, hl_real *y, size_t n)
{
    HL_ROW_MAP(x, y, n, gelu);
}

void HL_SIMD_FN(hl_vmath_gelu_grad)(const hl_real *x, const hl_real *dy, hl_real *dx, size_t n,
                                    bool overwrite)
{
    size_t i = 0;
    for (; i + V <= n; i += V) {
        const hl_vec d = hl_vmul(hl_vload(dy + i), gelu_slope(hl_vload(x + i)));
        hl_vstore(dx + i, overwrite ? d : hl_vadd(hl_vload(dx + i), d));
    }
    if (i < n) {
        const hl_vmask m = hl_vmask_first((int)(n - i));
        const hl_vec d = hl_vmul(hl_vload_mask(dy + i, m), gelu_slope(hl_vload_mask(x + i, m)));
        hl_vstore_mask(dx + i, overwrite ? d : hl_vadd(hl_vload_mask(dx + i, m), d), m);
    }
}

/* σ(g) = 1/(1 + e^-g): e^-g overflows to inf for g < -88 and σ is then 0. */
HL_SIMD_INLINE hl_vec sigmoid(hl_vec g)
{
    const hl_vec one = hl_vset1(1);
    return hl_vdiv(one, hl_vadd(one, vexp(hl_vsub(hl_vzero(), g))));
}

/* y = silu(gate)·up = (gate·σ(gate))·up. */
HL_SIMD_INLINE hl_vec swiglu(hl_vec g, hl_vec u) { return hl_vmul(hl_vmul(g, sigmoid(g)), u); }

void HL_SIMD_FN(hl_vmath_swiglu)(const hl_real *gate, const hl_real *up, hl_real *y, size_t n)
{
    size_t i = 0;
    for (; i + V <= n; i += V)
        hl_vstore(y + i, swiglu(hl_vload(gate + i), hl_vload(up + i)));
    if (i < n) {
        const hl_vmask m = hl_vmask_first((int)(n - i));
        hl_vstore_mask(y + i, swiglu(hl_vload_mask(gate + i, m), hl_vload_mask(up + i, m)), m);
    }
}

/* d gate = dy·up·σ·(1 + gate·(1 - σ)), d up = dy·gate·σ. */
HL_SIMD_INLINE void swiglu_grad(hl_vec g, hl_vec u, hl_vec dy, hl_vec *dg, hl_vec *du)
{
    const hl_vec one = hl_vset1(1), sig = sigmoid(g);
    const hl_vec slope = hl_vmul(sig, hl_vadd(one, hl_vmul(g, hl_vsub(one, sig))));
    *dg = hl_vmul(hl_vmul(dy, u), slope);
    *du = hl_vmul(hl_vmul(dy, g), sig);
}

void HL_SIMD_FN(hl_vmath_swiglu_grad)(const hl_real *gate, const hl_real *up, const hl_real *dy,
                                      hl_real *dgate, hl_real *dup, size_t n, bool overwrite)
{
    size_t i = 0;
    hl_vec dg, du;
    for (; i + V <= n; i += V) {
        swiglu_grad(hl_vload(gate + i), hl_vload(up + i), hl_vload(dy + i), &dg, &du);
        hl_vstore(dgate + i, overwrite ? dg : hl_vadd(hl_vload(dgate + i), dg));
        hl_vstore(dup + i, overwrite ? du : hl_vadd(hl_vload(dup + i), du));
    }
    if (i < n) {
        const hl_vmask m = hl_vmask_first((int)(n - i));
        swiglu_grad(hl_vload_mask(gate + i, m), hl_vload_mask(up + i, m),
                    hl_vload_mask(dy + i, m), &dg, &du);
        hl_vstore_mask(dgate + i, overwrite ? dg : hl_vadd(hl_vload_mask(dgate + i, m), dg), m);
        hl_vstore_mask(dup + i, overwrite ? du : hl_vadd(hl_vload_mask(dup + i, m), du), m);
    }
}

/* GELU's tanh form as x·σ(2u) (see ops/vmath.h): 2u = 2√(2/π)·(x + κ·x³),
 * x³ as x·x·x and each step rounded, as PyTorch rounds u (times 2, exact). */
#define GELU_TANH_2BETA 1.59576912160573071176f /* 2·√(2/π) */
#define GELU_TANH_KAPPA 0.044715f
/* Past this |x| σ(2u) is exactly 0 or 1 (e^(-2u) overflows or vanishes
 * beside 1) and so the slope's second term is 0; x is clamped to it there,
 * where x·x could overflow and make it 0·inf (the clamp keeps NaN, as the
 * exp's does). */
#define GELU_TANH_FLAT 30.0f

HL_SIMD_INLINE hl_vec gelu_tanh_2u(hl_vec x)
{
    const hl_vec cube = hl_vmul(hl_vmul(x, x), x);
    return hl_vmul(hl_vset1(GELU_TANH_2BETA),
                   hl_vadd(x, hl_vmul(hl_vset1(GELU_TANH_KAPPA), cube)));
}

/* x/(1 + e^(-2u)): e^(-2u) overflows to inf for x below about -9.5, and the
 * quotient is then -0 (NaN at -inf, as PyTorch's -inf·0). */
HL_SIMD_INLINE hl_vec gelu_tanh(hl_vec x)
{
    return hl_vdiv(x, hl_vadd(hl_vset1(1), vexp(hl_vsub(hl_vzero(), gelu_tanh_2u(x)))));
}

/* σ(2u) + x·σ(2u)·(1 - σ(2u))·2u', 2u' = 2√(2/π)·(1 + 3κ·x²). */
HL_SIMD_INLINE hl_vec gelu_tanh_slope(hl_vec x)
{
    const hl_vec one = hl_vset1(1), s = sigmoid(gelu_tanh_2u(x));
    const hl_vec xc =
        hl_vmin(hl_vset1(GELU_TANH_FLAT), hl_vmax(hl_vset1(-GELU_TANH_FLAT), x));
    const hl_vec du = hl_vmul(hl_vset1(GELU_TANH_2BETA),
                              hl_vadd(one, hl_vmul(hl_vset1(3 * GELU_TANH_KAPPA),
                                                   hl_vmul(xc, xc))));
    return hl_vadd(s, hl_vmul(hl_vmul(xc, hl_vmul(s, hl_vsub(one, s))), du));
}

void HL_SIMD_FN(hl_vmath_gelu_tanh)(const hl_real *x, hl_real *y, size_t n)
{
    HL_ROW_MAP(x, y, n, gelu_tanh);
}

void HL_SIMD_FN(hl_vmath_gelu_tanh_grad)(const hl_real *x, const hl_real *dy, hl_real *dx,
                                         size_t n, bool overwrite)
{
    size_t i = 0;
    for (; i + V <= n; i += V) {
        const hl_vec d = hl_vmul(hl_vload(dy + i), gelu_tanh_slope(hl_vload(x + i)));
        hl_vstore(dx + i, overwrite ? d : hl_vadd(hl_vload(dx + i), d));
    }
    if (i < n) {
        const hl_vmask m = hl_vmask_first((int)(n - i));
        const hl_vec d =
            hl_vmul(hl_vload_mask(dy + i, m), gelu_tanh_slope(hl_vload_mask(x + i, m)));
        hl_vstore_mask(dx + i, overwrite ? d : hl_vadd(hl_vload_mask(dx + i, m), d), m);
    }
}

/* scale·(exp((x - a) - b) - onehot) on the V elements from i, the one-hot 1
 * at hot: subtracting the other lanes' 0 changes no bit. */
HL_SIMD_INLINE hl_vec xent_grad(hl_vec x, hl_vec va, hl_vec vb, hl_vec vscale, size_t i,
                                size_t hot)
{
    hl_vec p = vexp(hl_vsub(hl_vsub(x, va), vb));
    if (hot - i < (size_t)V) { /* wraps past V when hot < i */
        hl_real one_hot[V] = {0};
        one_hot[hot - i] = 1;
        p = hl_vsub(p, hl_vload(one_hot));
    }
    return hl_vmul(vscale, p);
}

void HL_SIMD_FN(hl_vmath_xent_grad)(const hl_real *x, hl_real a, hl_real b, hl_real scale,
                                    size_t hot, hl_real *y, size_t n, bool overwrite)
{
    const hl_vec va = hl_vset1(a), vb = hl_vset1(b), vscale = hl_vset1(scale);
    size_t i = 0;
    for (; i + V <= n; i += V) {
        const hl_vec d = xent_grad(hl_vload(x + i), va, vb, vscale, i, hot);
        hl_vstore(y + i, overwrite ? d : hl_vadd(hl_vload(y + i), d));
    }
    if (i < n) {
        const hl_vmask m = hl_vmask_first((int)(n - i));
        const hl_vec d = xent_grad(hl_vload_mask(x + i, m), va, vb, vscale, i, hot);
        hl_vstore_mask(y + i, overwrite ? d : hl_vadd(hl_vload_mask(y + i, m), d), m);
    }
}

/* ---- Logit soft-capping, cap·tanh(x/cap). With a = |u|: below TANH_SMALL
 * tanh's odd Taylor series to u⁹ (truncation below 1e-8 relative), else
 * sign(u)·(1 - e)/(1 + e) with e = e^(-2a) ≤ e^(-1/2), so 1 - e does not
 * cancel and nothing overflows: a few ulp either way. ±inf → ±1, NaN → NaN. */
#define TANH_SMALL 0.25f

HL_SIMD_INLINE hl_vec vtanh(hl_vec u)
{
    const hl_vec one = hl_vset1(1), a = hl_vabs(u), z = hl_vmul(u, u);
    hl_vec p = hl_vset1(62.0f / 2835);
    p = hl_vfma(p, z, hl_vset1(-17.0f / 315));
    p = hl_vfma(p, z, hl_vset1(2.0f / 15));
    p = hl_vfma(p, z, hl_vset1(-1.0f / 3));
    const hl_vec small = hl_vfma(hl_vmul(p, z), u, u);
    const hl_vec e = vexp(hl_vmul(hl_vset1(-2), a));
    const hl_vec large = hl_vcopysign(hl_vdiv(hl_vsub(one, e), hl_vadd(one, e)), u);
    return hl_vselect_lt(a, hl_vset1(TANH_SMALL), small, large);
}

void HL_SIMD_FN(hl_vmath_softcap)(const hl_real *x, hl_real cap, hl_real *y, size_t n)
{
    const hl_vec c = hl_vset1(cap);
#define SOFTCAP(v) hl_vmul(c, vtanh(hl_vdiv(v, c)))
    HL_ROW_MAP(x, y, n, SOFTCAP);
#undef SOFTCAP
}

/* scale·(exp((cap·t - a) - b) - onehot)·(1 - t²), t = tanh(x/cap): the
 * cross-entropy's gradient through the cap, cap·t rounded as the forward
 * rounds it. */
HL_SIMD_INLINE hl_vec softcap_xent_grad(hl_vec x, hl_vec c, hl_vec va, hl_vec vb, hl_vec vscale,
                                        size_t i, size_t hot)
{
    const hl_vec t = vtanh(hl_vdiv(x, c));
    const hl_vec g = xent_grad(hl_vmul(c, t), va, vb, vscale, i, hot);
    return hl_vmul(g, hl_vsub(hl_vset1(1), hl_vmul(t, t)));
}

void HL_SIMD_FN(hl_vmath_softcap_xent_grad)(const hl_real *x, hl_real cap, hl_real a, hl_real b,
                                            hl_real scale, size_t hot, hl_real *y, size_t n,
                                            bool overwrite)
{
    const hl_vec c = hl_vset1(cap), va = hl_vset1(a), vb = hl_vset1(b), vscale = hl_vset1(scale);
    size_t i = 0;
    for (; i + V <= n; i += V) {
        const hl_vec d = softcap_xent_grad(hl_vload(x + i), c, va, vb, vscale, i, hot);
        hl_vstore(y + i, overwrite ? d : hl_vadd(hl_vload(y + i), d));
    }
    if (i < n) {
        const hl_vmask m = hl_vmask_first((int)(n - i));
        const hl_vec d = softcap_xent_grad(hl_vload_mask(x + i, m), c, va, vb, vscale, i, hot);
        hl_vstore_mask(y + i, overwrite ? d : hl_vadd(hl_vload_mask(y + i, m), d), m);
    }
}

void HL_SIMD_FN(hl_vmath_add)(const hl_real *x, hl_real *y, size_t n)
{
    size_t i = 0;
    for (; i + V <= n; i += V)
        hl_vstore(y + i, hl_vadd(hl_vload(y + i), hl_vload(x + i)));
    if (i < n) {
        const hl_vmask m = hl_vmask_first((int)(n - i));
        hl_vstore_mask(y + i, hl_vadd(hl_vload_mask(y + i, m), hl_vload_mask(x + i, m)), m);
    }
}

#endif /* float */
