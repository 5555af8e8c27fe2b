/* Vectorised exp, erf and GELU row kernels (see ops/vmath.h). */
#include "ops/vmath.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- One vector layer per build: the kernels at the end are written once
 * against it. VL is the number of lanes; loads and stores of the first n < VL
 * lanes fill the rest with zeros and leave memory past them untouched.
 * VMAX(bound, x) and VMIN(bound, x) return x when either is NaN (the x86
 * rule for the second operand), so clamps keep NaN. */

#if defined(HL_REAL_DOUBLE)

/* The double build: one lane, libm. */
typedef double vec;
#define VL 1
#define VSET1(c) ((double)(c))
#define VLOAD(p) (*(p))
#define VSTORE(p, v) (*(p) = (v))
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VMUL(a, b) ((a) * (b))
#define VMAX(bound, x) ((bound) > (x) ? (bound) : (x))
static inline vec vload_n(const double *p, size_t n) { return n ? *p : 0; }
static inline void vstore_n(double *p, vec v, size_t n) { if (n) *p = v; }
static inline vec vkeep_n(vec v, size_t n) { return n ? v : 0; }
static inline int vhas_nan(vec v) { return v != v; }
static inline vec vexp(vec x) { return exp(x); }
static inline vec verf(vec x) { return erf(x); }

#else /* float */

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
#define VL 16
#define VSET1 _mm512_set1_ps
#define VLOAD _mm512_loadu_ps
#define VSTORE _mm512_storeu_ps
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMUL _mm512_mul_ps
#define VFMA _mm512_fmadd_ps
#define VMAX _mm512_max_ps
#define VMIN _mm512_min_ps
#define VABS _mm512_abs_ps
#define VROUND(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* p·2^n rounded once, to a denormal or inf when it must be. */
#define VSCALE2 _mm512_scalef_ps
static inline __mmask16 first(size_t n) { return (__mmask16)((1u << n) - 1); }
static inline vec vload_n(const float *p, size_t n) { return _mm512_maskz_loadu_ps(first(n), p); }
static inline void vstore_n(float *p, vec v, size_t n) { _mm512_mask_storeu_ps(p, first(n), v); }
static inline vec vkeep_n(vec v, size_t n) { return _mm512_maskz_mov_ps(first(n), v); }
static inline int vhas_nan(vec v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0; }
/* a < b ? x : y, lane by lane. */
static inline vec vselect_lt(vec a, vec b, vec x, vec y)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
}
/* mag (≥ 0) with the sign of s. */
static inline vec vcopysign(vec mag, vec s)
{
    const __m512i sign = _mm512_and_epi32(_mm512_castps_si512(s), _mm512_set1_epi32(INT32_MIN));
    return _mm512_castsi512_ps(_mm512_or_epi32(_mm512_castps_si512(mag), sign));
}

/* Sums of float lanes, kept in two vectors of doubles. */
typedef struct { __m512d lo, hi; } dsum;
static inline dsum dsum_zero(void) { return (dsum){_mm512_setzero_pd(), _mm512_setzero_pd()}; }
static inline void dsum_add(dsum *s, vec v)
{
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    s->lo = _mm512_add_pd(s->lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    s->hi = _mm512_add_pd(s->hi, _mm512_cvtps_pd(hi));
}
static inline void dsum_store(const dsum *s, double *lanes)
{
    _mm512_storeu_pd(lanes, s->lo);
    _mm512_storeu_pd(lanes + 8, s->hi);
}

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
#define VL 8
#define VSET1 _mm256_set1_ps
#define VLOAD _mm256_loadu_ps
#define VSTORE _mm256_storeu_ps
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMUL _mm256_mul_ps
#define VFMA _mm256_fmadd_ps
#define VMAX _mm256_max_ps
#define VMIN _mm256_min_ps
#define VABS(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)
#define VROUND(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
static inline __m256i first(size_t n)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane);
}
static inline vec vload_n(const float *p, size_t n) { return _mm256_maskload_ps(p, first(n)); }
static inline void vstore_n(float *p, vec v, size_t n) { _mm256_maskstore_ps(p, first(n), v); }
static inline vec vkeep_n(vec v, size_t n)
{
    return _mm256_and_ps(v, _mm256_castsi256_ps(first(n)));
}
static inline int vhas_nan(vec v) { return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)); }
static inline vec vselect_lt(vec a, vec b, vec x, vec y)
{
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
static inline vec vcopysign(vec mag, vec s)
{
    return _mm256_or_ps(mag, _mm256_and_ps(s, _mm256_set1_ps(-0.0f)));
}
/* 2^k for integers k in [-126, 127], as floats. */
static inline vec pow2i(__m256i k)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}
/* p·2^n for integral n in [-150, 128]: 2^n in two factors that are normal
 * floats, so p·2^(n/2) is exact and only the last product rounds. */
