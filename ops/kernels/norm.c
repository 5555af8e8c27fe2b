/* Row kernels of LayerNorm and RMSNorm (see ops/kernels.h), compiled once per
 * kernel set. The arithmetic is in double, as the ops always did; it is
 * written as plain C over HL_SUM_LANES independent partial sums, which each
 * set's compilation vectorises (AVX2: four doubles a register) without
 * changing any lane's order of operations, so every set gives the same bits
 * (FMA contraction is off for the whole build). */
#include "ops/kernels/set.h"

enum { L = HL_SUM_LANES };

/* Σ (x[i] - shift), or Σ (x[i] - shift)² when square, in L partials. */
static double lanes_sum(const hl_real *x, double shift, bool square, size_t n)
{
    double lanes[L] = {0};
    size_t i = 0;
    for (; i + L <= n; i += L)
        for (int l = 0; l < L; l++) {
            const double d = (double)x[i + l] - shift;
            lanes[l] += square ? d * d : d;
        }
    for (int l = 0; i < n; i++, l++) {
        const double d = (double)x[i] - shift;
        lanes[l] += square ? d * d : d;
    }
    return hl_sum_lanes_total(lanes);
}

double HL_SIMD_FN(hl_norm_sum)(const hl_real *x, double shift, bool square, size_t n)
{
    return square ? lanes_sum(x, shift, true, n) : lanes_sum(x, shift, false, n);
}

void HL_SIMD_FN(hl_norm_scale)(const hl_real *x, double mean, double rstd, const hl_real *gamma,
                               const hl_real *beta, hl_real *y, size_t n)
{
    if (gamma && beta)
        for (size_t i = 0; i < n; i++)
            y[i] = (hl_real)(((double)x[i] - mean) * rstd * (double)gamma[i] + (double)beta[i]);
    else if (gamma)
        for (size_t i = 0; i < n; i++)
            y[i] = (hl_real)(((double)x[i] - mean) * rstd * (double)gamma[i]);
    else if (beta)
        for (size_t i = 0; i < n; i++)
            y[i] = (hl_real)(((double)x[i] - mean) * rstd + (double)beta[i]);
    else
        for (size_t i = 0; i < n; i++)
            y[i] = (hl_real)(((double)x[i] - mean) * rstd);
}

/* d = dy·gamma (dy without gamma); x̂ = (x - mean)·rstd. */
static inline double grad_d(const hl_real *dy, const hl_real *gamma, size_t i)
{
    return gamma ? (double)dy[i] * (double)gamma[i] : (double)dy[i];
}

void HL_SIMD_FN(hl_norm_grad_sums)(const hl_real *x, const hl_real *dy, const hl_real *gamma,
                                   double mean, double rstd, size_t n, double *sum_d,
                                   double *sum_dxhat)
{
    double a[L] = {0}, b[L] = {0};
    size_t i = 0;
    for (; i + L <= n; i += L)
        for (int l = 0; l < L; l++) {
            const double d = grad_d(dy, gamma, i + l);
            a[l] += d;
            b[l] += d * (((double)x[i + l] - mean) * rstd);
        }
    for (int l = 0; i < n; i++, l++) {
        const double d = grad_d(dy, gamma, i);
        a[l] += d;
        b[l] += d * (((double)x[i] - mean) * rstd);
    }
    *sum_d = hl_sum_lanes_total(a);
    *sum_dxhat = hl_sum_lanes_total(b);
}

void HL_SIMD_FN(hl_norm_grad)(const hl_real *x, const hl_real *dy, const hl_real *gamma,
                              double mean, double rstd, double mean_d, double mean_dxhat,
                              hl_real *dx, size_t n, bool overwrite)
{
    for (size_t i = 0; i < n; i++) {
        const double xhat = ((double)x[i] - mean) * rstd;
        const hl_real v = (hl_real)(rstd * (grad_d(dy, gamma, i) - mean_d - xhat * mean_dxhat));
        dx[i] = overwrite ? v : dx[i] + v;
    }
}
