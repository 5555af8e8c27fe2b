#include "train/muon.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/kernels.h"

/* Elementwise passes go parallel above this many values (cf. OPTIM_PARALLEL_MIN). */
#define MUON_PARALLEL_MIN 32768
/* Running sums of the squared norm, element i in lane i % MUON_LANES: the
 * additions overlap, and the order is fixed whatever the thread count. */
#define MUON_LANES 8

/* Whether the Gram form's fewer multiply-adds (see iterate_gram) pay. */
#define MUON_GRAM_RATIO 2

size_t hl_muon_work_size(int rows, int cols)
{
    const size_t r = (size_t)(rows < cols ? rows : cols), c = (size_t)(rows < cols ? cols : rows);
    const size_t direct = 2 * r * c + 2 * r * r, gram = r * c + 4 * r * r;
    return direct > gram ? direct : gram;
}

static double sum_squares(const hl_real *x, size_t n)
{
    double lane[MUON_LANES] = {0};
    size_t i = 0;
    for (; i + MUON_LANES <= n; i += MUON_LANES)
        for (int l = 0; l < MUON_LANES; l++)
            lane[l] += (double)x[i + l] * x[i + l];
    for (int l = 0; i < n; i++, l++)
        lane[l] += (double)x[i] * x[i];
    double total = 0;
    for (int l = 0; l < MUON_LANES; l++)
        total += lane[l];
    return total;
}

/* Source rows a task of a parallel transpose takes: whole vectors of them. */
#define MUON_TRANSPOSE_ROWS 64

/* dst (cols,rows), row stride ldd, = src (rows,cols)ᵀ, row stride lds: by the
 * kernel set's packing transpose, which moves vector-sized blocks where a
 * plain loop would read or write one value per cache line. */
static void transpose(const hl_real *src, int rows, int cols, size_t lds, hl_real *dst,
                      int ldd)
{
    hl_gemm_pack_fn *pack = hl_kernels()->gemm_pack_transposed;
#pragma omp parallel for if ((size_t)rows * cols >= MUON_PARALLEL_MIN) schedule(static)
    for (int i = 0; i < rows; i += MUON_TRANSPOSE_ROWS) {
        const int n = rows - i < MUON_TRANSPOSE_ROWS ? rows - i : MUON_TRANSPOSE_ROWS;
        pack(n, n, cols, 1, src + (size_t)i * lds, lds, dst + i, ldd);
    }
}

/* m (r,r): the lower triangle set to the upper one's mirror image, a band of
 * MUON_TRANSPOSE_ROWS rows at a time: left of the band's diagonal block, the
 * transpose of the columns above it (as transpose() does, on one thread);
 * in that block, value by value. */
static void mirror(hl_real *m, int r)
{
    for (int i0 = 0; i0 < r; i0 += MUON_TRANSPOSE_ROWS) {
        const int n = r - i0 < MUON_TRANSPOSE_ROWS ? r - i0 : MUON_TRANSPOSE_ROWS;
        hl_kernels()->gemm_pack_transposed(i0, i0, n, 1, m + i0, (size_t)r, m + (size_t)i0 * r, r);
        for (int i = i0 + 1; i < i0 + n; i++)
            for (int j = i0; j < i; j++)
                m[(size_t)i * r + j] = m[(size_t)j * r + i];
    }
}

/* c (r,r) = alpha·p·op(q) + beta·c for a product known to be symmetric: p
 * (r,k) times its own transpose (trans), or two commuting symmetric (r,r)
 * matrices. Its upper triangle (hl_gemm_upper, about half the multiply-adds)
 * is copied below. Elements (i,j) and (j,i) of p·pᵀ are the same sum of the
 * same products, so that result has a full product's bits; the others come
 * out exactly symmetric, where a full product may differ in the last bit
 * between (i,j) and (j,i). */
static void symmetric_gemm(bool trans, int r, int k, hl_real alpha, const hl_real *p,
                           const hl_real *q, hl_real beta, hl_real *c)
{
    hl_gemm_upper(false, trans, r, k, alpha, p, k, q, trans ? k : r, beta, c, r);
    mirror(c, r);
}

/* x (r,c) = g (rows,cols) / (‖g‖_F + 1e-7), transposed when tall. */
static void normalize(const hl_real *g, int rows, int cols, hl_real *x)
{
    const size_t n = (size_t)rows * cols;
    const hl_real norm = (hl_real)(sqrt(sum_squares(g, n)) + 1e-7);
    const hl_real *src = g;
    if (rows > cols) {
        transpose(g, rows, cols, (size_t)cols, x, rows);
        src = x;
    }
#pragma omp parallel for if (n >= MUON_PARALLEL_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        x[i] = src[i] / norm;
}

