/*
 * rmsnorm.h: RMSNorm, alone and fused with the residual add before it
 * (ops/rmsnorm.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *h = hl_rmsnorm(g, x, gamma, 1e-6f);
 */
#ifndef HL_OPS_RMSNORM_H
#define HL_OPS_RMSNORM_H

#include "core/graph.h"

/* Normalises over the last dim by the root mean square: x / sqrt(mean(x²) +
 * eps) * gamma (Zhang & Sennrich 2019; Llama's RMSNorm). gamma (N) may be NULL. */
hl_tensor *hl_rmsnorm(hl_graph *g, hl_tensor *x, hl_tensor *gamma, hl_real eps);
/* hl_add_layernorm (ops/layernorm.h) with RMSNorm: *sum = a + b, returned
 * normalised as hl_rmsnorm would, with the same bits as hl_add then hl_rmsnorm. */
hl_tensor *hl_add_rmsnorm(hl_graph *g, hl_tensor *a, hl_tensor *b, hl_tensor *gamma, hl_real eps,
                          hl_tensor **sum);

#endif
