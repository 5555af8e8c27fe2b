/*
 * mask.h: attention masks on a tensor of scores (ops/mask.c). ops/ops.h
 * includes every op header.
 *
 *     hl_tensor *p = hl_softmax(g, hl_mask_causal(g, hl_scale(g, s, 0.25f)));
 */
#ifndef HL_OPS_MASK_H
#define HL_OPS_MASK_H

#include "core/graph.h"

/* Masks take attention scores (B,H,T,S) or (B,T,S) and return a copy with the
 * masked entries set to -inf; gradients flow only through the kept entries. */
/* Blocks key s for query t when s > t (queries may not look ahead). */
hl_tensor *hl_mask_causal(hl_graph *g, hl_tensor *scores);
/* key_is_padding (B,S): nonzero = that key is padding, no query attends to it. */
hl_tensor *hl_mask_key_padding(hl_graph *g, hl_tensor *scores, const hl_tensor *key_is_padding);
/* is_blocked (T,S) or (B,T,S): nonzero = query t may not attend to key s
 * (the polarity of PyTorch's boolean attn_mask). */
hl_tensor *hl_mask_blocked(hl_graph *g, hl_tensor *scores, const hl_tensor *is_blocked);
/* doc_ids (B,S): the document of each key position, query t being at
 * position t (as hl_mask_causal numbers them; T <= S). Blocks key s for
 * query t unless doc_ids[b,s] == doc_ids[b,t]: with the causal mask, a
 * block-diagonal mask that keeps attention inside each document of a packed
 * sequence. The ids are compared as values (whole numbers, e.g. 0, 0, 1, 1,
 * 1, 2). */
hl_tensor *hl_mask_documents(hl_graph *g, hl_tensor *scores, const hl_tensor *doc_ids);
/* bias (T,S) or (B,T,S) is added to the scores (-inf entries block); the bias
 * is a constant: it receives no gradient. */
hl_tensor *hl_mask_additive(hl_graph *g, hl_tensor *scores, const hl_tensor *bias);

#endif
