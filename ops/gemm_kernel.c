/* The GEMM micro-kernels (see ops/gemm_kernel.h). */
#include "ops/gemm_kernel.h"

#include <stdint.h>

#if defined(HL_GEMM_VLEN)
#include <immintrin.h>

/* One name per vector operation, for float or double, 512 or 256 bits. */
#if defined(__AVX512F__) && defined(HL_REAL_DOUBLE)
typedef __m512d vec;
#define VZERO _mm512_setzero_pd
#define VSET1 _mm512_set1_pd
#define VLOAD _mm512_loadu_pd
#define VSTORE _mm512_storeu_pd
#define VMUL _mm512_mul_pd
#define VFMA _mm512_fmadd_pd
#elif defined(__AVX512F__)
typedef __m512 vec;
#define VZERO _mm512_setzero_ps
#define VSET1 _mm512_set1_ps
#define VLOAD _mm512_loadu_ps
#define VSTORE _mm512_storeu_ps
#define VMUL _mm512_mul_ps
#define VFMA _mm512_fmadd_ps
#elif defined(HL_REAL_DOUBLE)
typedef __m256d vec;
#define VZERO _mm256_setzero_pd
#define VSET1 _mm256_set1_pd
#define VLOAD _mm256_loadu_pd
#define VSTORE _mm256_storeu_pd
#define VMUL _mm256_mul_pd
#define VFMA _mm256_fmadd_pd
#else
typedef __m256 vec;
#define VZERO _mm256_setzero_ps
#define VSET1 _mm256_set1_ps
#define VLOAD _mm256_loadu_ps
#define VSTORE _mm256_storeu_ps
#define VMUL _mm256_mul_ps
#define VFMA _mm256_fmadd_ps
#endif

enum { V = HL_GEMM_VLEN };

/* The kernel for an mr×(nv·V) tile. Inlined into one function per shape, so
 * the loops over r and v have constant bounds and are unrolled, and the
 * accumulator array is only names for registers. Per k: nv vector loads of
 * b, one broadcast of a per row, mr·nv fused multiply-adds. */
static inline __attribute__((always_inline)) void
micro(int mr, int nv, int kc, const hl_real *restrict a, size_t a_row, size_t a_step,
      const hl_real *restrict b, size_t b_step, hl_real beta, hl_real *restrict c, size_t ldc)
{
    vec acc[HL_GEMM_MAX_MR][2];
    const vec vb = VSET1(beta);
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            acc[r][v] = beta == 0 ? VZERO() : VMUL(vb, VLOAD(c + r * ldc + v * V));
    for (int k = 0; k < kc; k++) {
        vec bk[2];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            bk[v] = VLOAD(b + v * V);
#pragma GCC unroll 16
        for (int r = 0; r < mr; r++) {
            const vec ar = VSET1(a[r * a_row]);
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++)
                acc[r][v] = VFMA(ar, bk[v], acc[r][v]);
        }
        a += a_step;
        b += b_step;
    }
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            VSTORE(c + r * ldc + v * V, acc[r][v]);
}

#define KERNEL(mr, nv)                                                                           \
    static void micro_##mr##x##nv(int kc, const hl_real *restrict a, size_t a_step,             \
                                  const hl_real *restrict b, size_t b_step, hl_real beta,        \
                                  hl_real *restrict c, size_t ldc)                               \
    {                                                                                            \
        micro(mr, nv, kc, a, 1, a_step, b, b_step, beta, c, ldc);                                \
    }

/* The same reading A's rows in place (a_step 1, rows lda apart): only for
 * kernels short enough that the row addresses fit in registers. */
#define KERNEL_ROWS(mr, nv)                                                                      \
    static void micro_rows_##mr##x##nv(int kc, const hl_real *restrict a, size_t lda,           \
                                       const hl_real *restrict b, size_t b_step, hl_real beta,   \
                                       hl_real *restrict c, size_t ldc)                          \
    {                                                                                            \
        micro(mr, nv, kc, a, lda, 1, b, b_step, beta, c, ldc);                                   \
    }

#if defined(__AVX512F__)
/* 32 vector registers: 14×2 accumulators, 2 of b, 1 broadcast. The narrower
 * tiles waste less on small products (attention heads of 32×16). Speeds are
 * measured on a Zen 5 core, relative to the widest. */
