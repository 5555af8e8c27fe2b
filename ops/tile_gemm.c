/* Small tile products read in place (see ops/tile_gemm.h). */
#include "ops/tile_gemm.h"

#include <math.h>

/* A block of ROWS rows × WIDTH columns of c is held in registers while p
 * runs over k: per p, WIDTH/lanes vector loads of b, one broadcast of a per
 * row and ROWS·WIDTH/lanes fused multiply-adds (16 AVX-512 registers of
 * floats). The loops have constant bounds, so the compiler unrolls them and
 * keeps acc in registers. */
enum { ROWS = 8, WIDTH = 32 };

#ifdef HL_REAL_DOUBLE
#define FMA fma
#else
#define FMA fmaf
#endif

static inline __attribute__((always_inline)) void
block(int rows, int width, int k, const hl_real *restrict a, size_t a_row, size_t a_col,
      const hl_real *restrict b, size_t ldb, bool accumulate, hl_real *restrict c, size_t ldc)
{
    hl_real acc[ROWS][WIDTH];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 32
        for (int j = 0; j < width; j++)
            acc[r][j] = 0;
    if (accumulate)
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++)
#pragma GCC unroll 32
            for (int j = 0; j < width; j++)
                acc[r][j] = c[r * ldc + j];
    for (int p = 0; p < k; p++) {
        const hl_real *restrict bp = b + p * ldb;
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const hl_real ar = a[r * a_row + p * a_col];
#pragma GCC unroll 32
            for (int j = 0; j < width; j++)
                acc[r][j] = FMA(ar, bp[j], acc[r][j]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 32
        for (int j = 0; j < width; j++)
            c[r * ldc + j] = acc[r][j];
}

/* The full block, with constant sizes. */
static void block_full(int k, const hl_real *a, size_t a_row, size_t a_col, const hl_real *b,
                       size_t ldb, bool accumulate, hl_real *c, size_t ldc)
{
    block(ROWS, WIDTH, k, a, a_row, a_col, b, ldb, accumulate, c, ldc);
}

/* A full block of half the width: heads of width 16. */
static void block_half(int k, const hl_real *a, size_t a_row, size_t a_col, const hl_real *b,
                       size_t ldb, bool accumulate, hl_real *c, size_t ldc)
{
    block(ROWS, WIDTH / 2, k, a, a_row, a_col, b, ldb, accumulate, c, ldc);
}

/* The edges: fewer rows or columns. */
static void block_edge(int rows, int width, int k, const hl_real *a, size_t a_row, size_t a_col,
                       const hl_real *b, size_t ldb, bool accumulate, hl_real *c, size_t ldc)
{
    block(rows, width, k, a, a_row, a_col, b, ldb, accumulate, c, ldc);
}

void hl_tile_gemm(int m, int n, int k, const hl_real *a, size_t a_row, size_t a_col,
                  const hl_real *b, size_t ldb, bool accumulate, hl_real *c, size_t ldc)
{
    for (int j0 = 0; j0 < n; j0 += WIDTH) {
        const int width = n - j0 < WIDTH ? n - j0 : WIDTH;
        for (int i0 = 0; i0 < m; i0 += ROWS) {
            const int rows = m - i0 < ROWS ? m - i0 : ROWS;
            const hl_real *ai = a + i0 * a_row;
            hl_real *ci = c + i0 * ldc + j0;
            if (rows == ROWS && width == WIDTH)
                block_full(k, ai, a_row, a_col, b + j0, ldb, accumulate, ci, ldc);
            else if (rows == ROWS && width == WIDTH / 2)
                block_half(k, ai, a_row, a_col, b + j0, ldb, accumulate, ci, ldc);
            else
                block_edge(rows, width, k, ai, a_row, a_col, b + j0, ldb, accumulate, ci, ldc);
        }
    }
}
