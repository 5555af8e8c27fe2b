/*
 * heads.h: what each attention head of a GPT is worth, and removing the ones
 * that are not: evaluation with heads ablated (gated to zero, or replaced by
 * their mean output), head importance (Michel et al. 2019) and pruning.
 *
 * Models are evaluated on an evaluation set (train/eval.h): fixed token
 * sequences with one or more groups of targets, each scored on its own.
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
 *     hl_heads_means_free(&means);
 *
 *     double raw[L * n_heads], norm[L * n_heads];                   // row stride n_heads
 *     hl_heads_importance(m, set, raw, norm, &err);
 *
 *     hl_gpt_meta meta;                                             // io/model_io.h
 *     hl_gpt *m = hl_gpt_load_meta("model.safetensors", &meta, &err);
 *     hl_gpt *small = hl_prune_heads(m, &off, &meta.pruned, &err);    // analysis/prune.h
 *     hl_gpt_save_meta("pruned.safetensors", small, &meta, &err);
 *     hl_gpt_meta_clear(&meta);                                     // its vocabulary
 *
 * Heads are named by their index in the model at hand (0..layer_heads-1), as
 * the gates are. A pruned model keeps the remaining heads in their original
 * order, so a record of the ORIGINAL indices removed (hl_gpt_meta.pruned, the
 * "pruned_heads" metadata of its checkpoint, e.g. "0:1,3;1:" = heads 1 and 3
 * of layer 0) maps current indices back (hl_head_original).
 *
 * Every function here passes its gates and offsets to the forward pass
 * (hl_gpt_run) and leaves the model's weights as they were; importance uses
 * the parameters' gradient block as scratch and leaves it zeroed.
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
#include "train/eval.h"

/* ---- mean head outputs --------------------------------------------------- */

/* Each layer's mean head outputs over an evaluation set. */
typedef struct hl_head_means {
    int n_layers;
    hl_tensor *layer[HL_GPT_MAX_LAYERS]; /* (H_l,T,D) heap tensors */
} hl_head_means;

void hl_heads_means_free(hl_head_means *means);

/* ---- ablation runs ------------------------------------------------------- */

/* A forward pass's gates and offsets (hl_gpt_run) for an ablation, with the
 * heap tensors behind them. */
typedef struct hl_heads_run {
    hl_gpt_run run;
    hl_tensor *owned[2 * HL_GPT_MAX_LAYERS];
    int n_owned;
} hl_heads_run;

/* Gates the heads of `ablate` (may be NULL: none) to 0 for sequences of T
 * tokens; with means, each of them outputs its mean instead (an offset that
 * is zero for the other heads). Layers without an ablated head get no gate.
 * On error r holds nothing to free. */
hl_status hl_heads_run_ablate(hl_heads_run *r, const hl_gpt *m, int T, const hl_head_set *ablate,
                              const hl_head_means *means, hl_error *err);
void hl_heads_run_free(hl_heads_run *r);

/* ---- evaluation, ablation, importance (analysis/heads.c) -------------------- */

/* Loss and accuracy of every target group over the set, in eval mode (no
 * dropout), with the heads in `ablate` (may be NULL) gated to 0; when means is
 * not NULL each of them instead outputs its mean (mean ablation). */
hl_status hl_heads_evaluate(const hl_gpt *m, const hl_eval_set *set, const hl_head_set *ablate,
                            const hl_head_means *means, hl_eval_result *out, hl_error *err);
/* The same, and the first group's mean loss at each position into
 * position_loss (T; hl_eval_position_loss), e.g. for the ICL score with heads
 * ablated. position_loss NULL: hl_heads_evaluate. */
hl_status hl_heads_evaluate_positions(const hl_gpt *m, const hl_eval_set *set,
                                      const hl_head_set *ablate, const hl_head_means *means,
                                      double *position_loss, hl_eval_result *out, hl_error *err);

/* Every head's output averaged over the set's sequences, per position, with
 * no head ablated: means->layer[l] is (H_l,T,D). */
hl_status hl_heads_mean_outputs(const hl_gpt *m, const hl_eval_set *set, hl_head_means *means,
                                hl_error *err);

/* Head importance of Michel et al. (2019): for each batch one backward pass
 * of the set's loss (Σ_group mean cross-entropy) at gates 1, then
 * raw[l*n_heads + h] = the batch-size-weighted mean of |∂L/∂g_h| and
 * normalised = raw divided by its layer's L2 norm. Row stride is cfg.n_heads;
 * entries past a pruned layer's heads are NaN. normalised may be NULL. */
hl_status hl_heads_importance(const hl_gpt *m, const hl_eval_set *set, double *raw,
                              double *normalised, hl_error *err);
/* The current heads as flat indices l*cfg.n_heads + h into order, the most
 * important first: by normalised importance, NaN last, ties in layer and head
 * order. Returns how many (the ranking of heads importance, its CSV and the
 * pruning curve). */
int hl_heads_importance_order(const hl_gpt_config *c, const double *normalised, int *order);

#endif
