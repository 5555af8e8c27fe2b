/*
 * gather_heads.h: heads gathered from a tensor of fewer heads
 * (ops/gather_heads.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *k4 = hl_gather_heads(g, k, (int[]){0, 0, 1, 1}, 4); // 2 key heads for 4
 */
#ifndef HL_OPS_GATHER_HEADS_H
#define HL_OPS_GATHER_HEADS_H

#include "core/graph.h"

/* x (B,Hkv,S,D) -> (B,heads,S,D) with out[:,h] = x[:, src[h]], each 0 <=
 * src[h] < Hkv; src is copied into the arena. Grouped-query attention's
 * repeat of each key/value head for its query heads (Llama's repeat_kv is
 * src[h] = h / (heads / Hkv)), feeding hl_attention or the composed ops.
 * Backward adds each output head's gradient into its source head, in h
 * order. */
hl_tensor *hl_gather_heads(hl_graph *g, hl_tensor *x, const int *src, int heads);

#endif
