/* GEMM micro-kernels and packing of one kernel set (see ops/kernels.h),
 * compiled once per set on ops/simd.h. */
#include "ops/kernels.h"
#include "ops/kernels/set.h"
#include "ops/simd.h"

enum { V = HL_VL };

/* The kernel for an mr×(nv·V) tile. Inlined into one function per shape, so
 * the loops over r and v have constant bounds and are unrolled, and the
 * accumulator array is only names for registers. Per k: nv vector loads of
 * b, one broadcast of a per row, mr·nv fused multiply-adds. */
HL_SIMD_INLINE void micro(int mr, int nv, int kc, const hl_real *restrict a, size_t a_row,
                          size_t a_step, const hl_real *restrict b, size_t b_step, hl_real beta,
                          const hl_real *restrict bias, hl_real *restrict c, size_t ldc)
{
    hl_vec acc[HL_GEMM_MR][HL_GEMM_NV];
    const hl_vec vb = hl_vset1(beta);
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            acc[r][v] = bias        ? hl_vload(bias + v * V)
                        : beta == 0 ? hl_vzero()
                                    : hl_vmul(vb, hl_vload(c + r * ldc + v * V));
    /* Bring C's tile into L1 while the sums run, so that the stores at the
     * end do not wait on it: on a 16-core Xeon (Emerald Rapids, L3 across a
     * mesh) charlm's 4x4 step took 92 and 86 ms without this, 66 and 73 with
     * it (alternated); on a Zen 5 core no change. Already loaded when beta is
     * not 0, and then a few wasted instructions. */
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            __builtin_prefetch(c + r * ldc + v * V, 1, 3);
    for (int k = 0; k < kc; k++) {
        hl_vec bk[HL_GEMM_NV];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            bk[v] = hl_vload(b + v * V);
#pragma GCC unroll 16
        for (int r = 0; r < mr; r++) {
            const hl_vec ar = hl_vset1(a[r * a_row]);
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++)
                acc[r][v] = hl_vfma(ar, bk[v], acc[r][v]);
        }
        a += a_step;
        b += b_step;
    }
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            hl_vstore(c + r * ldc + v * V, acc[r][v]);
}

#define KERNEL(mr, nv)                                                                           \
    static void micro_##mr##x##nv(int kc, const hl_real *restrict a, size_t a_step,             \
                                  const hl_real *restrict b, size_t b_step, hl_real beta,        \
                                  const hl_real *restrict bias, hl_real *restrict c, size_t ldc) \
    {                                                                                            \
        micro(mr, nv, kc, a, 1, a_step, b, b_step, beta, bias, c, ldc);                          \
    }

/* The same reading A's rows in place (a_step 1, rows lda apart): only for
 * kernels short enough that the row addresses fit in registers. */
#define KERNEL_ROWS(mr, nv)                                                                      \
    static void micro_rows_##mr##x##nv(int kc, const hl_real *restrict a, size_t lda,           \
                                       const hl_real *restrict b, size_t b_step, hl_real beta,   \
                                       const hl_real *restrict bias, hl_real *restrict c,        \
                                       size_t ldc)                                               \
    {                                                                                            \
        micro(mr, nv, kc, a, lda, 1, b, b_step, beta, bias, c, ldc);                             \
    }

#if HL_GEMM_MR == 14
/* The narrower tiles waste less on small products (attention heads of
 * 32×16). Speeds measured on a Zen 5 core, relative to the widest. */
