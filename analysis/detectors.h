/*
 * detectors.h: what each attention head does, measured from its attention —
 * previous-token, duplicate-token, induction, first-token, local, self,
 * entropy — with copying from its weights (analysis/copying.h), for any
 * headlab GPT (toy_heads, charlm, pruned).
 *
 * The attention detectors average a head's attention probabilities A[t,·]
 * over query positions t >= 1 of a set of sequences x:
 *   previous_token   A[t,t-1]
 *   two_back         A[t,t-2], t >= 2
 *   duplicate_token  Σ A[t,j] over j < t with x_j = x_t (queries with such a j)
 *   induction        on a set that knows where its sequences repeat themselves
 *                    (hl_eval_set.repeats: the probe of tasks/probe.h, the toy
 *                    task's copied segment): A[t, t-lag+1] over the repeat's
 *                    queries, attention to the token right after the query's
 *                    first occurrence (prefix matching); on text:
 *                    Σ A[t,j+1] over j < t-3 with x_j = x_t (queries with such
 *                    a j). A target one or two back would be the previous-token
 *                    or two-back position: a lag under 4 gives NaN, and text
 *                    matches that close are left out.
 *   first_token      A[t,0]
 *   local            Σ A[t,j] over t-3 <= j <= t-1 (within 3 back, not self)
 *   self             A[t,t]
 *   entropy          -Σ_j A[t,j] ln A[t,j], in nats
 * Ours average only over queries that have a match (duplicate, text
 * induction); TransformerLens's detect_head divides by all of the pattern.
 * Its three, as it computes them (error_measure "mul", exclude_bos and
 * exclude_current_token off), are reported beside ours: per sequence,
 * Σ_{t,j} A[t,j] P[t,j] / Σ_{t,j} A[t,j] over every row t (0 included), the
 * mean over the sequences, with P
 *   previous_token_tl   P[t,t-1] = 1
 *   duplicate_token_tl  P[t,j] = 1 for j < t with x_j = x_t
 *   induction_tl        P[t,j] = 1 for 1 <= j <= t with x_{j-1} = x_t
 * (on the probe about half of ours: the first half's rows count, with little
 * to match). The probe's BOS, when it has one, is in the sequence, as
 * TransformerLens's to_tokens puts one.
 * What the scores make of a head (its roles) is analysis/roles.h.
 *
 *     hl_probe probe;
 *     hl_probe_new(m, &(hl_probe_opts){.bos = 16}, &probe, &err);
 *     hl_head_scores s[L * n_heads];                    // row stride cfg.n_heads
 *     hl_heads_detect(m, probe.set, NULL, s, &err);
 *     hl_probe_free(&probe);
 */
#ifndef HL_DETECTORS_H
#define HL_DETECTORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"
#include "models/gpt.h"
#include "train/eval.h"

typedef enum hl_detector {
    HL_DETECT_PREVIOUS,
    HL_DETECT_DUPLICATE,
    HL_DETECT_INDUCTION,
    HL_DETECT_COPYING,
    HL_DETECT_FIRST,
    HL_DETECT_LOCAL,
    HL_DETECT_SELF,
    HL_DETECT_ENTROPY,
    HL_DETECT_TWO_BACK,
    /* TransformerLens's detect_head (error_measure "mul", no exclusions) */
    HL_DETECT_PREVIOUS_TL,
    HL_DETECT_DUPLICATE_TL,
    HL_DETECT_INDUCTION_TL,
    HL_DETECTORS
} hl_detector;

/* "previous_token", ... as in scores.csv; short: "prev", "dup", ... (<= 8). */
const char *hl_detector_name(hl_detector d);
const char *hl_detector_short(hl_detector d);

typedef struct hl_head_scores {
    double v[HL_DETECTORS]; /* NaN where nothing was measured */
} hl_head_scores;

/* ---- attention detectors from maps (no model) --------------------------- */

typedef struct hl_detector_sums {
    int H;
    /* Bits (1u << d) of the detectors not measured (left NaN): entropy and the
     * matches cost a pass over each row, the rest one read. begin clears it. */
    unsigned skip;
    double sum[HL_HEADS_MAX][HL_DETECTORS];
    double count[HL_DETECTORS];
} hl_detector_sums;

void hl_detector_sums_begin(hl_detector_sums *s, int H);
/* tokens (B,T) and their attention attn (B,H,T,T); repeats (B) where each
 * sequence repeats itself (hl_eval_set.repeats), or NULL for text. The heads
 * are summed in parallel, each in the same order at any thread count. */
hl_status hl_detector_sums_add(hl_detector_sums *s, const int32_t *tokens, const hl_tensor *attn,
                               const hl_repeat *repeats, hl_error *err);
/* The means of the attention detectors; copying and skipped ones are NaN. */
void hl_detector_sums_finish(const hl_detector_sums *s, hl_head_scores *out /* H */);

/* ---- every head of a model ----------------------------------------------- */

/* Every head's detectors on set (induction from its repeats when it has them)
 * with the run's gates and offsets (run may be NULL; its trace is ignored), and its
 * copying score (analysis/copying.h). out has cfg.n_layers * cfg.n_heads entries, row stride
 * cfg.n_heads; entries past a pruned layer's heads are NaN. */
hl_status hl_heads_detect(const hl_gpt *m, const hl_eval_set *set, const hl_gpt_run *run,
                          hl_head_scores *out, hl_error *err);

#endif
