#include "train/muon.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ops/gemm.h"

/* Elementwise passes go parallel above this many values (cf. OPTIM_PARALLEL_MIN). */
#define MUON_PARALLEL_MIN 32768
/* Running sums of the squared norm, element i in lane i % MUON_LANES: the
 * additions overlap, and the order is fixed whatever the thread count. */
#define MUON_LANES 8

size_t hl_muon_work_size(int rows, int cols)
{
    const size_t r = (size_t)(rows < cols ? rows : cols), c = (size_t)(rows < cols ? cols : rows);
    return 2 * r * c + 2 * r * r;
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

/* dst (cols,rows) = src (rows,cols)ᵀ / div, or srcᵀ itself when div is 0. */
static void transpose(const hl_real *src, int rows, int cols, hl_real div, hl_real *dst)
{
    const size_t n = (size_t)rows * cols;
#pragma omp parallel for if (n >= MUON_PARALLEL_MIN) schedule(static)
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            dst[(size_t)j * rows + i] = div != 0 ? src[(size_t)i * cols + j] / div
                                                 : src[(size_t)i * cols + j];
}

void hl_muon_orthogonalize(hl_real *g, int rows, int cols, int steps, hl_real *work)
{
    const bool tall = rows > cols;
    const int r = tall ? cols : rows, c = tall ? rows : cols;
    const size_t n = (size_t)r * c, rr = (size_t)r * r;
    hl_real *x = work, *y = x + n, *a = y + n, *b = a + rr;
    const hl_real ca = (hl_real)HL_MUON_A, cb = (hl_real)HL_MUON_B, cc = (hl_real)HL_MUON_C;
    const hl_real norm = (hl_real)(sqrt(sum_squares(g, n)) + 1e-7);
    if (tall) {
        transpose(g, rows, cols, norm, x);
    } else {
#pragma omp parallel for if (n >= MUON_PARALLEL_MIN) schedule(static)
        for (size_t i = 0; i < n; i++)
            x[i] = g[i] / norm;
    }
    for (int s = 0; s < steps; s++) {
        hl_gemm(false, true, r, r, c, 1, x, c, x, c, 0, a, r); /* A = X·Xᵀ (r,r) */
        for (size_t i = 0; i < rr; i++)
            b[i] = cb * a[i];
        hl_gemm(false, false, r, r, r, cc, a, r, a, r, 1, b, r); /* B = bA + cA² */
#pragma omp parallel for if (n >= MUON_PARALLEL_MIN) schedule(static)
        for (size_t i = 0; i < n; i++)
            y[i] = ca * x[i];
        hl_gemm(false, false, r, c, r, 1, b, r, x, c, 1, y, c); /* Y = aX + B·X (r,c) */
        hl_real *t = x;
        x = y;
        y = t;
    }
    if (tall)
        transpose(x, r, c, 0, g);
    else
        memcpy(g, x, n * sizeof *g);
}
