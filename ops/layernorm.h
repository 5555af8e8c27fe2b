/*
 * layernorm.h: LayerNorm, alone and fused with the residual add before it
 * (ops/layernorm.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *h = hl_layernorm(g, x, gamma, beta, 1e-5f);
 */
#ifndef HL_OPS_LAYERNORM_H
#define HL_OPS_LAYERNORM_H

#include "core/graph.h"

/* Normalises over the last dim: (x - mean) / sqrt(var + eps) * gamma + beta,
 * var the biased variance (as PyTorch). gamma and beta (N) may be NULL. */
hl_tensor *hl_layernorm(hl_graph *g, hl_tensor *x, hl_tensor *gamma, hl_tensor *beta,
                        hl_real eps);
/* A pre-norm transformer's residual junction in one op: *sum = a + b (a and b
 * of one shape), returned normalised as hl_layernorm would.
 * Both outputs take part in backward. The same bits as hl_add then the norm,
 * forward and backward, in one pass over the rows each way instead of three:
 * the sum is normalised while its row is in cache, and in backward the sum's
 * gradient becomes a's without a copy. On error *sum is the poisoned tensor
 * too. */
hl_tensor *hl_add_layernorm(hl_graph *g, hl_tensor *a, hl_tensor *b, hl_tensor *gamma,
                            hl_tensor *beta, hl_real eps, hl_tensor **sum);

#endif
