/*
 * patching.h: which head carries the information that makes the difference
 * between two inputs — activation patching, path patching and attribution
 * patching between a clean and a corrupted input, and, on one input, direct
 * logit attribution and the logit lens. Conventions are TransformerLens's
 * (patching.py, ActivationCache.logit_attrs, accumulated_resid).
 *
 * A task is a clean and a corrupted batch of the same shape and a metric read
 * on the logits at the positions that have an answer, soft-capped as the
 * model predicts with them when it caps (hl_gpt_logit):
 *   HL_METRIC_LOSS        mean cross-entropy of the answer token (lower is better)
 *   HL_METRIC_LOGIT_DIFF  mean logit[answer] - logit[wrong]
 * Patching results are normalised as the field does,
 *   (metric patched - metric corrupted) / (metric clean - metric corrupted),
 * so 0 means "as corrupted" and 1 "as clean", whichever way the metric runs.
 *
 *     hl_patch_task t = {.B = B, .T = T, .clean = x, .corrupt = x2, .answer = y,
 *                        .metric = HL_METRIC_LOSS};
 *     double score[L * n_heads];                        // row stride cfg.n_heads
 *     hl_patch_heads(m, &t, HL_ACT_Z, false, score, &err);   // activation patching
 *     hl_patch_attrib_heads(m, &t, HL_ACT_Z, false, score, &err);  // its linear estimate
 *
 * The model is never changed (its parameters' gradients are left zeroed).
 */
#ifndef HL_PATCHING_H
#define HL_PATCHING_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "models/gpt.h"
#include "models/head_set.h"

typedef enum hl_patch_metric { HL_METRIC_LOSS, HL_METRIC_LOGIT_DIFF } hl_patch_metric;

typedef struct hl_patch_task {
    int B, T;
    const int32_t *clean, *corrupt; /* (B,T) tokens */
    const int32_t *answer;          /* (B,T): the right next token where the metric reads, else -1 */
    const int32_t *wrong;           /* (B,T): the wrong one (logit difference), else -1; NULL for loss */
    hl_patch_metric metric;
} hl_patch_task;

/* The induction task: `sequences` sequences of n random tokens in [lo, hi)
 * repeated once, after BOS when bos >= 0 (n as many as fit in n_ctx).
 * Corrupted: the first half's tokens at even offsets drawn again (each
 * different), the rest kept. Scored at the second half's even offsets j,
 * whose answer r[j+1] sits at a kept, odd offset of the first half: the
 * corrupted run still holds the answer in place, only the label saying that
 * r[j] comes before it (a previous-token head's output) is wrong. The wrong
 * token (logit difference) is the one that took r[j]'s place in the first
 * half. The task's arrays live in *buf (free it); metric HL_METRIC_LOSS. */
hl_status hl_patch_induction_task(const hl_gpt *m, int sequences, int bos, int lo, int hi,
                                  uint64_t seed, hl_patch_task *t, int32_t **buf,
                                  hl_error *err);

/* The metric on the clean and on the corrupted input. HL_ERR_ARG when the task
 * does not fit the model (tokens, lengths, no scored position, a logit
 * difference without wrong tokens) or the two runs score the same. */
hl_status hl_patch_baselines(const hl_gpt *m, const hl_patch_task *t, double *clean,
                             double *corrupt, hl_error *err);

/* Each sequence's metric over its own scored positions on the clean and on
 * the corrupted input, into clean[b] and corrupt[b] (B each; NaN for a
 * sequence without one): which inputs of a dataset make the difference.
 * HL_ERR_ARG as hl_patch_baselines, except that runs scoring the same are
 * no error here. */
hl_status hl_patch_sequence_metrics(const hl_gpt *m, const hl_patch_task *t, double *clean,
                                    double *corrupt, hl_error *err);

/* Activation patching: every head's `act` (HL_ACT_Z, _Q, _K, _V, _PATTERN)
 * from the clean run into the corrupted one, one head at a time over all
 * positions, or per_position one (head, query position) at a time; the
 * normalised metric into out[l * n_heads + h] or out[(l * n_heads + h) * T + t]
 * (entries past a pruned layer's heads NaN). The heads of a layer (and the
 * positions) run as one batch: L forward passes, split when the copies of
 * the task would exceed HL_PATCH_MAX_ROWS sequences or about
 * HL_EVAL_PASS_BYTES of logits and activations; the task's own B
 * sequences (a pairs file's pairs) always run together, so its memory grows
 * with B (analysis/patch_pairs.h caps B). */
#define HL_PATCH_MAX_ROWS 256
hl_status hl_patch_heads(const hl_gpt *m, const hl_patch_task *t, hl_act act, bool per_position,
                         double *out, hl_error *err);

/* The residual stream entering each layer (and, at l = n_layers, leaving the
 * last), patched at one position at a time: out[l * T + t], (L+1)·T values. */
hl_status hl_patch_resid(const hl_gpt *m, const hl_patch_task *t, double *out, hl_error *err);

/* Path patching (direct path): sender head A's clean-minus-corrupted output,
 * through W_O, added to the residual stream that receiver head B of a later
 * layer reads for its `act` (HL_ACT_Q, _K or _V) only; everything else is
 * the corrupted run's, and the layers after B run as usual. out[s * N + r]
 * over flat head indices (hl_gpt_head_index; N = hl_gpt_total_heads), NaN
 * where the receiver is not in a later layer than the sender. */
hl_status hl_patch_paths(const hl_gpt *m, const hl_patch_task *t, hl_act act, double *out,
                         hl_error *err);
/* The same from the senders in `senders` alone (current indices; NULL: every
 * head), the other senders' rows NaN: one pass per sender and receiver, so a
 * few senders of a 12 x 12 model take minutes where all of them take hours. */
hl_status hl_patch_paths_from(const hl_gpt *m, const hl_patch_task *t, hl_act act,
                              const hl_head_set *senders, double *out, hl_error *err);

/* Attribution patching: the first-order estimate of hl_patch_heads,
 * Σ (a_clean - a_corrupted)·∂metric/∂a at the corrupted run, normalised the
 * same way, from a clean forward and one corrupted forward and backward. */
hl_status hl_patch_attrib_heads(const hl_gpt *m, const hl_patch_task *t, hl_act act,
                                bool per_position, double *out, hl_error *err);

/* Direct logit attribution on the clean input: each head's output through
 * W_O, divided by the final norm's scale of the forward pass (frozen; centred
 * first under LayerNorm, not under RMSNorm), times its gain, read on the answer's unembedding (minus the wrong
 * token's for a logit difference); the mean over the scored positions, into
 * out[l * n_heads + h]. Biases and the rest of the stream are not counted. */
hl_status hl_patch_logit_attribution(const hl_gpt *m, const hl_patch_task *t, double *out,
                                     hl_error *err);

/* The logit lens on the clean input: the residual stream entering each layer
 * and leaving the last (l = 0..n_layers) read through the final norm
 * (LayerNorm or RMSNorm with its own statistics, as the model's) and the unembedding: the metric at the
 * scored positions into metric[l], and the k most likely tokens of sequence 0
 * at each position into top[(l * T + t) * k + i] (most likely first). */
hl_status hl_patch_logit_lens(const hl_gpt *m, const hl_patch_task *t, int k, double *metric,
                              int32_t *top, hl_error *err);

#endif
