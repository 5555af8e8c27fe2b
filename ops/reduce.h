/*
 * reduce.h: reductions of a whole tensor to one value (ops/reduce.c).
 * ops/ops.h includes every op header.
 *
 *     hl_tensor *loss = hl_mean(g, hl_mul(g, err, err)); // -> (1)
 */
#ifndef HL_OPS_REDUCE_H
#define HL_OPS_REDUCE_H

#include "core/graph.h"

/* Sum and mean of all elements -> (1). */
hl_tensor *hl_sum(hl_graph *g, hl_tensor *x);
hl_tensor *hl_mean(hl_graph *g, hl_tensor *x);

#endif
