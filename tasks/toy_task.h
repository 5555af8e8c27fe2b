/*
 * toy_task.h: the head-specialisation task of TOYTASK.md — random sequences
 * with one repeated segment, where a 2-layer attention-only transformer grows
 * a previous-token head, a 2-back head and induction heads — and the per-head
 * scores that show it.
 *
 * A sequence has T = 32 tokens: x[0] = BOS (16), x[1..31] uniform over 0..15;
 * then a segment of length L ~ U{4..12} starting at s ~ U{1..T-2L} is copied to
 * d ~ U{s+L..T-L}. The logits at position p predict x[p+1]. Targets at
 * positions p = d..d+L-2 (predicting the copied tokens after the first) are
 * "scored"; every other target is "other"; position T-1 has none.
 *
 *     hl_toy_batch *b = hl_toy_batch_new(32);
 *     hl_toy_sample(b, &rng);
 *     loss = CE(logits, b->scored) + CE(logits, b->other)     // ignore index -1
 */
#ifndef HL_TOY_TASK_H
#define HL_TOY_TASK_H

#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "models/gpt.h"
#include "train/eval.h"

#define HL_TOY_VOCAB 16 /* content tokens 0..15 */
#define HL_TOY_BOS 16
#define HL_TOY_T 32
#define HL_TOY_IGNORE (-1)
/* The held-out set every program evaluates toy models on. */
#define HL_TOY_HELDOUT_SEED 1000003
#define HL_TOY_HELDOUT_SEQUENCES 1000
#define HL_TOY_HELDOUT_BATCH 250 /* sequences per forward pass */

/* TOYTASK.md's model: 2 layers of 4 heads, d_model 64, attention only. */
hl_gpt_config hl_toy_gpt_config(void);

typedef struct hl_toy_batch {
    int B;
    int32_t *tokens;  /* (B,T) */
    int32_t *scored;  /* (B,T): x[p+1] at the scored positions, else -1 */
    int32_t *other;   /* (B,T): x[p+1] at the other positions, else -1 */
    int *src, *dst, *len; /* (B): the segment of each sequence */
} hl_toy_batch;

hl_toy_batch *hl_toy_batch_new(int B);
void hl_toy_batch_free(hl_toy_batch *b);
/* Fills all B sequences from rng, one after another (so one batch of 2n
 * sequences holds what two batches of n drawn in turn hold). */
void hl_toy_sample(hl_toy_batch *b, hl_rng *rng);
/* Rows [begin, end) of b as a batch of their own (a view into b's arrays). */
hl_toy_batch hl_toy_batch_rows(const hl_toy_batch *b, int begin, int end);

/* b's sequences as an evaluation set with the target groups "scored" and
 * "other", evaluated `batch` sequences at a time. */
hl_eval_set *hl_toy_eval_set(const hl_toy_batch *b, int batch, hl_error *err);

/* Per-head scores over a set of sequences, from attention maps. */
typedef struct hl_toy_head_scores {
    double previous_token; /* mean A[t,t-1], t >= 1 */
    double two_back;       /* mean A[t,t-2], t >= 2 */
    double induction;      /* mean A[t, s+(t-d)+1], t = d..d+L-2 */
    double first_token;    /* mean A[t,0], t >= 1 */
    double entropy;        /* mean -Σ_j A ln A, t >= 1, nats */
} hl_toy_head_scores;

/* Heads per layer the scorer keeps sums for. */
#define HL_TOY_MAX_HEADS 64

/* Running sums for the scores of H heads; add batches, then finish. */
typedef struct hl_toy_score_sums {
    int H;
    double sums[HL_TOY_MAX_HEADS][5];
    double counts[5];
} hl_toy_score_sums;

/* HL_ERR_ARG (and a scorer of 0 heads) unless 1 <= H <= HL_TOY_MAX_HEADS. */
hl_status hl_toy_scores_begin(hl_toy_score_sums *s, int H, hl_error *err);
/* attn (B,H,T,T) for the batch's sequences. */
void hl_toy_scores_add(hl_toy_score_sums *s, const hl_toy_batch *b, const hl_tensor *attn);
void hl_toy_scores_finish(const hl_toy_score_sums *s, hl_toy_head_scores *out /* H */);

#endif
