/* Column sums over the rows of a matrix: the gradients of linear's bias and
 * of LayerNorm's and RMSNorm's gamma and beta. */
#ifdef _OPENMP
#include <omp.h>
#endif
#include <string.h>

#include "ops/internal.h"
#include "ops/vmath.h"

/* Columns a task sums, at most: its running sums (8 KiB each) stay in L1
 * while whole stretches of rows stream past. Each thread takes a block of
 * its share of the columns, a multiple of COLUMNS_MIN; the width changes no
 * sum, each column being summed over the rows in order. */
#define COLUMNS_MAX 1024
#define COLUMNS_MIN 16

void hl_column_sums(const hl_real *dy, const hl_real *x, const double *mean, const double *rstd,
                    size_t step, size_t rows, int cols, hl_real *sum_dy, hl_real *sum_dxhat)
{
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int width = (cols + threads - 1) / threads;
    width = (width + COLUMNS_MIN - 1) / COLUMNS_MIN * COLUMNS_MIN;
    width = width < COLUMNS_MAX ? width : COLUMNS_MAX;
    const int blocks = (cols + width - 1) / width;
#pragma omp parallel for if (rows * (size_t)cols >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (int b = 0; b < blocks; b++) {
        const int j0 = b * width, n = cols - j0 < width ? cols - j0 : width;
        double sd[COLUMNS_MAX], sx[COLUMNS_MAX];
        memset(sd, 0, (size_t)n * sizeof *sd);
        memset(sx, 0, (size_t)n * sizeof *sx);
        hl_vmath_col_sums(dy + j0, x ? x + j0 : NULL, (size_t)cols, rows, mean, rstd, step,
                          sum_dy ? sd : NULL, sum_dxhat ? sx : NULL, (size_t)n);
        for (int j = 0; j < n; j++) {
            if (sum_dy)
                sum_dy[j0 + j] += (hl_real)sd[j];
            if (sum_dxhat)
                sum_dxhat[j0 + j] += (hl_real)sx[j];
        }
    }
}
