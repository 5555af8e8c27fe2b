/* The AdamW step (see ops/kernels.h), compiled once per kernel set on
 * ops/simd.h: the parameters, gradients and moments in vectors, with the
 * scalar formula's operations in its order. */
#include "ops/kernels/set.h"

enum { V = HL_VL };

/* The step on one vector of each array; returns the new w, m and v. */
#define ADAMW(w, g, m, v)                                                                        \
    do {                                                                                         \
        g = hl_vmul(g, scale);                                                                   \
        w = hl_vmul(w, decay);                                                                   \
        m = hl_vadd(hl_vmul(b1, m), hl_vmul(one_b1, g));                                         \
        v = hl_vadd(hl_vmul(b2, v), hl_vmul(hl_vmul(one_b2, g), g));                             \
        const hl_vec den = hl_vadd(hl_vdiv(hl_vsqrt(v), sqrt_bc2), eps);                         \
        w = hl_vsub(w, hl_vdiv(hl_vmul(step, m), den));                                          \
    } while (0)

void HL_SIMD_FN(hl_adamw)(hl_real *w, const hl_real *grad, hl_real *m, hl_real *v, size_t n,
                          const hl_adamw_args *a)
{
    const hl_vec scale = hl_vset1(a->grad_scale), decay = hl_vset1(a->decay);
    const hl_vec b1 = hl_vset1(a->b1), one_b1 = hl_vset1(1 - a->b1);
    const hl_vec b2 = hl_vset1(a->b2), one_b2 = hl_vset1(1 - a->b2);
    const hl_vec step = hl_vset1(a->step_size), sqrt_bc2 = hl_vset1(a->sqrt_bc2);
    const hl_vec eps = hl_vset1(a->eps);
    size_t i = 0;
    for (; i + V <= n; i += V) {
        hl_vec wi = hl_vload(w + i), g = hl_vload(grad + i), mi = hl_vload(m + i);
        hl_vec vi = hl_vload(v + i);
        ADAMW(wi, g, mi, vi);
        hl_vstore(w + i, wi);
        hl_vstore(m + i, mi);
        hl_vstore(v + i, vi);
    }
    if (i < n) {
        const hl_vmask k = hl_vmask_first((int)(n - i));
        hl_vec wi = hl_vload_mask(w + i, k), g = hl_vload_mask(grad + i, k);
        hl_vec mi = hl_vload_mask(m + i, k), vi = hl_vload_mask(v + i, k);
        ADAMW(wi, g, mi, vi);
        hl_vstore_mask(w + i, wi, k);
        hl_vstore_mask(m + i, mi, k);
        hl_vstore_mask(v + i, vi, k);
    }
}
