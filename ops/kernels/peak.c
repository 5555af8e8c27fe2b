/* The kernel set's fused multiply-add rate on one thread (see ops/kernels.h):
 * independent accumulator chains, enough to cover the FMA units' latency,
 * and nothing else in the loop. */
#include "ops/kernels/set.h"

/* Chains: more than latency × units (4 × 2) on every set, within 16 registers. */
enum { CHAINS = 12 };

double HL_SIMD_FN(hl_fma_peak)(long iterations, double *flops)
{
    hl_vec acc[CHAINS];
    const hl_vec a = hl_vset1((hl_real)0.999999), b = hl_vset1((hl_real)1e-7);
#pragma GCC unroll 12
    for (int c = 0; c < CHAINS; c++)
        acc[c] = hl_vset1((hl_real)c);
    for (long i = 0; i < iterations; i++)
#pragma GCC unroll 12
        for (int c = 0; c < CHAINS; c++)
            acc[c] = hl_vfma(acc[c], a, b);
    *flops = 2.0 * HL_VL * CHAINS * (double)iterations;
    _Alignas(64) hl_real lanes[HL_VL];
    hl_vec total = acc[0];
    for (int c = 1; c < CHAINS; c++)
        total = hl_vadd(total, acc[c]);
    hl_vstore(lanes, total);
    return (double)lanes[0]; /* keeps the loop from being dropped */
}
