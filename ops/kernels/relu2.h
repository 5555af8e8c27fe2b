/*
 * relu2.h: ReLU²'s row kernels (ops/kernels/relu2.c, one compilation per
 * kernel set), called by ops/relu2.c through the set in use:
 *
 *     HL_KERNEL(hl_relu2_row)(x, y, n);
 */
#ifndef HL_OPS_KERNELS_RELU2_H
#define HL_OPS_KERNELS_RELU2_H

#include "ops/kernels.h"

/* y[i] = relu(x[i])² (NaN stays NaN). */
HL_KERNEL_DECLARE(void, hl_relu2_row, (const hl_real *x, hl_real *y, size_t n));
/* dx[i] (+)= dy[i]·2·relu(x[i]): adds, or stores when overwrite. */
HL_KERNEL_DECLARE(void, hl_relu2_grad_row,
                  (const hl_real *x, const hl_real *dy, hl_real *dx, size_t n, bool overwrite));

#endif