KERNEL(14, 2)
KERNEL(8, 2)
KERNEL(14, 1)
KERNEL(8, 1)
KERNEL_ROWS(8, 2)
KERNEL_ROWS(8, 1)
const hl_gemm_kernel HL_SIMD_FN(hl_gemm_kernels)[] = {
    {14, 2 * V, 1.0, micro_14x2, NULL},
    {8, 2 * V, 0.95, micro_8x2, micro_rows_8x2},
    {14, V, 0.9, micro_14x1, NULL},
    {8, V, 0.85, micro_8x1, micro_rows_8x1},
    {0},
};
#elif HL_GEMM_MR == 6
KERNEL(6, 2)
KERNEL(6, 1)
KERNEL_ROWS(6, 2)
KERNEL_ROWS(6, 1)
const hl_gemm_kernel HL_SIMD_FN(hl_gemm_kernels)[] = {
    {6, 2 * V, 1.0, micro_6x2, micro_rows_6x2},
    {6, V, 0.8, micro_6x1, micro_rows_6x1},
    {0},
};
#elif HL_GEMM_MR == 4
KERNEL(4, 2)
KERNEL(4, 1)
KERNEL_ROWS(4, 2)
KERNEL_ROWS(4, 1)
const hl_gemm_kernel HL_SIMD_FN(hl_gemm_kernels)[] = {
    {4, 2 * V, 1.0, micro_4x2, micro_rows_4x2},
    {4, V, 0.8, micro_4x1, micro_rows_4x1},
    {0},
};
#else
#error "no GEMM kernels for this HL_GEMM_MR"
#endif

_Static_assert(HL_GEMM_MR <= HL_GEMM_MAX_MR && HL_GEMM_NV * HL_VL <= HL_GEMM_MAX_NR,
               "a tile larger than ops/kernels.h allows for");

/* Packing only copies and scales, so every set packs the same bits. */
#if defined(HL_SIMD_AVX512)
/* With AVX-512 masks, rows that end mid-vector are loaded and stored whole. */
void HL_SIMD_FN(hl_gemm_pack)(int rows, int width, int kc, hl_real alpha,
                              const hl_real *restrict src, size_t lds, hl_real *restrict dst,
                              int ld)
{
    const hl_vec va = hl_vset1(alpha);
    for (int r = 0; r < width; r += V) {
        const hl_vmask in = hl_vmask_first(rows - r), out = hl_vmask_first(width - r);
        for (int k = 0; k < kc; k++)
            hl_vstore_mask(dst + (size_t)k * ld + r,
                           hl_vmul(va, hl_vload_mask(src + (size_t)k * lds + r, in)), out);
    }
}
#else
/* Plain loops, which the compiler vectorises for the set's flags. */
void HL_SIMD_FN(hl_gemm_pack)(int rows, int width, int kc, hl_real alpha,
                              const hl_real *restrict src, size_t lds, hl_real *restrict dst,
                              int ld)
{
    for (int k = 0; k < kc; k++, src += lds, dst += ld) {
        for (int r = 0; r < rows; r++)
            dst[r] = alpha * src[r];
        for (int r = rows; r < width; r++)
            dst[r] = 0;
    }
}
#endif

/* transpose(t): a V×V block in V vectors, t[i][l] becomes t[l][i]. */
#if defined(HL_SIMD_AVX512) && defined(HL_REAL_DOUBLE)
/* For each bit s of the row and lane numbers, the lanes with bit s set of a
 * row with it clear swap with the lanes with it clear of the row s further
 * on. */
static void transpose(hl_vec t[V])
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
                const hl_vec a = t[i], b = t[i + s];
                t[i] = _mm512_permutex2var_pd(a, ilo, b);
                t[i + s] = _mm512_permutex2var_pd(a, ihi, b);
            }
    }
}
#elif defined(HL_SIMD_AVX512)
/* In-lane shuffles where they do: 4×4 blocks transposed within each 128-bit
 * lane, then the lanes moved as a 4×4 of blocks. */
