/* The rotary row kernel (see ops/rope.c), compiled once per kernel set on
 * ops/simd.h. Each output element is two products and one difference or sum,
 * rounded in that order on every set (no FMA), so every set gives the same
 * bits. */
#include "ops/kernels/set.h"

enum { V = HL_VL };

/* One pair of halves: lo' = lo·c - hi·s, hi' = hi·c + lo·s. */
#define ROTATE(lo, hi, c, s, out_lo, out_hi)                                                     \
    do {                                                                                         \
        out_lo = hl_vsub(hl_vmul(lo, c), hl_vmul(hi, s));                                        \
        out_hi = hl_vadd(hl_vmul(hi, c), hl_vmul(lo, s));                                        \
    } while (0)

void HL_SIMD_FN(hl_rope_row)(const hl_real *x, const hl_real *cosines, const hl_real *sines,
                             hl_real sign, hl_real *y, size_t half, bool accumulate)
{
    const hl_real *x_hi = x + half;
    hl_real *y_hi = y + half;
    const hl_vec sg = hl_vset1(sign);
    size_t i = 0;
    for (; i + V <= half; i += V) {
        const hl_vec c = hl_vload(cosines + i), s = hl_vmul(hl_vload(sines + i), sg);
        hl_vec lo, hi;
        ROTATE(hl_vload(x + i), hl_vload(x_hi + i), c, s, lo, hi);
        if (accumulate) {
            lo = hl_vadd(hl_vload(y + i), lo);
            hi = hl_vadd(hl_vload(y_hi + i), hi);
        }
        hl_vstore(y + i, lo);
        hl_vstore(y_hi + i, hi);
    }
    if (i < half) {
        const hl_vmask m = hl_vmask_first((int)(half - i));
        const hl_vec c = hl_vload_mask(cosines + i, m);
        const hl_vec s = hl_vmul(hl_vload_mask(sines + i, m), sg);
        hl_vec lo, hi;
        ROTATE(hl_vload_mask(x + i, m), hl_vload_mask(x_hi + i, m), c, s, lo, hi);
        if (accumulate) {
            lo = hl_vadd(hl_vload_mask(y + i, m), lo);
            hi = hl_vadd(hl_vload_mask(y_hi + i, m), hi);
        }
        hl_vstore_mask(y + i, lo, m);
        hl_vstore_mask(y_hi + i, hi, m);
    }
}