KERNEL(14, 2)
KERNEL(8, 2)
KERNEL(14, 1)
KERNEL(8, 1)
KERNEL_ROWS(8, 2)
KERNEL_ROWS(8, 1)
const hl_gemm_kernel hl_gemm_kernels[] = {
    {14, 2 * V, 1.0, micro_14x2, NULL},
    {8, 2 * V, 0.95, micro_8x2, micro_rows_8x2},
    {14, V, 0.9, micro_14x1, NULL},
    {8, V, 0.85, micro_8x1, micro_rows_8x1},
};
#else
/* 16 vector registers: 6×2 accumulators, 2 of b, 1 broadcast. */
KERNEL(6, 2)
KERNEL(6, 1)
KERNEL_ROWS(6, 2)
KERNEL_ROWS(6, 1)
const hl_gemm_kernel hl_gemm_kernels[] = {
    {6, 2 * V, 1.0, micro_6x2, micro_rows_6x2},
    {6, V, 0.8, micro_6x1, micro_rows_6x1},
};
#endif

#else

enum { MR = 4, NR = 8 };

/* Plain C: the loops over j vectorise, and products are rounded before they
 * are added (ISO C mode contracts nothing), the same on every compiler. */
static void micro_portable(int kc, const hl_real *restrict a, size_t a_step,
                           const hl_real *restrict b, size_t b_step, hl_real beta,
                           hl_real *restrict c, size_t ldc)
{
    hl_real acc[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++)
            acc[r][j] = beta == 0 ? 0 : beta * c[r * ldc + j];
    for (int k = 0; k < kc; k++) {
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++)
                acc[r][j] += a[r] * b[j];
        a += a_step;
        b += b_step;
    }
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++)
            c[r * ldc + j] = acc[r][j];
}

const hl_gemm_kernel hl_gemm_kernels[] = {{MR, NR, 1.0, micro_portable, NULL}};

#endif

const int hl_gemm_kernel_count = sizeof hl_gemm_kernels / sizeof hl_gemm_kernels[0];

#if defined(__AVX512F__)

/* With AVX-512 masks, rows that end mid-vector are loaded and stored whole. */
#ifdef HL_REAL_DOUBLE
typedef __mmask8 vmask;
#define VMASKZ_LOAD _mm512_maskz_loadu_pd
#define VMASK_STORE _mm512_mask_storeu_pd
#else
typedef __mmask16 vmask;
#define VMASKZ_LOAD _mm512_maskz_loadu_ps
#define VMASK_STORE _mm512_mask_storeu_ps
#endif

/* The first n lanes (all when n ≥ V). */
static vmask first_lanes(int n)
{
    return n >= V ? (vmask)-1 : n <= 0 ? 0 : (vmask)((1u << n) - 1);
}

void hl_gemm_pack(int rows, int width, int kc, hl_real alpha, const hl_real *restrict src,
                  size_t lds, hl_real *restrict dst, int ld)
{
    const vec va = VSET1(alpha);
    for (int r = 0; r < width; r += V) {
        const vmask in = first_lanes(rows - r), out = first_lanes(width - r);
        for (int k = 0; k < kc; k++)
            VMASK_STORE(dst + (size_t)k * ld + r, out,
                        VMUL(va, VMASKZ_LOAD(in, src + (size_t)k * lds + r)));
    }
}

#ifdef HL_REAL_DOUBLE
/* t[i][l] becomes t[l][i]: for each bit s of the row and lane numbers, the
 * lanes with bit s set of a row with it clear swap with the lanes with it
 * clear of the row s further on. */
static void transpose(vec t[V])
{
#pragma GCC unroll 4
    for (int s = V / 2; s >= 1; s /= 2) {
        _Alignas(64) int64_t lo[V], hi[V];
        for (int l = 0; l < V; l++) {
            lo[l] = l & s ? V + l - s : l;
            hi[l] = l & s ? V + l : l + s;
        }
        const __m512i ilo = _mm512_load_si512(lo), ihi = _mm512_load_si512(hi);
#pragma GCC unroll 8
        for (int i = 0; i < V; i++)
            if (!(i & s)) {
                const vec a = t[i], b = t[i + s];
                t[i] = _mm512_permutex2var_pd(a, ilo, b);
                t[i + s] = _mm512_permutex2var_pd(a, ihi, b);
            }
    }
}
#else
/* t[i][l] becomes t[l][i], with in-lane shuffles where they do: 4×4 blocks
 * transposed within each 128-bit lane, then the lanes moved as a 4×4 of
 * blocks. */
