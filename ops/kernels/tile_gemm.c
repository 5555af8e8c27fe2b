/* Small tile products read in place (see ops/tile_gemm.h), compiled once per
 * kernel set on ops/simd.h. */
#include "ops/kernels/set.h"

enum { V = HL_VL, ROWS = HL_TILE_ROWS, NV = HL_TILE_NV, WIDTH = HL_TILE_NV * HL_VL };

/* A block of rows × nv vectors of c is held in registers while p runs over
 * k: per p, nv vector loads of b, one broadcast of a per row and rows·nv
 * fused multiply-adds. With masked, the last vector holds only the lanes of
 * `last` (a ragged right edge): its loads fill the rest with zeros and its
 * stores leave memory past them alone. rows, nv and masked are constants at
 * every call, so the loops unroll and acc is only names for registers. */
HL_SIMD_INLINE void block(const int rows, const int nv, const bool masked, int k,
                          const hl_real *restrict a, size_t a_row, size_t a_col,
                          const hl_real *restrict b, size_t ldb, bool accumulate,
                          hl_real scale, hl_real *restrict c, size_t ldc, hl_vmask last)
{
    hl_vec acc[ROWS][NV];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) {
            const hl_real *cv = c + r * ldc + v * V;
            const bool edge = masked && v == nv - 1;
            acc[r][v] = !accumulate ? hl_vzero()
                        : edge      ? hl_vload_mask(cv, last)
                                    : hl_vload(cv);
        }
    for (int p = 0; p < k; p++) {
        const hl_real *restrict bp = b + p * ldb;
        hl_vec bv[NV];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++)
            bv[v] = masked && v == nv - 1 ? hl_vload_mask(bp + v * V, last) : hl_vload(bp + v * V);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const hl_vec ar = hl_vset1(a[r * a_row + p * a_col]);
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++)
                acc[r][v] = hl_vfma(ar, bv[v], acc[r][v]);
        }
    }
    const hl_vec vs = hl_vset1(scale);
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) {
            hl_real *cv = c + r * ldc + v * V;
            const hl_vec out = hl_vmul(vs, acc[r][v]); /* exact when scale is 1 */
            if (masked && v == nv - 1)
                hl_vstore_mask(cv, out, last);
            else
                hl_vstore(cv, out);
        }
}

typedef void block_fn(int k, const hl_real *a, size_t a_row, size_t a_col, const hl_real *b,
                      size_t ldb, bool accumulate, hl_real scale, hl_real *c, size_t ldc,
                      hl_vmask last);

/* The full block, with constant sizes and no masks. */
static void block_full(int k, const hl_real *a, size_t a_row, size_t a_col, const hl_real *b,
                       size_t ldb, bool accumulate, hl_real scale, hl_real *c, size_t ldc)
{
    block(ROWS, NV, false, k, a, a_row, a_col, b, ldb, accumulate, scale, c, ldc,
          hl_vmask_first(V));
}

/* The edges: fewer rows, fewer vectors, or a last vector cut short; one
 * function per (rows, vectors), each unrolled. */
#define EDGE(r, nv)                                                                              \
    static void edge_##r##_##nv(int k, const hl_real *a, size_t a_row, size_t a_col,            \
                                const hl_real *b, size_t ldb, bool accumulate, hl_real scale,    \
                                hl_real *c, size_t ldc, hl_vmask last)                           \
    {                                                                                            \
        block(r, nv, true, k, a, a_row, a_col, b, ldb, accumulate, scale, c, ldc, last);         \
    }
#define EDGE_ROW(r) EDGE(r, 1) EDGE(r, 2)
#define EDGE_ENTRY(r) {edge_##r##_1, edge_##r##_2},
_Static_assert(NV == 2, "the edge table below has two vectors a row");

EDGE_ROW(1) EDGE_ROW(2) EDGE_ROW(3) EDGE_ROW(4)
#if HL_TILE_ROWS >= 6
EDGE_ROW(5) EDGE_ROW(6)
#endif
#if HL_TILE_ROWS >= 8
EDGE_ROW(7) EDGE_ROW(8)
#endif

static block_fn *const edges[ROWS][NV] = {
    EDGE_ENTRY(1) EDGE_ENTRY(2) EDGE_ENTRY(3) EDGE_ENTRY(4)
#if HL_TILE_ROWS >= 6
    EDGE_ENTRY(5) EDGE_ENTRY(6)
#endif
#if HL_TILE_ROWS >= 8
    EDGE_ENTRY(7) EDGE_ENTRY(8)
#endif
};
_Static_assert(ROWS == 4 || ROWS == 6 || ROWS == 8, "edge functions for every row count");

void HL_SIMD_FN(hl_tile_gemm)(int m, int n, int k, const hl_real *a, size_t a_row, size_t a_col,
                              const hl_real *b, size_t ldb, bool accumulate, hl_real scale,
                              hl_real *c, size_t ldc)
{
    for (int j0 = 0; j0 < n; j0 += WIDTH) {
        const int width = n - j0 < WIDTH ? n - j0 : WIDTH;
        const int nv = (width + V - 1) / V;
        const hl_vmask last = hl_vmask_first(width - (nv - 1) * V);
        for (int i0 = 0; i0 < m; i0 += ROWS) {
            const int rows = m - i0 < ROWS ? m - i0 : ROWS;
            const hl_real *ai = a + i0 * a_row;
            hl_real *ci = c + i0 * ldc + j0;
            if (rows == ROWS && width == WIDTH)
                block_full(k, ai, a_row, a_col, b + j0, ldb, accumulate, scale, ci, ldc);
            else
                edges[rows - 1][nv - 1](k, ai, a_row, a_col, b + j0, ldb, accumulate, scale, ci,
                                        ldc, last);
        }
    }
}
