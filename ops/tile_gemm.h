/*
 * tile_gemm.h: products of small tiles that live in cache, without packing
 * (internal to ops/; the fused attention's tiles are 64×64 by D ≤ 128).
 *
 * hl_gemm packs both operands into panels and starts an OpenMP region: right
 * for large products, most of the cost for a 64×64×32 tile. This reads the
 * operands in place on the calling thread. A's element (i,p) is at
 * a[i·a_row + p·a_col], so Aᵀ is only a swap of the two steps; B is row-major.
 *
 *     // c (m×n, row stride ldc) = c + a·b, a (m×k) row-major, b (k×n)
 *     hl_tile_gemm(m, n, k, a, lda, 1, b, ldb, true, c, ldc);
 *
 * Each element of c is one running sum: c's old value (when accumulating),
 * then the products in ascending p, each a fused multiply-add; the scaled
 * product then multiplies the finished sum by its scale. Each kernel
 * set holds a block of c in as many vector registers as it has
 * (ops/simd.h: 8×32 floats on AVX-512, 6×16 on AVX2) and reaches ragged
 * edges with masked loads and stores.
 */
#ifndef HL_OPS_TILE_GEMM_H
#define HL_OPS_TILE_GEMM_H

#include <stdbool.h>
#include <stddef.h>

#include "core/real.h"
#include "ops/kernels.h"

/* c = (accumulate ? c : 0) + A·B for A (m×k) at a with steps a_row, a_col and
 * B (k×n) at b with row stride ldb, by the active kernel set. */
static inline void hl_tile_gemm(int m, int n, int k, const hl_real *a, size_t a_row,
                                size_t a_col, const hl_real *b, size_t ldb, bool accumulate,
                                hl_real *c, size_t ldc)
{
    hl_kernels()->tile_gemm(m, n, k, a, a_row, a_col, b, ldb, accumulate, 1, c, ldc);
}

/* c = scale·(A·B): each sum rounded, then multiplied by scale, the bits of
 * hl_tile_gemm followed by a pass of multiplies, without that pass over c. */
static inline void hl_tile_gemm_scaled(int m, int n, int k, const hl_real *a, size_t a_row,
                                       size_t a_col, const hl_real *b, size_t ldb,
                                       hl_real scale, hl_real *c, size_t ldc)
{
    hl_kernels()->tile_gemm(m, n, k, a, a_row, a_col, b, ldb, false, scale, c, ldc);
}

#endif
