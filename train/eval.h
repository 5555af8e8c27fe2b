/*
 * eval.h: evaluation sets and the loop that scores a model on one.
 *
 * An evaluation set is a fixed set of token sequences (N,T) with one or more
 * groups of targets (the toy task has "scored" and "other"; a text has one),
 * each group scored on its own: mean cross-entropy (the model's loss,
 * hl_gpt_loss: soft-capped when its config says so) and argmax accuracy.
 * Batches are taken in order, `batch` sequences at a time (the last may have
 * fewer), so results never depend on anything but the set and the model.
 *
 *     hl_eval_set *set = hl_eval_set_new(1000, 32, 2, 250, &err);   // then fill it
 *     hl_eval_result r;
 *     hl_eval_loss(m, set, NULL, NULL, NULL, &r, &err);              // eval mode, no grads
 *
 *     for (hl_eval_batch b = {0}; hl_eval_set_next(set, &b);)      // or batch by batch
 *         ... hl_gpt_forward(g, m, b.tokens, b.B, set->T, NULL) ...
 */
#ifndef HL_EVAL_H
#define HL_EVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"
#include "models/gpt.h"

#define HL_EVAL_MAX_GROUPS 4
#define HL_EVAL_IGNORE (-1)

/* Where a sequence repeats an earlier stretch of itself: each query t in
 * [begin, end) holds the token seen `lag` positions back, so the token that
 * followed that first occurrence is at t - lag + 1 (where an induction head
 * looks). begin == end: no repeat is known. */
typedef struct hl_repeat {
    int begin, end, lag;
} hl_repeat;

/* Tokens per half at most of a repeated-random-tokens set when its length is
 * left to the context (the probe, tasks/probe.h; patching's induction task,
 * analysis/patching.h): a GPT-2-sized context of 1,024 would make every
 * traced sequence hold 144 (1,024 x 1,024) attention maps, and circuits'
 * causal check runs the probe once per head. Contexts up to 257 keep their
 * whole half. */
#define HL_REPEAT_HALF_MAX 128

/* A forward pass of hl_eval_loss holds at most about this many bytes of
 * logits and traced attention: larger batches are split (train/eval.c). */
#define HL_EVAL_PASS_BYTES (1024.0 * 1024 * 1024)

typedef struct hl_eval_set {
    int n, T;        /* sequences and positions */
    int batch;       /* sequences per forward pass (the last pass may have fewer) */
    int n_groups;    /* 1..HL_EVAL_MAX_GROUPS */
    char group_names[HL_EVAL_MAX_GROUPS][16];
    int32_t *tokens;                       /* (n,T) */
    int32_t *targets[HL_EVAL_MAX_GROUPS];  /* (n,T) each; HL_EVAL_IGNORE where none */
    hl_repeat *repeats;                    /* (n), or NULL: where each sequence repeats
                                              itself (the probe, the toy task) */
} hl_eval_set;

/* Tokens zeroed, every target HL_EVAL_IGNORE, groups named "g0", "g1", ...
 * NULL, with the reason in err, on bad sizes or no memory. */
hl_eval_set *hl_eval_set_new(int n, int T, int n_groups, int batch, hl_error *err);
void hl_eval_set_free(hl_eval_set *set);
/* Gives the set its repeats (set->repeats, n entries, none known yet); the set
 * frees them. */
hl_status hl_eval_set_add_repeats(hl_eval_set *set, hl_error *err);

/* Every token inside the model's vocabulary, every target inside its outputs
 * (or ignored), T within its context, and every repeat (if any) inside its
 * sequence. */
hl_status hl_eval_set_check(const hl_eval_set *set, const hl_gpt *m, hl_error *err);
/* HL_ERR_ARG, the message starting with `who`, unless each of the n repeats
 * lies inside its T positions (its queries and what they look back at). */
hl_status hl_eval_repeats_check(const hl_repeat *repeats, int n, int T, const char *who,
                                hl_error *err);

/* One batch of a set: sequences first..first+B-1. */
typedef struct hl_eval_batch {
    int first, B;
    const int32_t *tokens;                          /* (B,T) */
    const int32_t *targets[HL_EVAL_MAX_GROUPS];     /* (B,T) per group */
    const hl_repeat *repeats;                       /* (B), or NULL as in the set */
} hl_eval_batch;

/* Advances b to the set's next batch (start with b zeroed); false after the
 * last. */
bool hl_eval_set_next(const hl_eval_set *set, hl_eval_batch *b);

