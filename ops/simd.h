/*
 * simd.h: one vector layer under every kernel set (internal to ops/kernels/).
 *
 * Each kernel source in ops/kernels/ is compiled once per instruction set,
 * with that set's -m flags and one of these defined (the Makefile does it):
 *
 *     HL_SIMD_AVX512    AVX-512F vectors: 512 bits, 32 registers, lane masks
 *     HL_SIMD_AVX2      AVX2 + FMA vectors: 256 bits, 16 registers
 *     HL_SIMD_PORTABLE  GCC vector extensions of 128 bits that the compiler
 *                       maps to SSE2, NEON or whatever the target has
 *
 * and writes its code once against the names below, for hl_real (float, or
 * double in the double build):
 *
 *     hl_vec acc = hl_vzero();
 *     for (int k = 0; k < n; k += HL_VL)
 *         acc = hl_vfma(hl_vload(a + k), hl_vset1(2), acc);   // acc + a·2, one rounding
 *
 * Every operation rounds as IEEE 754 says lane by lane, so a kernel gives the
 * same bits on every set as long as its lanes do the same work: reductions
 * keep HL_SUM_LANES partial sums whatever the width, products are one FMA
 * chain per element. hl_vfma is one rounding on AVX-512, AVX2 and AArch64;
 * the portable set on a target without FMA (plain x86-64) rounds the product
 * and the sum separately, and only there do results differ.
 *
 * The register budget of each set is stated once, here, and the kernels'
 * tile shapes are derived from it (HL_GEMM_MR, HL_TILE_ROWS, ...).
 */
#ifndef HL_OPS_SIMD_H
#define HL_OPS_SIMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/real.h"

/* The set's name as a suffix: hl_tile_gemm_avx2. */
#define HL_SIMD_CAT2(a, b) a##_##b
#define HL_SIMD_CAT(a, b) HL_SIMD_CAT2(a, b)
#define HL_SIMD_FN(name) HL_SIMD_CAT(name, HL_SIMD_SUFFIX)

/* Partial sums of every reduction, the same on every set. */
#define HL_SUM_LANES 16

/* The sum of HL_SUM_LANES partial sums, pairwise in a fixed tree (lane i
 * plus lane i + w, w = 8, 4, 2, 1): the one order every set's reductions end
 * in. hl_dsum_total below walks the same tree in registers. */
static inline double hl_sum_lanes_total(const double lanes[HL_SUM_LANES])
{
    double t[HL_SUM_LANES];
    memcpy(t, lanes, sizeof t);
    for (int w = HL_SUM_LANES / 2; w >= 1; w /= 2)
        for (int i = 0; i < w; i++)
            t[i] += t[i + w];
    return t[0];
}

#define HL_SIMD_INLINE static inline __attribute__((always_inline))

