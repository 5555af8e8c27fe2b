/* ReLU²'s row kernels (see ops/kernels/relu2.h), compiled once per kernel set
 * on ops/simd.h. relu is a max with the input second, which keeps NaN; the
 * square and the slope 2·relu(x) are one rounding each on every set, so all
 * sets give the same bits with or without FMA. */
#include "ops/kernels/relu2.h"
#include "ops/simd.h"

HL_SIMD_INLINE hl_vec relu(hl_vec x) { return hl_vmax(hl_vzero(), x); }

HL_SIMD_INLINE hl_vec relu2(hl_vec x)
{
    const hl_vec r = relu(x);
    return hl_vmul(r, r);
}

HL_SIMD_INLINE hl_vec relu2_grad(hl_vec x, hl_vec dy)
{
    const hl_vec r = relu(x);
    return hl_vmul(dy, hl_vadd(r, r));
}

void HL_SIMD_FN(hl_relu2_row)(const hl_real *x, hl_real *y, size_t n)
{
    HL_ROW_MAP(x, y, n, relu2);
}

void HL_SIMD_FN(hl_relu2_grad_row)(const hl_real *x, const hl_real *dy, hl_real *dx, size_t n,
                                   bool overwrite)
{
    size_t i = 0;
    for (; i + HL_VL <= n; i += HL_VL) {
        const hl_vec d = relu2_grad(hl_vload(x + i), hl_vload(dy + i));
        hl_vstore(dx + i, overwrite ? d : hl_vadd(hl_vload(dx + i), d));
    }
    if (i < n) {
        const hl_vmask m = hl_vmask_first((int)(n - i));
        const hl_vec d = relu2_grad(hl_vload_mask(x + i, m), hl_vload_mask(dy + i, m));
        hl_vstore_mask(dx + i, overwrite ? d : hl_vadd(hl_vload_mask(dx + i, m), d), m);
    }
}
