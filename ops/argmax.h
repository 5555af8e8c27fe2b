/*
 * argmax.h: the index of the largest value (ops/argmax.c). ops/ops.h includes
 * every op header.
 *
 *     hl_tensor *predicted = hl_argmax(g, logits); // (...,V) -> (...)
 */
#ifndef HL_OPS_ARGMAX_H
#define HL_OPS_ARGMAX_H

#include "core/graph.h"

/* Index of the largest value over the last dim, (...,N) -> (...) as hl_real
 * (rank-1 input -> (1)). Not differentiable: use it under no-grad or on a
 * tensor that does not require grad. */
hl_tensor *hl_argmax(hl_graph *g, hl_tensor *x);

#endif