#if defined(HL_SIMD_AVX512)
/* ================================================================ AVX-512 */
#if !defined(__AVX512F__) || !defined(__FMA__)
#error "HL_SIMD_AVX512 needs -mavx512f -mfma"
#endif
#include <immintrin.h>
#define HL_SIMD_SUFFIX avx512
#define HL_SIMD_REGS 32
#define HL_SIMD_HAS_FMA 1
#ifdef HL_REAL_DOUBLE
typedef __m512d hl_vec;
typedef __mmask8 hl_vmask;
#define HL_VL 8
HL_SIMD_INLINE hl_vec hl_vzero(void) { return _mm512_setzero_pd(); }
HL_SIMD_INLINE hl_vec hl_vset1(hl_real x) { return _mm512_set1_pd(x); }
HL_SIMD_INLINE hl_vec hl_vload(const hl_real *p) { return _mm512_loadu_pd(p); }
HL_SIMD_INLINE void hl_vstore(hl_real *p, hl_vec v) { _mm512_storeu_pd(p, v); }
HL_SIMD_INLINE hl_vec hl_vload_mask(const hl_real *p, hl_vmask m) { return _mm512_maskz_loadu_pd(m, p); }
HL_SIMD_INLINE void hl_vstore_mask(hl_real *p, hl_vec v, hl_vmask m) { _mm512_mask_storeu_pd(p, m, v); }
HL_SIMD_INLINE hl_vec hl_vadd(hl_vec a, hl_vec b) { return _mm512_add_pd(a, b); }
HL_SIMD_INLINE hl_vec hl_vsub(hl_vec a, hl_vec b) { return _mm512_sub_pd(a, b); }
HL_SIMD_INLINE hl_vec hl_vmul(hl_vec a, hl_vec b) { return _mm512_mul_pd(a, b); }
HL_SIMD_INLINE hl_vec hl_vdiv(hl_vec a, hl_vec b) { return _mm512_div_pd(a, b); }
HL_SIMD_INLINE hl_vec hl_vsqrt(hl_vec a) { return _mm512_sqrt_pd(a); }
HL_SIMD_INLINE hl_vec hl_vfma(hl_vec a, hl_vec b, hl_vec c) { return _mm512_fmadd_pd(a, b, c); }
HL_SIMD_INLINE hl_vec hl_vmax(hl_vec a, hl_vec b) { return _mm512_max_pd(a, b); }
#else
typedef __m512 hl_vec;
typedef __mmask16 hl_vmask;
#define HL_VL 16
HL_SIMD_INLINE hl_vec hl_vzero(void) { return _mm512_setzero_ps(); }
HL_SIMD_INLINE hl_vec hl_vset1(hl_real x) { return _mm512_set1_ps(x); }
HL_SIMD_INLINE hl_vec hl_vload(const hl_real *p) { return _mm512_loadu_ps(p); }
HL_SIMD_INLINE void hl_vstore(hl_real *p, hl_vec v) { _mm512_storeu_ps(p, v); }
HL_SIMD_INLINE hl_vec hl_vload_mask(const hl_real *p, hl_vmask m) { return _mm512_maskz_loadu_ps(m, p); }
HL_SIMD_INLINE void hl_vstore_mask(hl_real *p, hl_vec v, hl_vmask m) { _mm512_mask_storeu_ps(p, m, v); }
HL_SIMD_INLINE hl_vec hl_vadd(hl_vec a, hl_vec b) { return _mm512_add_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vsub(hl_vec a, hl_vec b) { return _mm512_sub_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vmul(hl_vec a, hl_vec b) { return _mm512_mul_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vdiv(hl_vec a, hl_vec b) { return _mm512_div_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vsqrt(hl_vec a) { return _mm512_sqrt_ps(a); }
HL_SIMD_INLINE hl_vec hl_vfma(hl_vec a, hl_vec b, hl_vec c) { return _mm512_fmadd_ps(a, b, c); }
HL_SIMD_INLINE hl_vec hl_vmax(hl_vec a, hl_vec b) { return _mm512_max_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vmin(hl_vec a, hl_vec b) { return _mm512_min_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vabs(hl_vec a) { return _mm512_abs_ps(a); }
HL_SIMD_INLINE hl_vec hl_vround(hl_vec a)
{
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* p·2^n for integral n in [-150, 128], rounded once. */
HL_SIMD_INLINE hl_vec hl_vscale2(hl_vec p, hl_vec n) { return _mm512_scalef_ps(p, n); }
HL_SIMD_INLINE hl_vec hl_vselect_lt(hl_vec a, hl_vec b, hl_vec x, hl_vec y)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
}
HL_SIMD_INLINE int hl_vall_lt(hl_vec a, hl_vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) == 0xFFFF; }
HL_SIMD_INLINE int hl_vhas_nan(hl_vec v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0; }
HL_SIMD_INLINE hl_vec hl_vcopysign(hl_vec mag, hl_vec s)
{
    const __m512i sign = _mm512_and_epi32(_mm512_castps_si512(s), _mm512_set1_epi32(INT32_MIN));
    return _mm512_castsi512_ps(_mm512_or_epi32(_mm512_castps_si512(mag), sign));
}
/* HL_SUM_LANES double partial sums of float lanes. */
typedef struct { __m512d d[2]; } hl_dsum;
HL_SIMD_INLINE hl_dsum hl_dsum_zero(void) { return (hl_dsum){{_mm512_setzero_pd(), _mm512_setzero_pd()}}; }
/* Adds v's lanes to partials part·HL_VL.. */
HL_SIMD_INLINE void hl_dsum_add(hl_dsum *s, int part, hl_vec v)
{
    (void)part;
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    s->d[0] = _mm512_add_pd(s->d[0], _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    s->d[1] = _mm512_add_pd(s->d[1], _mm512_cvtps_pd(hi));
}
/* hl_sum_lanes_total's tree without a trip through memory: lanes 0-7 plus
 * 8-15, then the halves of that, and so on. */
HL_SIMD_INLINE double hl_dsum_total(const hl_dsum *s)
{
    const __m512d t8 = _mm512_add_pd(s->d[0], s->d[1]);
    const __m256d t4 = _mm256_add_pd(_mm512_castpd512_pd256(t8), _mm512_extractf64x4_pd(t8, 1));
    const __m128d t2 = _mm_add_pd(_mm256_castpd256_pd128(t4), _mm256_extractf128_pd(t4, 1));
    return _mm_cvtsd_f64(_mm_add_sd(t2, _mm_unpackhi_pd(t2, t2)));
}
#endif
/* The first n lanes (all when n ≥ HL_VL). */
HL_SIMD_INLINE hl_vmask hl_vmask_first(int n)
{
    return n >= HL_VL ? (hl_vmask)-1 : n <= 0 ? 0 : (hl_vmask)((1u << n) - 1);
}

#elif defined(HL_SIMD_AVX2)
/* =================================================================== AVX2 */
#if !defined(__AVX2__) || !defined(__FMA__)
#error "HL_SIMD_AVX2 needs -mavx2 -mfma"
#endif
#include <immintrin.h>
#define HL_SIMD_SUFFIX avx2
#define HL_SIMD_REGS 16
#define HL_SIMD_HAS_FMA 1
typedef __m256i hl_vmask;
#ifdef HL_REAL_DOUBLE
typedef __m256d hl_vec;
#define HL_VL 4
HL_SIMD_INLINE hl_vec hl_vzero(void) { return _mm256_setzero_pd(); }
HL_SIMD_INLINE hl_vec hl_vset1(hl_real x) { return _mm256_set1_pd(x); }
HL_SIMD_INLINE hl_vec hl_vload(const hl_real *p) { return _mm256_loadu_pd(p); }
HL_SIMD_INLINE void hl_vstore(hl_real *p, hl_vec v) { _mm256_storeu_pd(p, v); }
HL_SIMD_INLINE hl_vmask hl_vmask_first(int n)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}
HL_SIMD_INLINE hl_vec hl_vload_mask(const hl_real *p, hl_vmask m) { return _mm256_maskload_pd(p, m); }
HL_SIMD_INLINE void hl_vstore_mask(hl_real *p, hl_vec v, hl_vmask m) { _mm256_maskstore_pd(p, m, v); }
HL_SIMD_INLINE hl_vec hl_vadd(hl_vec a, hl_vec b) { return _mm256_add_pd(a, b); }
HL_SIMD_INLINE hl_vec hl_vsub(hl_vec a, hl_vec b) { return _mm256_sub_pd(a, b); }
HL_SIMD_INLINE hl_vec hl_vmul(hl_vec a, hl_vec b) { return _mm256_mul_pd(a, b); }
HL_SIMD_INLINE hl_vec hl_vdiv(hl_vec a, hl_vec b) { return _mm256_div_pd(a, b); }
HL_SIMD_INLINE hl_vec hl_vsqrt(hl_vec a) { return _mm256_sqrt_pd(a); }
HL_SIMD_INLINE hl_vec hl_vfma(hl_vec a, hl_vec b, hl_vec c) { return _mm256_fmadd_pd(a, b, c); }
HL_SIMD_INLINE hl_vec hl_vmax(hl_vec a, hl_vec b) { return _mm256_max_pd(a, b); }
#else
typedef __m256 hl_vec;
#define HL_VL 8
HL_SIMD_INLINE hl_vec hl_vzero(void) { return _mm256_setzero_ps(); }
HL_SIMD_INLINE hl_vec hl_vset1(hl_real x) { return _mm256_set1_ps(x); }
HL_SIMD_INLINE hl_vec hl_vload(const hl_real *p) { return _mm256_loadu_ps(p); }
HL_SIMD_INLINE void hl_vstore(hl_real *p, hl_vec v) { _mm256_storeu_ps(p, v); }
HL_SIMD_INLINE hl_vmask hl_vmask_first(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
HL_SIMD_INLINE hl_vec hl_vload_mask(const hl_real *p, hl_vmask m) { return _mm256_maskload_ps(p, m); }
HL_SIMD_INLINE void hl_vstore_mask(hl_real *p, hl_vec v, hl_vmask m) { _mm256_maskstore_ps(p, m, v); }
HL_SIMD_INLINE hl_vec hl_vadd(hl_vec a, hl_vec b) { return _mm256_add_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vsub(hl_vec a, hl_vec b) { return _mm256_sub_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vmul(hl_vec a, hl_vec b) { return _mm256_mul_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vdiv(hl_vec a, hl_vec b) { return _mm256_div_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vsqrt(hl_vec a) { return _mm256_sqrt_ps(a); }
HL_SIMD_INLINE hl_vec hl_vfma(hl_vec a, hl_vec b, hl_vec c) { return _mm256_fmadd_ps(a, b, c); }
HL_SIMD_INLINE hl_vec hl_vmax(hl_vec a, hl_vec b) { return _mm256_max_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vmin(hl_vec a, hl_vec b) { return _mm256_min_ps(a, b); }
HL_SIMD_INLINE hl_vec hl_vabs(hl_vec a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
HL_SIMD_INLINE hl_vec hl_vround(hl_vec a)
{
    return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* 2^k for integers k in [-126, 127]. */
HL_SIMD_INLINE hl_vec hl_pow2i(__m256i k)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}
/* p·2^n for integral n in [-150, 128]: 2^n in two normal factors, so
 * p·2^(n/2) is exact and only the last product rounds, as AVX-512's scalef. */
HL_SIMD_INLINE hl_vec hl_vscale2(hl_vec p, hl_vec n)
{
    const __m256i k = _mm256_cvtps_epi32(n), k1 = _mm256_srai_epi32(k, 1);
    return hl_vmul(hl_vmul(p, hl_pow2i(k1)), hl_pow2i(_mm256_sub_epi32(k, k1)));
}
HL_SIMD_INLINE hl_vec hl_vselect_lt(hl_vec a, hl_vec b, hl_vec x, hl_vec y)
{
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
HL_SIMD_INLINE int hl_vall_lt(hl_vec a, hl_vec b) { return _mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ)) == 0xFF; }
HL_SIMD_INLINE int hl_vhas_nan(hl_vec v) { return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)); }
HL_SIMD_INLINE hl_vec hl_vcopysign(hl_vec mag, hl_vec s)
{
    return _mm256_or_ps(mag, _mm256_and_ps(s, _mm256_set1_ps(-0.0f)));
}
typedef struct { __m256d d[4]; } hl_dsum;
HL_SIMD_INLINE hl_dsum hl_dsum_zero(void)
{
    const __m256d z = _mm256_setzero_pd();
    return (hl_dsum){{z, z, z, z}};
}
HL_SIMD_INLINE void hl_dsum_add(hl_dsum *s, int part, hl_vec v)
{
    s->d[2 * part] = _mm256_add_pd(s->d[2 * part], _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    s->d[2 * part + 1] =
        _mm256_add_pd(s->d[2 * part + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
/* hl_sum_lanes_total's tree in registers: d[0..3] hold lanes 0-3, 4-7, 8-11
 * and 12-15, so its first step is d[0] + d[2] and d[1] + d[3]. */
HL_SIMD_INLINE double hl_dsum_total(const hl_dsum *s)
{
    const __m256d t4 = _mm256_add_pd(_mm256_add_pd(s->d[0], s->d[2]),
                                     _mm256_add_pd(s->d[1], s->d[3]));
    const __m128d t2 = _mm_add_pd(_mm256_castpd256_pd128(t4), _mm256_extractf128_pd(t4, 1));
    return _mm_cvtsd_f64(_mm_add_sd(t2, _mm_unpackhi_pd(t2, t2)));
}
#endif

#elif defined(HL_SIMD_PORTABLE)
#include <math.h> /* HL_SQRT, lane by lane */
/* =============================================================== portable */
/* 128-bit vectors in GCC's vector extension (also Clang's): SSE2 on any
 * x86-64, NEON on AArch64. FMA is the hardware's where the target has it
 * (AArch64 always does), else a rounded product and a rounded sum. */
#if defined(__aarch64__)
#include <arm_neon.h>
#endif
#define HL_SIMD_SUFFIX portable
#define HL_SIMD_REGS 16
#if defined(__aarch64__) || defined(__FMA__)
#define HL_SIMD_HAS_FMA 1
#else
#define HL_SIMD_HAS_FMA 0
#endif
#define HL_VL (16 / (int)sizeof(hl_real))
typedef hl_real hl_vec __attribute__((vector_size(16)));
#ifdef HL_REAL_DOUBLE
typedef int64_t hl_vint __attribute__((vector_size(16)));
#else
typedef int32_t hl_vint __attribute__((vector_size(16)));
#endif
typedef int hl_vmask; /* the number of leading lanes */
HL_SIMD_INLINE hl_vec hl_vzero(void) { return (hl_vec){0}; }
HL_SIMD_INLINE hl_vec hl_vset1(hl_real x) { return (hl_vec){0} + x; }
HL_SIMD_INLINE hl_vec hl_vload(const hl_real *p)
{
    hl_vec v;
    memcpy(&v, p, sizeof v);
    return v;
}
HL_SIMD_INLINE void hl_vstore(hl_real *p, hl_vec v) { memcpy(p, &v, sizeof v); }
HL_SIMD_INLINE hl_vmask hl_vmask_first(int n) { return n < 0 ? 0 : n > HL_VL ? HL_VL : n; }
HL_SIMD_INLINE hl_vec hl_vload_mask(const hl_real *p, hl_vmask m)
{
    hl_vec v = {0};
    memcpy(&v, p, (size_t)m * sizeof(hl_real));
    return v;
}
HL_SIMD_INLINE void hl_vstore_mask(hl_real *p, hl_vec v, hl_vmask m)
{
    memcpy(p, &v, (size_t)m * sizeof(hl_real));
}
HL_SIMD_INLINE hl_vec hl_vadd(hl_vec a, hl_vec b) { return a + b; }
HL_SIMD_INLINE hl_vec hl_vsub(hl_vec a, hl_vec b) { return a - b; }
HL_SIMD_INLINE hl_vec hl_vmul(hl_vec a, hl_vec b) { return a * b; }
HL_SIMD_INLINE hl_vec hl_vdiv(hl_vec a, hl_vec b) { return a / b; }
/* Lane by lane: a square root is correctly rounded everywhere, so the same
 * bits as the x86 sets. */
HL_SIMD_INLINE hl_vec hl_vsqrt(hl_vec a)
{
    for (int i = 0; i < HL_VL; i++)
        a[i] = HL_SQRT(a[i]);
    return a;
}
HL_SIMD_INLINE hl_vec hl_vfma(hl_vec a, hl_vec b, hl_vec c)
{
#if defined(__aarch64__) && defined(HL_REAL_DOUBLE)
    return vfmaq_f64(c, a, b);
#elif defined(__aarch64__)
    return vfmaq_f32(c, a, b);
#else
    return a * b + c; /* -ffp-contract=off: two roundings */
#endif
}
/* mask ? x : y, mask lanes all ones or all zeros. */
HL_SIMD_INLINE hl_vec hl_vblend(hl_vint mask, hl_vec x, hl_vec y)
{
    return (hl_vec)(((hl_vint)x & mask) | ((hl_vint)y & ~mask));
}
/* a > b ? a : b lane by lane: b when either is NaN, as x86's max. */
HL_SIMD_INLINE hl_vec hl_vmax(hl_vec a, hl_vec b) { return hl_vblend(a > b, a, b); }
#ifndef HL_REAL_DOUBLE
HL_SIMD_INLINE hl_vec hl_vmin(hl_vec a, hl_vec b) { return hl_vblend(a < b, a, b); }
HL_SIMD_INLINE hl_vec hl_vabs(hl_vec a) { return (hl_vec)((hl_vint)a & INT32_MAX); }
/* Nearest, ties to even, by the 1.5·2^23 shift: exact for |a| < 2^22. */
HL_SIMD_INLINE hl_vec hl_vround(hl_vec a) { return (a + 0x1.8p23f) - 0x1.8p23f; }
HL_SIMD_INLINE hl_vec hl_pow2i(hl_vint k) { return (hl_vec)((k + 127) << 23); }
/* As AVX2's; a NaN n becomes 0 before the integer conversion (p is NaN then). */
HL_SIMD_INLINE hl_vec hl_vscale2(hl_vec p, hl_vec n)
{
    const hl_vint k = __builtin_convertvector(hl_vblend(n == n, n, hl_vzero()), hl_vint);
    const hl_vint k1 = k >> 1;
    return p * hl_pow2i(k1) * hl_pow2i(k - k1);
}
HL_SIMD_INLINE hl_vec hl_vselect_lt(hl_vec a, hl_vec b, hl_vec x, hl_vec y)
{
    return hl_vblend(a < b, x, y);
}
HL_SIMD_INLINE int hl_vall_lt(hl_vec a, hl_vec b)
{
    const hl_vint lt = a < b;
    return (lt[0] & lt[1] & lt[2] & lt[3]) != 0;
}
HL_SIMD_INLINE int hl_vhas_nan(hl_vec v)
{
    const hl_vint unordered = v != v;
    return (unordered[0] | unordered[1] | unordered[2] | unordered[3]) != 0;
}
HL_SIMD_INLINE hl_vec hl_vcopysign(hl_vec mag, hl_vec s)
{
    return (hl_vec)((hl_vint)mag | ((hl_vint)s & INT32_MIN));
}
typedef struct { double d[HL_SUM_LANES]; } hl_dsum;
HL_SIMD_INLINE hl_dsum hl_dsum_zero(void) { return (hl_dsum){{0}}; }
HL_SIMD_INLINE void hl_dsum_add(hl_dsum *s, int part, hl_vec v)
{
    for (int i = 0; i < HL_VL; i++)
        s->d[part * HL_VL + i] += (double)v[i];
}
HL_SIMD_INLINE double hl_dsum_total(const hl_dsum *s) { return hl_sum_lanes_total(s->d); }
#endif

#else
#error "define one of HL_SIMD_AVX512, HL_SIMD_AVX2, HL_SIMD_PORTABLE"
#endif

/* Lanes zeroed past the first n (a partial vector that must not count). */
HL_SIMD_INLINE hl_vec hl_vkeep_n(hl_vec v, int n)
{
    _Alignas(64) hl_real lanes[HL_VL];
    hl_vstore(lanes, v);
    return hl_vload_mask(lanes, hl_vmask_first(n));
}

/* y[i] = f(x[i]) over a row of n, f a function or macro of one vector:
 * whole vectors, then the masked tail. */
#define HL_ROW_MAP(x, y, n, f)                                                                    \
    do {                                                                                          \
        size_t i_ = 0;                                                                            \
        for (; i_ + HL_VL <= (n); i_ += HL_VL)                                                    \
            hl_vstore((y) + i_, f(hl_vload((x) + i_)));                                           \
        if (i_ < (n)) {                                                                           \
            const hl_vmask m_ = hl_vmask_first((int)((n) - i_));                                  \
            hl_vstore_mask((y) + i_, f(hl_vload_mask((x) + i_, m_)), m_);                         \
        }                                                                                         \
    } while (0)

/* ---- Tile shapes, from the register budget above. */
#if HL_SIMD_REGS >= 32
/* GEMM micro-tile: 14×2 accumulators + 2 vectors of B + 1 broadcast of A. */
#define HL_GEMM_MR 14
/* Tile products: 8×2 accumulators; the rest hold B and the broadcasts. */
#define HL_TILE_ROWS 8
#elif HL_SIMD_HAS_FMA
/* 16 registers: 6×2 accumulators + 2 of B + 1 broadcast. */
#define HL_GEMM_MR 6
#define HL_TILE_ROWS 6
#else
/* 16 registers without FMA: each product needs a temporary as well. */
#define HL_GEMM_MR 4
#define HL_TILE_ROWS 4
#endif
/* Vectors per row of either tile. */
#define HL_GEMM_NV 2
#define HL_TILE_NV 2

#endif
