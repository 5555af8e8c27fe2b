/* Softmax's row kernels whose arithmetic is in double (see HL_VMATH_KERNELS:
 * mul_double, dot, softmax_grad), compiled once per kernel set. Plain C, which
 * each set's compilation vectorises: every element is the same few roundings
 * on every set (FMA contraction is off for the whole build), so every set
 * gives the same bits. */
#include "ops/kernels/set.h"

void HL_SIMD_FN(hl_vmath_mul_double)(const hl_real *x, double s, hl_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (hl_real)((double)x[i] * s);
}

/* HL_SUM_LANES running sums instead of one: a chain of dependent adds in
 * double ran at one element per add's latency (softmax's backward over 256
 * keys spent most of its time there). */
double HL_SIMD_FN(hl_vmath_dot)(const hl_real *x, const hl_real *y, size_t n)
{
    double lanes[HL_SUM_LANES] = {0};
    size_t i = 0;
    for (; i + HL_SUM_LANES <= n; i += HL_SUM_LANES)
        for (int l = 0; l < HL_SUM_LANES; l++)
            lanes[l] += (double)x[i + l] * (double)y[i + l];
    for (int l = 0; i < n; i++, l++)
        lanes[l] += (double)x[i] * (double)y[i];
    return hl_sum_lanes_total(lanes);
}

void HL_SIMD_FN(hl_vmath_softmax_grad)(const hl_real *p, const hl_real *dp, double dot,
                                       hl_real scale, hl_real *dx, size_t n, bool overwrite)
{
    if (overwrite)
        for (size_t i = 0; i < n; i++)
            dx[i] = scale * (hl_real)((double)p[i] * ((double)dp[i] - dot));
    else
        for (size_t i = 0; i < n; i++)
            dx[i] += scale * (hl_real)((double)p[i] * ((double)dp[i] - dot));
}
