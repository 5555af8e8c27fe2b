/*
 * smear.h: smeared keys (ops/smear.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *k_smeared = hl_smear(g, k, alpha); // k (B,H,S,D), alpha (H)
 *     k_smeared = hl_smear_docs(g, k, alpha, doc_ids); // packed documents (B,S)
 */
#ifndef HL_OPS_SMEAR_H
#define HL_OPS_SMEAR_H

#include "core/graph.h"

/* Smeared keys (Olsson et al. 2022): k (B,H,S,D) and alpha (H) ->
 *     k'[s] = σ(alpha_h)·k[s] + (1 - σ(alpha_h))·k[s-1]   for s >= 1,
 * k'[0] = k[0]: each key mixes in its predecessor by a learned weight per head. */
hl_tensor *hl_smear(hl_graph *g, hl_tensor *k, hl_tensor *alpha);
/* The same over packed documents, doc_ids (B,S) the document of each key (as
 * hl_mask_documents'; NULL: one document): a key that begins a document
 * (another id than its predecessor's) is kept as k'[0] is, so no key mixes
 * in another document's. */
hl_tensor *hl_smear_docs(hl_graph *g, hl_tensor *k, hl_tensor *alpha, const hl_tensor *doc_ids);

#endif