/* The published iteration on x (r,c) itself: three products a step. */
static void iterate_direct(hl_real *g, int rows, int cols, int steps, hl_real *work)
{
    const bool tall = rows > cols;
    const int r = tall ? cols : rows, c = tall ? rows : cols;
    const size_t n = (size_t)r * c, rr = (size_t)r * r;
    hl_real *x = work, *y = x + n, *a = y + n, *b = a + rr;
    const hl_real ca = (hl_real)HL_MUON_A, cb = (hl_real)HL_MUON_B, cc = (hl_real)HL_MUON_C;
    normalize(g, rows, cols, x);
    for (int s = 0; s < steps; s++) {
        symmetric_gemm(true, r, c, 1, x, x, 0, a); /* A = X·Xᵀ (r,r) */
        for (size_t i = 0; i < rr; i++)
            b[i] = cb * a[i];
        symmetric_gemm(false, r, r, cc, a, a, 1, b); /* B = bA + cA² */
#pragma omp parallel for if (n >= MUON_PARALLEL_MIN) schedule(static)
        for (size_t i = 0; i < n; i++)
            y[i] = ca * x[i];
        hl_gemm(false, false, r, c, r, 1, b, r, x, c, 1, y, c); /* Y = aX + B·X (r,c) */
        hl_real *t = x;
        x = y;
        y = t;
    }
    if (tall)
        transpose(x, r, c, (size_t)c, g, r);
    else
        memcpy(g, x, n * sizeof *g);
}

/* The same iteration on the small Gram matrix (r,r) of a wide x (r,c).
 * Step k multiplies X_k by P_k = aI + bA_k + cA_k², a polynomial in A_k =
 * X_k·X_kᵀ, so every X_k is Q_k·X_0 with Q_k = P_{k-1}···P_0, and all these
 * matrices are polynomials in A_0 that commute: A_{k+1} = P_k·A_k·P_k =
 * A_k·P_k². Only A_0 = X_0·X_0ᵀ and the last X = Q·X_0 touch the c columns;
 * the rest is four symmetric r×r products a step (A², P², A·P², P·Q),
 * against the direct form's two symmetric products and one r×r×c: fewer
 * multiply-adds for any c > r, about 0.45 of them at c = 4r. Equal to the
 * direct iteration in exact arithmetic; in float the two differ by rounding,
 * as any two orders of the same sums do. */
static void iterate_gram(hl_real *g, int rows, int cols, int steps, hl_real *work)
{
    const bool tall = rows > cols;
    const int r = tall ? cols : rows, c = tall ? rows : cols;
    const size_t n = (size_t)r * c, rr = (size_t)r * r;
    hl_real *x = work, *a = x + n, *p = a + rr, *t = p + rr, *q = t + rr;
    const hl_real ca = (hl_real)HL_MUON_A, cb = (hl_real)HL_MUON_B, cc = (hl_real)HL_MUON_C;
    normalize(g, rows, cols, x);
    symmetric_gemm(true, r, c, 1, x, x, 0, a); /* A_0 = X_0·X_0ᵀ */
    for (int s = 0; s < steps; s++) {
        symmetric_gemm(false, r, r, 1, a, a, 0, p); /* A², then P = aI + bA + cA² */
        for (size_t i = 0; i < rr; i++)
            p[i] = cb * a[i] + cc * p[i];
        for (size_t i = 0; i < rr; i += (size_t)r + 1)
            p[i] += ca;
        if (s == 0) {
            memcpy(q, p, rr * sizeof *q);
        } else {
            symmetric_gemm(false, r, r, 1, p, q, 0, t); /* Q ← P·Q */
            hl_real *u = q;
            q = t;
            t = u;
        }
        if (s == steps - 1)
            break;
        symmetric_gemm(false, r, r, 1, p, p, 0, t); /* A ← A·P² */
        symmetric_gemm(false, r, r, 1, a, t, 0, p);
        hl_real *u = a;
        a = p;
        p = u;
    }
    /* X = Q·X_0, written straight into g (as Xᵀ = X_0ᵀ·Qᵀ when tall). */
    if (tall)
        hl_gemm(true, true, c, r, r, 1, x, c, q, r, 0, g, r);
    else
        hl_gemm(false, false, r, c, r, 1, q, r, x, c, 0, g, c);
}

void hl_muon_orthogonalize(hl_real *g, int rows, int cols, int steps, hl_real *work)
{
    const int r = rows < cols ? rows : cols, c = rows < cols ? cols : rows;
    if (steps > 0 && c / MUON_GRAM_RATIO >= r)
        iterate_gram(g, rows, cols, steps, work);
    else
        iterate_direct(g, rows, cols, steps, work);
}
