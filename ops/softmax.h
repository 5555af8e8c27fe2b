/*
 * softmax.h: the softmax over the last dim (ops/softmax.c). ops/ops.h
 * includes every op header.
 *
 *     hl_tensor *p = hl_softmax(g, scores); // each row of the last dim sums to 1
 */
#ifndef HL_OPS_SOFTMAX_H
#define HL_OPS_SOFTMAX_H

#include "core/graph.h"

/* Softmax over the last dim, numerically stable. A row that is all -inf
 * (fully masked) gives zeros and passes zero gradient. */
hl_tensor *hl_softmax(hl_graph *g, hl_tensor *x);

#endif
