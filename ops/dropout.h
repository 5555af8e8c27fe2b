/*
 * dropout.h: dropout (ops/dropout.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *h = hl_dropout(g, x, 0.1f);
 */
#ifndef HL_OPS_DROPOUT_H
#define HL_OPS_DROPOUT_H

#include "core/graph.h"

/* In training mode, zeroes each element with probability p (drawn from the
 * graph's seeded RNG) and scales the rest by 1/(1-p). Otherwise (eval mode or
 * p = 0) it returns x itself, recording nothing. */
hl_tensor *hl_dropout(hl_graph *g, hl_tensor *x, hl_real p);

#endif
