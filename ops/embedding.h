/*
 * embedding.h: rows of a weight gathered at token ids (ops/embedding.c).
 * ops/ops.h includes every op header.
 *
 *     hl_tensor *x = hl_embedding(g, wte, ids, 2, (int[]){B, T}); // (V,E) -> (B,T,E)
 */
#ifndef HL_OPS_EMBEDDING_H
#define HL_OPS_EMBEDDING_H

#include <stdint.h>

#include "core/graph.h"

/* weight (V,E) gathered at ids (shape given by rank/shape) -> (shape...,E). */
hl_tensor *hl_embedding(hl_graph *g, hl_tensor *weight, const int32_t *ids, int rank,
                        const int *shape);

#endif
