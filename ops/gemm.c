/* The blocked GEMM kernel (see ops/gemm.h). */
#include "ops/gemm.h"

#include "ops/internal.h"

/* C is cut into TILE_M×TILE_N tiles, each computed by one thread, which sums
 * over K in blocks of TILE_K. Per block it copies alpha·op(A) into a row-major
 * (TILE_M,TILE_K) buffer and op(B) into a (TILE_K,TILE_N) one, whatever the
 * transposes, so the inner loop always runs over contiguous rows of B and C
 * and vectorises. The buffers (24 KiB in float) live on each thread's stack;
 * the C tile and the B block stay in cache across the k loop. */
enum { TILE_M = 32, TILE_N = 64, TILE_K = 64 };

typedef struct {
    bool trans_a, trans_b;
    int M, N, K;
    hl_real alpha, beta;
    size_t lda, ldb, ldc;
} gemm_shape;

static int min_int(int a, int b) { return a < b ? a : b; }

/* ap[r][k] = alpha · op(A)[i0+r][k0+k] for an mb×kb block. */
static void pack_a(const gemm_shape *s, const hl_real *A, int i0, int k0, int mb, int kb,
                   hl_real *ap)
{
    if (s->trans_a) {
        for (int k = 0; k < kb; k++) {
            const hl_real *src = A + (size_t)(k0 + k) * s->lda + i0;
            for (int r = 0; r < mb; r++)
                ap[r * TILE_K + k] = s->alpha * src[r];
        }
    } else {
        for (int r = 0; r < mb; r++) {
            const hl_real *src = A + (size_t)(i0 + r) * s->lda + k0;
            for (int k = 0; k < kb; k++)
                ap[r * TILE_K + k] = s->alpha * src[k];
        }
    }
}

/* bp[k][j] = op(B)[k0+k][j0+j] for a kb×nb block. Copying even an untransposed
 * B pays: rows of B a power of two apart would otherwise collide in cache. */
static void pack_b(const gemm_shape *s, const hl_real *B, int k0, int j0, int kb, int nb,
                   hl_real *bp)
{
    if (s->trans_b) {
        for (int j = 0; j < nb; j++) {
            const hl_real *src = B + (size_t)(j0 + j) * s->ldb + k0;
            for (int k = 0; k < kb; k++)
                bp[k * TILE_N + j] = src[k];
        }
    } else {
        for (int k = 0; k < kb; k++) {
            const hl_real *src = B + (size_t)(k0 + k) * s->ldb + j0;
            for (int j = 0; j < nb; j++)
                bp[k * TILE_N + j] = src[j];
        }
    }
}

/* c[r][0..nb) += Σ_k ap[r][k] · bp[k][0..nb), k ascending: the only place
 * products are summed, so each element's order is fixed by the tiling alone. */
static void tile_madd(int mb, int nb, int kb, const hl_real *restrict ap,
                      const hl_real *restrict bp, hl_real *restrict c, size_t ldc)
{
    for (int r = 0; r < mb; r++) {
        hl_real *restrict crow = c + r * ldc;
        for (int k = 0; k < kb; k++) {
            const hl_real a = ap[r * TILE_K + k];
            const hl_real *restrict brow = bp + k * TILE_N;
            for (int j = 0; j < nb; j++)
                crow[j] += a * brow[j];
        }
    }
}

/* One tile of C: rows i0.., columns j0.. of the product of one batch. */
static void gemm_tile(const gemm_shape *s, const hl_real *A, const hl_real *B, hl_real *C,
                      int i0, int j0)
{
    const int mb = min_int(TILE_M, s->M - i0), nb = min_int(TILE_N, s->N - j0);
    hl_real *c = C + (size_t)i0 * s->ldc + j0;
    for (int r = 0; r < mb; r++) {
        hl_real *crow = c + r * s->ldc;
        if (s->beta == 0) {
            for (int j = 0; j < nb; j++)
                crow[j] = 0;
        } else if (s->beta != 1) {
            for (int j = 0; j < nb; j++)
                crow[j] *= s->beta;
        }
    }
    hl_real ap[TILE_M * TILE_K], bp[TILE_K * TILE_N];
    for (int k0 = 0; k0 < s->K; k0 += TILE_K) {
        const int kb = min_int(TILE_K, s->K - k0);
        pack_a(s, A, i0, k0, mb, kb, ap);
        pack_b(s, B, k0, j0, kb, nb, bp);
        tile_madd(mb, nb, kb, ap, bp, c, s->ldc);
    }
}

void hl_gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, hl_real alpha,
                     const hl_real *A, int lda, const hl_real *B, int ldb, hl_real beta,
                     hl_real *C, int ldc, int batch, size_t stride_a, size_t stride_b,
                     size_t stride_c)
{
    if (M <= 0 || N <= 0 || K < 0 || batch <= 0)
        return;
    const gemm_shape s = {trans_a, trans_b, M, N, K, alpha, beta,
                          (size_t)lda, (size_t)ldb, (size_t)ldc};
    const size_t row_tiles = (size_t)(M + TILE_M - 1) / TILE_M;
    const size_t col_tiles = (size_t)(N + TILE_N - 1) / TILE_N;
    const size_t tiles_per_batch = row_tiles * col_tiles;
    const size_t tiles = tiles_per_batch * (size_t)batch;
    /* One flat loop over batch × row tiles × column tiles: a single parallel
     * region, and even a one-row product still splits over its columns. */
#pragma omp parallel for if ((double)batch * M * N * K >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t t = 0; t < tiles; t++) {
        const size_t b = t / tiles_per_batch, rest = t % tiles_per_batch;
        const int i0 = (int)(rest / col_tiles) * TILE_M, j0 = (int)(rest % col_tiles) * TILE_N;
        gemm_tile(&s, A + b * stride_a, B + b * stride_b, C + b * stride_c, i0, j0);
    }
}

void hl_gemm(bool trans_a, bool trans_b, int M, int N, int K, hl_real alpha, const hl_real *A,
             int lda, const hl_real *B, int ldb, hl_real beta, hl_real *C, int ldc)
{
    hl_gemm_batched(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 1, 0, 0, 0);
}
