/*
 * gelu.h: GELU, exact and in its tanh form (ops/gelu.c). ops/ops.h includes
 * every op header.
 *
 *     hl_tensor *h = hl_gelu(g, hl_linear(g, x, w_fc, b_fc));
 */
#ifndef HL_OPS_GELU_H
#define HL_OPS_GELU_H

#include "core/graph.h"

/* The exact GELU, x·Φ(x), as torch.nn.GELU() by default. */
hl_tensor *hl_gelu(hl_graph *g, hl_tensor *x);
/* GELU's tanh approximation, GPT-2's gelu_new and PyTorch's
 * gelu(x, approximate='tanh'): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))),
 * computed as x·σ(2u) (the same value; no cancellation for negative x). */
hl_tensor *hl_gelu_tanh(hl_graph *g, hl_tensor *x);

#endif
