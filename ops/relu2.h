/*
 * relu2.h: ReLU², modded-nanogpt's MLP activation (ops/relu2.c). ops/ops.h
 * includes every op header.
 *
 *     hl_tensor *h = hl_relu2(g, hl_linear(g, x, w_fc, NULL));
 */
#ifndef HL_OPS_RELU2_H
#define HL_OPS_RELU2_H

#include "core/graph.h"

/* ReLU², relu(x)² = max(x, 0)² (So et al. 2021's Primer; modded-nanogpt's
 * MLP), torch.relu(x).square(). Its slope 2·relu(x) is continuous; NaN
 * passes through. */
hl_tensor *hl_relu2(hl_graph *g, hl_tensor *x);

#endif