static inline vec VSCALE2(vec p, vec n)
{
    const __m256i k = _mm256_cvtps_epi32(n), k1 = _mm256_srai_epi32(k, 1);
    return VMUL(VMUL(p, pow2i(k1)), pow2i(_mm256_sub_epi32(k, k1)));
}

typedef struct { __m256d lo, hi; } dsum;
static inline dsum dsum_zero(void) { return (dsum){_mm256_setzero_pd(), _mm256_setzero_pd()}; }
static inline void dsum_add(dsum *s, vec v)
{
    s->lo = _mm256_add_pd(s->lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    s->hi = _mm256_add_pd(s->hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
static inline void dsum_store(const dsum *s, double *lanes)
{
    _mm256_storeu_pd(lanes, s->lo);
    _mm256_storeu_pd(lanes + 4, s->hi);
}

#else

/* Portable C, one float at a time. ISO C mode contracts nothing, so "FMA"
 * here is a product rounded and then a sum rounded. */
typedef float vec;
#define VL 1
#define VSET1(c) ((float)(c))
#define VLOAD(p) (*(p))
#define VSTORE(p, v) (*(p) = (v))
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VMUL(a, b) ((a) * (b))
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VMAX(bound, x) ((bound) > (x) ? (bound) : (x))
#define VMIN(bound, x) ((bound) < (x) ? (bound) : (x))
#define VABS fabsf
/* Round to nearest even by the 1.5·2^23 shift: exact for |x| < 2^22. */
#define VROUND(x) (((x) + 0x1.8p23f) - 0x1.8p23f)
static inline vec vload_n(const float *p, size_t n) { return n ? *p : 0; }
static inline void vstore_n(float *p, vec v, size_t n) { if (n) *p = v; }
static inline vec vkeep_n(vec v, size_t n) { return n ? v : 0; }
static inline int vhas_nan(vec v) { return v != v; }
static inline vec vselect_lt(vec a, vec b, vec x, vec y) { return a < b ? x : y; }
static inline vec vcopysign(vec mag, vec s) { return copysignf(mag, s); }
static inline float pow2i(int32_t k)
{
    const uint32_t bits = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
/* As the AVX2 version; NaN is passed through before it meets an int cast. */
static inline vec VSCALE2(vec p, vec n)
{
    if (n != n)
        return n;
    const int32_t k = (int32_t)n, k1 = k / 2;
    return p * pow2i(k1) * pow2i(k - k1);
}

#endif

/* ---- exp: e^x = 2^n·e^r with n = round(x/ln 2) and |r| ≤ ln2/2, e^r by its
 * Taylor polynomial of degree 7 (truncation error below 6e-9 relative).
 * ln 2 = LN2_HI + LN2_LO, LN2_HI with 15 significant bits, so n·LN2_HI is
 * exact for |n| < 512 and so is x - n·LN2_HI (Cody and Waite). Inputs are
 * clamped to [-104, 89] first: e^-104 rounds to 0 and e^89 overflows, so
 * the clamp changes no result, and it keeps n in [-150, 128]. */
#define EXP_LO -104.0f
#define EXP_HI 89.0f
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693145751953125f
#define LN2_LO 1.42860682030941723e-6f

static inline vec vexp(vec x)
{
    x = VMIN(VSET1(EXP_HI), VMAX(VSET1(EXP_LO), x));
    const vec n = VROUND(VMUL(x, VSET1(LOG2E)));
    vec r = VFMA(n, VSET1(-LN2_HI), x);
    r = VFMA(n, VSET1(-LN2_LO), r);
    vec p = VSET1(1.0f / 5040);
    p = VFMA(p, r, VSET1(1.0f / 720));
    p = VFMA(p, r, VSET1(1.0f / 120));
    p = VFMA(p, r, VSET1(1.0f / 24));
    p = VFMA(p, r, VSET1(1.0f / 6));
    p = VFMA(p, r, VSET1(0.5f));
    p = VFMA(p, r, VSET1(1.0f));
    p = VFMA(p, r, VSET1(1.0f));
    return VSCALE2(p, n);
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
static inline vec horner(const float *c, int n, vec t)
{
    vec p = VSET1(c[0]);
    for (int i = 1; i < n; i++)
        p = VFMA(p, t, VSET1(c[i]));
    return p;
}

static inline vec verf(vec x)
{
    const vec a = VMIN(VSET1(4.0f), VABS(x));
    const int ng = (int)(sizeof ERF_G / sizeof ERF_G[0]);
    const int ne = (int)(sizeof ERF_E / sizeof ERF_E[0]);
    const vec small = VMUL(a, horner(ERF_G, ng, VFMA(a, a, VSET1(-2.0f))));
    const vec large = VSUB(VSET1(1.0f), horner(ERF_E, ne, VSUB(a, VSET1(3.0f))));
    return vcopysign(vselect_lt(a, VSET1(2.0f), small, large), x);
}

#endif /* float */

#if VL == 1
typedef struct { double s; } dsum;
static inline dsum dsum_zero(void) { return (dsum){0}; }
static inline void dsum_add(dsum *s, vec v) { s->s += (double)v; }
static inline void dsum_store(const dsum *s, double *lanes) { lanes[0] = s->s; }
#endif

/* ---- The row kernels. A row is whole vectors, then a partial one whose
 * missing lanes are zeros that are never stored or summed. */

/* The sum of the lanes, pairwise in a fixed tree. */
static double dsum_total(const dsum *s)
{
    double lanes[VL];
    dsum_store(s, lanes);
    for (int w = VL / 2; w >= 1; w /= 2)
        for (int i = 0; i < w; i++)
            lanes[i] += lanes[i + w];
    return lanes[0];
}

hl_real hl_vmath_max(const hl_real *x, size_t n)
{
    hl_real best = -INFINITY;
    size_t i = 0;
    int any_nan = 0;
    if (n >= (size_t)VL) {
        vec m = VLOAD(x);
        for (; i + VL <= n; i += VL) {
            const vec v = VLOAD(x + i);
            any_nan |= vhas_nan(v);
            m = VMAX(m, v);
        }
        hl_real lanes[VL];
        VSTORE(lanes, m);
        for (int j = 0; j < VL; j++)
            best = lanes[j] > best ? lanes[j] : best;
    }
    for (; i < n; i++) {
        any_nan |= x[i] != x[i];
        best = x[i] > best ? x[i] : best;
    }
    return any_nan ? (hl_real)NAN : best;
}

double hl_vmath_exp_sum(const hl_real *x, hl_real shift, hl_real *y, size_t n)
{
    const vec s = VSET1(shift);
    dsum sum = dsum_zero();
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        const vec e = vexp(VSUB(VLOAD(x + i), s));
        if (y)
            VSTORE(y + i, e);
        dsum_add(&sum, e);
    }
    if (i < n) {
        const vec e = vkeep_n(vexp(VSUB(vload_n(x + i, n - i), s)), n - i);
        if (y)
            vstore_n(y + i, e, n - i);
        dsum_add(&sum, e);
    }
    return dsum_total(&sum);
}

void hl_vmath_exp(const hl_real *x, hl_real a, hl_real b, hl_real *y, size_t n)
{
    const vec va = VSET1(a), vb = VSET1(b);
    size_t i = 0;
    for (; i + VL <= n; i += VL)
        VSTORE(y + i, vexp(VSUB(VSUB(VLOAD(x + i), va), vb)));
    if (i < n)
        vstore_n(y + i, vexp(VSUB(VSUB(vload_n(x + i, n - i), va), vb)), n - i);
}

void hl_vmath_erf(const hl_real *x, hl_real *y, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL)
        VSTORE(y + i, verf(VLOAD(x + i)));
    if (i < n)
        vstore_n(y + i, verf(vload_n(x + i, n - i)), n - i);
}

#define GELU_SQRT1_2 0.70710678118654752440      /* 1/√2 */
#define GELU_INV_SQRT_2PI 0.39894228040143267794 /* 1/√(2π) */

/* Φ(x) = 0.5·(1 + erf(x/√2)), as PyTorch's CPU kernel. */
static inline vec normal_cdf(vec x)
{
    return VMUL(VSET1(0.5), VADD(VSET1(1), verf(VMUL(x, VSET1(GELU_SQRT1_2)))));
}

static inline vec gelu(vec x) { return VMUL(x, normal_cdf(x)); }

/* d/dx x·Φ(x) = Φ(x) + x·φ(x), φ(x) = e^(-x²/2)/√(2π). */
static inline vec gelu_slope(vec x)
{
    const vec pdf = VMUL(VSET1(GELU_INV_SQRT_2PI), vexp(VMUL(VMUL(VSET1(-0.5), x), x)));
    return VADD(normal_cdf(x), VMUL(x, pdf));
}

void hl_vmath_gelu(const hl_real *x, hl_real *y, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL)
        VSTORE(y + i, gelu(VLOAD(x + i)));
    if (i < n)
        vstore_n(y + i, gelu(vload_n(x + i, n - i)), n - i);
}

void hl_vmath_gelu_grad(const hl_real *x, const hl_real *dy, hl_real *dx, size_t n,
                        bool overwrite)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        const vec d = VMUL(VLOAD(dy + i), gelu_slope(VLOAD(x + i)));
        VSTORE(dx + i, overwrite ? d : VADD(VLOAD(dx + i), d));
    }
    if (i < n) {
        const size_t m = n - i;
        const vec d = VMUL(vload_n(dy + i, m), gelu_slope(vload_n(x + i, m)));
        vstore_n(dx + i, overwrite ? d : VADD(vload_n(dx + i, m), d), m);
    }
}