static void transpose(vec t[V])
{
    vec u[V];
#pragma GCC unroll 8
    for (int i = 0; i < V; i += 2) {
        u[i] = _mm512_unpacklo_ps(t[i], t[i + 1]);
        u[i + 1] = _mm512_unpackhi_ps(t[i], t[i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < V; i += 4) {
        t[i] = _mm512_shuffle_ps(u[i], u[i + 2], 0x44);
        t[i + 1] = _mm512_shuffle_ps(u[i], u[i + 2], 0xee);
        t[i + 2] = _mm512_shuffle_ps(u[i + 1], u[i + 3], 0x44);
        t[i + 3] = _mm512_shuffle_ps(u[i + 1], u[i + 3], 0xee);
    }
    /* t[4q + j] now holds, in lane L, column 4L + j of rows 4q..4q+3. */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        u[j] = _mm512_shuffle_f32x4(t[j], t[4 + j], 0x88);
        u[4 + j] = _mm512_shuffle_f32x4(t[j], t[4 + j], 0xdd);
        u[8 + j] = _mm512_shuffle_f32x4(t[8 + j], t[12 + j], 0x88);
        u[12 + j] = _mm512_shuffle_f32x4(t[8 + j], t[12 + j], 0xdd);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        t[j] = _mm512_shuffle_f32x4(u[j], u[8 + j], 0x88);
        t[8 + j] = _mm512_shuffle_f32x4(u[j], u[8 + j], 0xdd);
        t[4 + j] = _mm512_shuffle_f32x4(u[4 + j], u[12 + j], 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(u[4 + j], u[12 + j], 0xdd);
    }
}
#endif

/* V×V blocks: V rows of V values of k in, V values of k as V rows out. The
 * loops over a block's rows are unrolled so t stays in registers. */
void hl_gemm_pack_transposed(int rows, int width, int kc, hl_real alpha,
                             const hl_real *restrict src, size_t lds, hl_real *restrict dst,
                             int ld)
{
    const vec va = VSET1(alpha);
    for (int r0 = 0; r0 < width; r0 += V) {
        const int nrow = rows - r0;
        const vmask out = first_lanes(width - r0);
        const hl_real *s = src + (size_t)r0 * lds;
        hl_real *d = dst + r0;
        if (nrow <= 0) {
            for (int k = 0; k < kc; k++)
                VMASK_STORE(d + (size_t)k * ld, out, VZERO());
            continue;
        }
        for (int k0 = 0; k0 < kc; k0 += V) {
            const int nk = kc - k0;
            const vmask in = first_lanes(nk);
            vec t[V];
#pragma GCC unroll 16
            for (int i = 0; i < V; i++)
                t[i] = i < nrow ? VMUL(va, VMASKZ_LOAD(in, s + (size_t)i * lds + k0)) : VZERO();
            transpose(t);
#pragma GCC unroll 16
            for (int i = 0; i < V; i++)
                if (i < nk)
                    VMASK_STORE(d + (size_t)(k0 + i) * ld, out, t[i]);
        }
    }
}

#else

void hl_gemm_pack(int rows, int width, int kc, hl_real alpha, const hl_real *restrict src,
                  size_t lds, hl_real *restrict dst, int ld)
{
    for (int k = 0; k < kc; k++, src += lds, dst += ld) {
        for (int r = 0; r < rows; r++)
            dst[r] = alpha * src[r];
        for (int r = rows; r < width; r++)
            dst[r] = 0;
    }
}

void hl_gemm_pack_transposed(int rows, int width, int kc, hl_real alpha,
                             const hl_real *restrict src, size_t lds, hl_real *restrict dst,
                             int ld)
{
    for (int r = 0; r < width; r++)
        for (int k = 0; k < kc; k++)
            dst[(size_t)k * ld + r] = r < rows ? alpha * src[(size_t)r * lds + k] : 0;
}

#endif
