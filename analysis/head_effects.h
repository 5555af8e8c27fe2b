/*
 * head_effects.h: the causal side of a circuit — how much a later head's own
 * detector score (hl_head_main_detector: induction for an induction head)
 * falls when one earlier head is zero-ablated (hl_heads_run_ablate).
 *
 *     hl_ablation_effect *rows;
 *     int n;
 *     int k = hl_heads_ablation_sequences(m, probe.set);
 *     hl_heads_ablation_effects(m, probe.set, k, scores, &rows, &n, &err);
 *     ... rows[i].before, rows[i].after ...
 *     free(rows);
 */
#ifndef HL_HEAD_EFFECTS_H
#define HL_HEAD_EFFECTS_H

#include "analysis/detectors.h"

typedef struct hl_ablation_effect {
    int src_layer, src_head;  /* the head ablated */
    int dst_layer, dst_head;  /* the later head measured */
    hl_detector detector;     /* dst's own detector */
    double before, after;     /* its score without and with src ablated */
} hl_ablation_effect;

/* The work a study that reruns the model once per head does by default, in
 * blocks run on one position: about two minutes of GPT-2 small on 2 cores. */
#define HL_SWEEP_WORK (1 << 21)

/* The sequences of set a sweep reads by default: all of a small model's, and
 * as many as keep the work within HL_SWEEP_WORK (summed over the ablations:
 * the blocks from the ablated head's layer on; a GPT-2-small-sized model: 8
 * sequences of 256 positions). */
int hl_heads_ablation_sequences(const hl_gpt *m, const hl_eval_set *set);

/* One row for every head d of layer >= 1 and every head s of an earlier
 * layer, ordered by d then s, over the first `sequences` sequences of set
 * (before and after both). d's detector is its main one on scores (every
 * head's detectors, hl_heads_detect; row stride cfg.n_heads). *out is
 * malloc'ed (the caller frees it); NULL with *n = 0 for a one-layer model. */
hl_status hl_heads_ablation_effects(const hl_gpt *m, const hl_eval_set *set, int sequences,
                                    const hl_head_scores *scores, hl_ablation_effect **out,
                                    int *n, hl_error *err);

#endif
