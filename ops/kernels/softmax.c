/* Softmax's row kernels whose arithmetic is in double (see HL_VMATH_KERNELS:
 * mul_double, softmax_grad), compiled once per kernel set. Plain C, which
 * each set's compilation vectorises: every element is the same few roundings
 * on every set (FMA contraction is off for the whole build), so every set
 * gives the same bits. */
#include "ops/kernels/set.h"

void HL_SIMD_FN(hl_vmath_mul_double)(const hl_real *x, double s, hl_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (hl_real)((double)x[i] * s);
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
