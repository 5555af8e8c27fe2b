/*
 * attention.h: scaled dot-product attention as one fused op
 * (ops/attention.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *o = hl_attention(g, q, k, v, 0.125f, NULL); // q, k, v (B,H,T,D)
 */
#ifndef HL_OPS_ATTENTION_H
#define HL_OPS_ATTENTION_H

#include <stdbool.h>

#include "core/graph.h"

/* Which keys each query may see in hl_attention: the masks of ops/mask.h,
 * with the same semantics and broadcasting, each optional. */
typedef struct hl_attention_masks {
    bool causal;                  /* key s hidden from query t when s > t */
    const hl_tensor *key_padding; /* (B,S): nonzero = padding, hidden from all */
    const hl_tensor *blocked;     /* (T,S) or (B,T,S): nonzero = hidden */
    const hl_tensor *additive;    /* (T,S) or (B,T,S): added to the scores (-inf hides) */
    const hl_tensor *doc_ids;     /* (B,S): key s hidden from query t in another document */
} hl_attention_masks;

/* Scaled dot-product attention as one op: q (B,H,T,D), k and v (B,H,S,D) ->
 * (B,H,T,D) = softmax(scale·q·kᵀ + masks)·v. It computes what hl_matmul,
 * hl_scale, the hl_mask_* ops, hl_softmax and hl_matmul compute in a row (a
 * fully masked query gives zeros and passes no gradient), but tile by tile
 * (flash attention), skipping causally masked tiles. Up to 256×256 scores a
 * head (T·S <= 65536) it takes whole score rows and, when recording, keeps
 * the (B,H,T,S) probabilities for backward, as the composed ops do; past that
 * the scores never exist whole, the node keeps one value per query, and
 * backward recomputes the probabilities. masks may be NULL. Backward reads
 * the mask tensors again: keep them, unchanged, until hl_graph_backward has
 * run. Attention dropout is not supported.
 *
 *     hl_attention_masks m = {.causal = true};
 *     hl_tensor *o = hl_attention(g, q, k, v, 1 / sqrtf(D), &m);
 */
hl_tensor *hl_attention(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v, hl_real scale,
                        const hl_attention_masks *masks);
/* The same with the heads merged: the output is (B,T,H·D), as an output
 * projection reads it, written in place by the kernel. The same bits as
 * hl_attention followed by hl_permute (0,2,1,3) and hl_reshape, without the
 * copy each way. */
hl_tensor *hl_attention_merged(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v,
                               hl_real scale, const hl_attention_masks *masks);

#endif
