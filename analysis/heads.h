/*
 * heads.h: what each attention head of a GPT is worth, and removing the ones
 * that are not: evaluation with heads ablated (gated to zero, or replaced by
 * their mean output), head importance (Michel et al. 2019) and pruning.
 *
 * An evaluation set is a fixed set of token sequences (N,T) with one or more
 * groups of targets (the toy task has "scored" and "other"; a text has one),
 * each group scored on its own: mean cross-entropy and argmax accuracy.
 *
 *     hl_eval_set *set = hl_eval_set_new(1000, 32, 2, 250, &err);   // then fill it
 *     hl_eval_result base, zero, mean;
 *     hl_heads_evaluate(m, set, NULL, NULL, &base, &err);
 *     hl_head_set off = {0};
 *     off.on[1][3] = true;                                          // layer 1, head 3
 *     hl_heads_evaluate(m, set, &off, NULL, &zero, &err);           // zero ablation
 *     hl_head_means means;
 *     hl_heads_mean_outputs(m, set, &means, &err);
 *     hl_heads_evaluate(m, set, &off, &means, &mean, &err);         // mean ablation
 *     hl_head_means_free(&means);
 *
 *     double raw[L * n_heads], norm[L * n_heads];                   // row stride n_heads
 *     hl_heads_importance(m, set, raw, norm, &err);
 *
 *     hl_gpt_meta meta;                                             // io/model_io.h
 *     hl_gpt *m = hl_gpt_load_meta("model.safetensors", &meta, &err);
 *     hl_gpt *small = hl_gpt_prune(m, &off, &meta.pruned, &err);    // meta.pruned grows
 *     hl_gpt_save_meta("pruned.safetensors", small, &meta, &err);
 *
 * Heads are named by their index in the model at hand (0..layer_heads-1), as
 * the gates are. A pruned model keeps the remaining heads in their original
 * order, so a record of the ORIGINAL indices removed (hl_gpt_meta.pruned, the
 * "pruned_heads" metadata of its checkpoint, e.g. "0:1,3;1:" = heads 1 and 3
 * of layer 0) maps current indices back (hl_head_original).
 *
 * The model's gates and head offsets are changed while a function runs and
 * restored before it returns; its parameter gradients are left zeroed.
 */
#ifndef HL_HEADS_H
#define HL_HEADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"
#include "models/gpt.h"
#include "models/head_set.h"

#define HL_EVAL_MAX_GROUPS 4
#define HL_EVAL_IGNORE (-1)

/* ---- evaluation sets ------------------------------------------------------ */

typedef struct hl_eval_set {
    int n, T;        /* sequences and positions */
    int batch;       /* sequences per forward pass (the last pass may have fewer) */
    int n_groups;    /* 1..HL_EVAL_MAX_GROUPS */
    char group_names[HL_EVAL_MAX_GROUPS][16];
    int32_t *tokens;                       /* (n,T) */
    int32_t *targets[HL_EVAL_MAX_GROUPS];  /* (n,T) each; HL_EVAL_IGNORE where none */
} hl_eval_set;

/* Tokens zeroed, every target HL_EVAL_IGNORE, groups named "g0", "g1", ...
 * NULL, with the reason in err, on bad sizes or no memory. */
hl_eval_set *hl_eval_set_new(int n, int T, int n_groups, int batch, hl_error *err);
void hl_eval_set_free(hl_eval_set *set);

typedef struct hl_eval_result {
    double loss[HL_EVAL_MAX_GROUPS];     /* mean cross-entropy over the group's targets */
    double accuracy[HL_EVAL_MAX_GROUPS]; /* fraction of them predicted by the argmax */
    int64_t count[HL_EVAL_MAX_GROUPS];   /* targets in the group */
    double total_loss;                   /* Σ_group loss: the loss importance differentiates */
} hl_eval_result;

/* ---- head sets and mean outputs ------------------------------------------- */

/* Each layer's mean head outputs over an evaluation set. */
typedef struct hl_head_means {
    int n_layers;
    hl_tensor *layer[HL_GPT_MAX_LAYERS]; /* (H_l,T,D) heap tensors */
} hl_head_means;

void hl_head_means_free(hl_head_means *means);

/* ---- evaluation, ablation, importance (analysis/heads.c) -------------------- */

/* Loss and accuracy of every target group over the set, in eval mode (no
 * dropout), with the heads in `ablate` (may be NULL) gated to 0; when means is
 * not NULL each of them instead outputs its mean (mean ablation). Other gates
 * keep their values. */
hl_status hl_heads_evaluate(hl_gpt *m, const hl_eval_set *set, const hl_head_set *ablate,
                            const hl_head_means *means, hl_eval_result *out, hl_error *err);

/* Every head's output averaged over the set's sequences, per position, with
 * all gates at 1 while measuring: means->layer[l] is (H_l,T,D). */
hl_status hl_heads_mean_outputs(hl_gpt *m, const hl_eval_set *set, hl_head_means *means,
                                hl_error *err);

/* Head importance of Michel et al. (2019): for each batch one backward pass
 * of the set's loss (Σ_group mean cross-entropy) at gates 1, then
 * raw[l*n_heads + h] = the batch-size-weighted mean of |∂L/∂g_h| and
 * normalised = raw divided by its layer's L2 norm. Row stride is cfg.n_heads;
 * entries past a pruned layer's heads are NaN. normalised may be NULL. */
hl_status hl_heads_importance(hl_gpt *m, const hl_eval_set *set, double *raw,
                              double *normalised, hl_error *err);

/* ---- pruning (analysis/prune.c) --------------------------------------------- */

/* A new, smaller model without the heads in `remove` (current indices): their
 * rows of W_Q, W_K, W_V and of the in-projection bias and their columns of
 * W_O are dropped; everything else, and the kept heads' gates, is copied.
 * When pruned is not NULL it holds the original indices already removed from
 * m and gets these added. NULL, with the reason in err, for a head out of
 * range, a layer left with no head, or no memory. m is not changed. */
hl_gpt *hl_gpt_prune(const hl_gpt *m, const hl_head_set *remove, hl_head_set *pruned,
                     hl_error *err);

#endif
