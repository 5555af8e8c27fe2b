/* Column sums over a block of rows (see HL_VMATH_KERNELS' col_sums),
 * compiled once per kernel set. Plain C over the columns, which each set's
 * compilation vectorises (AVX-512: eight doubles a register): every column
 * is its own running sum, taken over the rows in order, and each element's
 * arithmetic is the same few roundings on every set (FMA contraction is off
 * for the whole build), so every set gives the same bits. */
#include "ops/kernels/set.h"

/* s[j] += Σ_r dy[r·ld + j]. */
static void sums_dy(const hl_real *dy, size_t ld, size_t rows, double *restrict s, size_t n)
{
    for (size_t r = 0; r < rows; r++) {
        const hl_real *restrict d = dy + r * ld;
        for (size_t j = 0; j < n; j++)
            s[j] += (double)d[j];
    }
}

/* sx[j] += Σ_r dy·x̂ and, with sd, sd[j] += Σ_r dy. */
static void sums_dxhat(const hl_real *dy, const hl_real *x, size_t ld, size_t rows,
                       const double *mean, const double *rstd, size_t step, double *restrict sd,
                       double *restrict sx, size_t n)
{
    for (size_t r = 0; r < rows; r++) {
        const hl_real *restrict d = dy + r * ld, *restrict xr = x + r * ld;
        const double m = mean ? mean[r * step] : 0, rs = rstd[r * step];
        if (sd)
            for (size_t j = 0; j < n; j++) {
                sx[j] += (double)d[j] * (((double)xr[j] - m) * rs);
                sd[j] += (double)d[j];
            }
        else
            for (size_t j = 0; j < n; j++)
                sx[j] += (double)d[j] * (((double)xr[j] - m) * rs);
    }
}

void HL_SIMD_FN(hl_vmath_col_sums)(const hl_real *dy, const hl_real *x, size_t ld, size_t rows,
                                   const double *mean, const double *rstd, size_t step,
                                   double *sum_dy, double *sum_dxhat, size_t n)
{
    if (x && sum_dxhat)
        sums_dxhat(dy, x, ld, rows, mean, rstd, step, sum_dy, sum_dxhat, n);
    else if (sum_dy)
        sums_dy(dy, ld, rows, sum_dy, n);
}
