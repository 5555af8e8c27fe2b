/*
 * toy_task.h: the head-specialisation task of docs/toy-task.md — random
 * sequences with one repeated segment, where a 2-layer attention-only
 * transformer grows a previous-token head, a two-back head and induction heads.
 * The heads are scored by the detectors of analysis/detectors.h, induction on
 * the copied segment (the evaluation set's repeats).
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

/* The model of docs/toy-task.md: 2 layers of 4 heads, d_model 64, attention only. */
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

/* Sequence i's repeat (train/eval.h): the scored queries t = d..d+L-2, whose
 * token was seen d-s positions back; an induction head attends from t to
 * s+(t-d)+1. */
hl_repeat hl_toy_repeat(const hl_toy_batch *b, int i);

/* b's sequences as an evaluation set with the target groups "scored" and
 * "other" and their repeats, evaluated `batch` sequences at a time. */
hl_eval_set *hl_toy_eval_set(const hl_toy_batch *b, int batch, hl_error *err);

#endif