static void transpose(hl_vec t[V])
{
    hl_vec u[V];
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
#elif defined(HL_SIMD_AVX2) && defined(HL_REAL_DOUBLE)
/* 2×2 blocks transposed within each 128-bit lane, then the lanes swapped. */
static void transpose(hl_vec t[V])
{
    const hl_vec u0 = _mm256_unpacklo_pd(t[0], t[1]), u1 = _mm256_unpackhi_pd(t[0], t[1]);
    const hl_vec u2 = _mm256_unpacklo_pd(t[2], t[3]), u3 = _mm256_unpackhi_pd(t[2], t[3]);
    t[0] = _mm256_permute2f128_pd(u0, u2, 0x20);
    t[1] = _mm256_permute2f128_pd(u1, u3, 0x20);
    t[2] = _mm256_permute2f128_pd(u0, u2, 0x31);
    t[3] = _mm256_permute2f128_pd(u1, u3, 0x31);
}
#elif defined(HL_SIMD_AVX2)
/* As on AVX-512 with two lanes: 4×4 blocks within each 128-bit lane, then
 * the lanes swapped. */
static void transpose(hl_vec t[V])
{
    hl_vec u[V];
#pragma GCC unroll 4
    for (int i = 0; i < V; i += 2) {
        u[i] = _mm256_unpacklo_ps(t[i], t[i + 1]);
        u[i + 1] = _mm256_unpackhi_ps(t[i], t[i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < V; i += 4) {
        t[i] = _mm256_shuffle_ps(u[i], u[i + 2], 0x44);
        t[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], 0xee);
        t[i + 2] = _mm256_shuffle_ps(u[i + 1], u[i + 3], 0x44);
        t[i + 3] = _mm256_shuffle_ps(u[i + 1], u[i + 3], 0xee);
    }
    /* t[4q + j] now holds, in lane L, column 4L + j of rows 4q..4q+3. */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        u[j] = _mm256_permute2f128_ps(t[j], t[4 + j], 0x20);
        u[4 + j] = _mm256_permute2f128_ps(t[j], t[4 + j], 0x31);
    }
#pragma GCC unroll 8
    for (int i = 0; i < V; i++)
        t[i] = u[i];
}
#endif

#if defined(HL_SIMD_AVX512) || defined(HL_SIMD_AVX2)
/* The first n values of a block's row or column: whole vectors loaded and
 * stored plainly, a mask only for a ragged edge, as AVX2's masked stores are
 * slow on some cores (on AVX-512 either costs the same). */
HL_SIMD_INLINE hl_vec load_first(const hl_real *p, int n, hl_vmask m)
{
    return n >= V ? hl_vload(p) : hl_vload_mask(p, m);
}

HL_SIMD_INLINE void store_first(hl_real *p, hl_vec x, int n, hl_vmask m)
{
    if (n >= V)
        hl_vstore(p, x);
    else
        hl_vstore_mask(p, x, m);
}

/* V×V blocks: V rows of V values of k in, V values of k as V rows out. The
 * loops over a block's rows are unrolled so t stays in registers. */
void HL_SIMD_FN(hl_gemm_pack_transposed)(int rows, int width, int kc, hl_real alpha,
                                         const hl_real *restrict src, size_t lds,
                                         hl_real *restrict dst, int ld)
{
    const hl_vec va = hl_vset1(alpha);
    for (int r0 = 0; r0 < width; r0 += V) {
        const int nrow = rows - r0;
        const hl_vmask out = hl_vmask_first(width - r0);
        const hl_real *s = src + (size_t)r0 * lds;
        hl_real *d = dst + r0;
        if (nrow <= 0) {
            for (int k = 0; k < kc; k++)
                store_first(d + (size_t)k * ld, hl_vzero(), width - r0, out);
            continue;
        }
        for (int k0 = 0; k0 < kc; k0 += V) {
            const int nk = kc - k0;
            const hl_vmask in = hl_vmask_first(nk);
            hl_vec t[V];
#pragma GCC unroll 16
            for (int i = 0; i < V; i++)
                t[i] = i < nrow ? hl_vmul(va, load_first(s + (size_t)i * lds + k0, nk, in))
                                : hl_vzero();
            transpose(t);
#pragma GCC unroll 16
            for (int i = 0; i < V; i++)
                if (i < nk)
                    store_first(d + (size_t)(k0 + i) * ld, t[i], width - r0, out);
        }
    }
}

#else

/* The portable set's vectors have no shuffles in common across targets: a
 * plain loop, value by value. */
void HL_SIMD_FN(hl_gemm_pack_transposed)(int rows, int width, int kc, hl_real alpha,
                                         const hl_real *restrict src, size_t lds,
                                         hl_real *restrict dst, int ld)
{
    for (int r = 0; r < width; r++)
        for (int k = 0; k < kc; k++)
            dst[(size_t)k * ld + r] = r < rows ? alpha * src[(size_t)r * lds + k] : 0;
}

#endif
