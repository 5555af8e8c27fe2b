/*
 * gemm_kernel.h: the micro-kernels and packing under hl_gemm (internal to
 * ops/gemm.c).
 *
 * A kernel updates one mr×nr tile of C from panels: a holds mr values of
 * op(A)'s column k at a[k·a_step..], b holds nr values of op(B)'s row k at
 * b[k·b_step..], for k < kc. Which kernels are built is chosen at compile time:
 * AVX-512 (32 vector registers, so tiles up to 14×32 floats), AVX2 with FMA,
 * or portable C that the compiler vectorises for whatever the target has.
 *
 *     const hl_gemm_kernel *kern = &hl_gemm_kernels[0];
 *     kern->fn(kc, apanel, kern->mr, bpanel, kern->nr, beta, c, ldc); // c = beta·c + a·b
 *
 * Each element is one running sum: beta·c first, then the products in
 * ascending k, carried across calls through c itself, so the result does not
 * depend on how K is cut into panels or C into tiles.
 */
#ifndef HL_OPS_GEMM_KERNEL_H
#define HL_OPS_GEMM_KERNEL_H

#include <stddef.h>

#include "core/real.h"

#if defined(__AVX512F__)
#define HL_GEMM_VLEN (64 / (int)sizeof(hl_real))
#define HL_GEMM_MAX_MR 14
#elif defined(__AVX2__) && defined(__FMA__)
#define HL_GEMM_VLEN (32 / (int)sizeof(hl_real))
#define HL_GEMM_MAX_MR 6
#else
#define HL_GEMM_MAX_MR 4
#endif
/* The widest tile of any kernel: two vectors, or 8 values in plain C. */
#ifdef HL_GEMM_VLEN
#define HL_GEMM_MAX_NR (2 * HL_GEMM_VLEN)
#else
#define HL_GEMM_MAX_NR 8
#endif

/* c (mr rows, row stride ldc) = beta·c + Σ_k a[k·a_step + r]·b[k·b_step + j]
 * for one kernel's mr×nr tile; beta 0 writes c without reading it. Packed
 * panels have steps mr and nr; operands already laid out so are read in place. */
typedef void hl_gemm_micro_fn(int kc, const hl_real *restrict a, size_t a_step,
                              const hl_real *restrict b, size_t b_step, hl_real beta,
                              hl_real *restrict c, size_t ldc);

typedef struct {
    int mr, nr;   /* the tile of C it updates */
    double speed; /* multiply-adds per second, relative to the first kernel */
    hl_gemm_micro_fn *fn;
    /* The same with a[r·a_step + k] instead, reading rows of an untransposed
     * A in place; NULL if this kernel has no such form. */
    hl_gemm_micro_fn *fn_rows;
} hl_gemm_kernel;

/* This build's kernels, the one for large products first. */
extern const hl_gemm_kernel hl_gemm_kernels[];
extern const int hl_gemm_kernel_count;

/* dst[k·ld + r] = alpha·src[k·lds + r] (a straight copy) or, transposed,
 * alpha·src[r·lds + k], for r < rows and k < kc; zero for rows ≤ r < width.
 * These pack slivers of A (width mr) and B (width nr) for a kernel. */
void hl_gemm_pack(int rows, int width, int kc, hl_real alpha, const hl_real *restrict src,
                  size_t lds, hl_real *restrict dst, int ld);
void hl_gemm_pack_transposed(int rows, int width, int kc, hl_real alpha,
                             const hl_real *restrict src, size_t lds, hl_real *restrict dst,
                             int ld);

#endif
