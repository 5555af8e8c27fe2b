/*
 * gpt_groups.h: a GPT's parameters sorted for an optimizer with groups
 * (train/optim.h), and the zero initialisation of the layers that write to
 * the residual stream.
 *
 * The hidden matrices are every block's attention in-projection and
 * out-projection and its MLP's fc and proj weights: Muon updates them, AdamW
 * the rest (embeddings, head, norm gains, biases, smear). The in-projection
 * is orthogonalised as its separate q, k and v row blocks (H·D, K·D and K·D
 * rows), and a SwiGLU fc as its gate and up halves: each is a linear map of
 * its own that only happens to be stored packed.
 *
 *     hl_optim_groups groups = {.n = 2, .group_of = hl_gpt_param_group, .ctx = m,
 *                               .cfg = {[HL_GPT_GROUP_OTHER] = adamw,
 *                                       [HL_GPT_GROUP_HIDDEN] = muon}};
 *     hl_optim *opt = hl_optim_new_groups(m->params, &groups, &err);
 *
 *     hl_gpt_init_weights(m, &rng);
 *     hl_gpt_zero_init(m);             // modded-nanogpt's zero-initialised projections
 */
#ifndef HL_GPT_GROUPS_H
#define HL_GPT_GROUPS_H

#include "models/gpt.h"

enum { HL_GPT_GROUP_OTHER = 0, HL_GPT_GROUP_HIDDEN = 1 };
/* Row blocks of one hidden matrix, at most (q, k, v). */
#define HL_GPT_ROW_BLOCKS_MAX 3

/* HL_GPT_GROUP_HIDDEN when t is one of m's hidden matrices, with its row
 * blocks in rows[0 .. *n_blocks-1] (rows has room for HL_GPT_ROW_BLOCKS_MAX;
 * *n_blocks 0: one block); else HL_GPT_GROUP_OTHER. gpt is the hl_gpt: the
 * group_of of an hl_optim_groups. */
int hl_gpt_param_group(void *gpt, const hl_tensor *t, int *n_blocks, int *rows);

/* Zeroes every block's attention out_proj weight and MLP proj weight, and
 * the head weight unless it is the tied token embedding: each block then
 * starts as the identity on the residual stream and the logits as the head's
 * bias. Biases are left as they are. */
void hl_gpt_zero_init(hl_gpt *m);

#endif