typedef struct hl_eval_result {
    double loss[HL_EVAL_MAX_GROUPS];     /* mean cross-entropy over the group's targets */
    double accuracy[HL_EVAL_MAX_GROUPS]; /* fraction of them predicted by the argmax */
    int64_t count[HL_EVAL_MAX_GROUPS];   /* targets in the group */
    double total_loss;                   /* Σ_group loss */
} hl_eval_result;

/* Sequences per forward pass: the set's batch, or fewer where a pass would
 * hold more than HL_EVAL_PASS_BYTES of logits and, traced, attention
 * probabilities. */
int hl_eval_pass_batch(const hl_gpt *m, const hl_eval_set *set, bool traced);

/* Called after each batch's forward pass with its logits (B,T,V) and, when the
 * run asks for one, its trace. */
typedef hl_status (*hl_eval_hook)(void *ctx, const hl_eval_batch *b, const hl_tensor *logits,
                                  const hl_gpt_run *run, hl_error *err);

/* Loss and accuracy of every target group over the set, in eval mode (no
 * dropout, no gradients), with the run's gates, offsets and trace (run and
 * hook may be NULL). m is not changed. */
hl_status hl_eval_loss(const hl_gpt *m, const hl_eval_set *set, const hl_gpt_run *run,
                       hl_eval_hook hook, void *ctx, hl_eval_result *out, hl_error *err);

/* -log softmax(row)[target] over V logits, in double, the logits first
 * soft-capped as cfg's model caps them (hl_gpt_logit; cfg NULL: not). */
double hl_eval_token_loss(const hl_gpt_config *cfg, const hl_real *row, int V, int32_t target);

/* hl_eval_loss (with the run's gates, offsets and patches; run may be NULL),
 * and the mean loss of the first target group at each position t = 0..T-1
 * into position_loss (NaN where no target is scored). */
hl_status hl_eval_position_loss(const hl_gpt *m, const hl_eval_set *set, const hl_gpt_run *run,
                                double *position_loss, hl_eval_result *out, hl_error *err);

/* The mean of token_weight[target] over the first group's targets at each
 * position (NaN where none): with a token's bytes as its weight, the bytes
 * each position predicts. */
void hl_eval_position_weights(const hl_eval_set *set, const double *token_weight,
                              double *position_weight);
/* The mean of token_weight[target] over all of a group's targets (NaN when it
 * has none): e.g. its bytes per target. */
double hl_eval_mean_weight(const hl_eval_set *set, int group, const double *token_weight);

/* The in-context-learning score of a per-position loss (Olsson et al. 2022:
 * the loss late in the context minus the loss early in it; negative when the
 * model uses the context): the mean over positions [late0, late1) minus the
 * mean over [early0, early1), in nats per token; with position_weight (the
 * bytes per position, hl_eval_position_weights), each range's loss over its
 * bytes instead, in nats per byte (exact when every window scores every
 * position, as text windows do). The ranges, for a context of T positions,
 * early = [0.16 T, 0.24 T) and late = [0.78 T, 0.98 T), rounded down (T = 256:
 * positions 40..60 and 199..249, around Olsson et al.'s tokens 50 and 500 of
 * 512 scaled). NaN when T < 9, where the early range holds no position. */
void hl_eval_icl_ranges(int T, int *early0, int *early1, int *late0, int *late1);
double hl_eval_icl_score(const double *position_loss, const double *position_weight, int T);

/* Evenly spaced windows of T+1 tokens of a text (its bytes, or as a
 * vocabulary encoded it: text/vocab.h) as an evaluation set (inputs and next
 * tokens, one group "text"). HL_ERR_ARG when the text is shorter than T+1
 * tokens. */
hl_eval_set *hl_eval_text_windows(const int32_t *text, size_t size, int windows, int T, int batch,
                                  hl_error *err);

/* Reads tokens at..at+n-1 of a text into out (a text not held in memory, e.g.
 * a token file: data/token_file.h). */
typedef hl_status (*hl_text_read_fn)(void *ctx, size_t at, size_t n, int32_t *out, hl_error *err);
/* hl_eval_text_windows over a text of size tokens that read gives; its errors
 * pass through. */
hl_eval_set *hl_eval_text_windows_read(hl_text_read_fn read, void *ctx, size_t size, int windows,
                                       int T, int batch, hl_error *err);

/* Repeated text: evenly spaced windows of `half` tokens of a text, each
 * followed by itself (2*half tokens), as an evaluation set with the groups
 * "repeat" (the targets of the second half: predictable by looking back) and
 * "first" (the first half's, but its first token). HL_ERR_ARG when the text
 * is shorter than half tokens or half < 2. */
hl_eval_set *hl_eval_repeat_windows(const int32_t *text, size_t size, int windows, int half,
                                    int batch, hl_error *err);

#endif
