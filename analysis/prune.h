/*
 * prune.h: a GPT without some of its heads, as a new and smaller model.
 *
 *     hl_gpt_meta meta;                                             // io/model_io.h
 *     hl_gpt *m = hl_gpt_load_meta("model.safetensors", &meta, &err);
 *     hl_gpt *small = hl_prune_heads(m, &off, &meta.pruned, &err);  // meta.pruned grows
 */
#ifndef HL_PRUNE_H
#define HL_PRUNE_H

#include "core/error.h"
#include "models/gpt.h"
#include "models/head_set.h"

/* A new, smaller model without the heads in `remove` (current indices): their
 * rows of W_Q, W_K, W_V and of the in-projection bias and their columns of
 * W_O are dropped; everything else is copied.
 * When pruned is not NULL it holds the original indices already removed from
 * m and gets these added. NULL, with the reason in err, for a head out of
 * range, a layer left with no head, or no memory. m is not changed. */
hl_gpt *hl_prune_heads(const hl_gpt *m, const hl_head_set *remove, hl_head_set *pruned,
                      hl_error *err);

#endif
