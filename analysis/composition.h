/*
 * composition.h: how heads in different layers compose (Elhage et al. 2021),
 * scored as TransformerLens's HookedTransformer.all_composition_scores does.
 *
 * In TransformerLens's orientation (row vectors, x·W) head h has
 * W_QK = W_Q·W_Kᵀ and W_OV = W_V·W_O, both (d_model,d_model). A source head
 * s writes W_OV^s into the residual stream that a later head d reads:
 *
 *     Q-composition  ‖W_OV^s · W_QK^d ‖_F / (‖W_OV^s‖_F ‖W_QK^d‖_F)
 *     K-composition  ‖W_OV^s · W_QK^dᵀ‖_F / (‖W_OV^s‖_F ‖W_QK^d‖_F)
 *     V-composition  ‖W_OV^s · W_OV^d ‖_F / (‖W_OV^s‖_F ‖W_OV^d‖_F)
 *
 * With LayerNorm, the weights are first processed as TransformerLens's
 * from_pretrained does by default: each LayerNorm gain is folded into the
 * weights that read its output (W_Q, W_K, W_V by ln1), those reading weights
 * are centred over d_model (fold_layer_norm, center_weights), and W_O is
 * centred over d_model (center_writing_weights). With RMSNorm the gain is
 * folded in and nothing is centred (RMSNorm keeps the mean). Without a norm
 * the weights are used as they are.
 *
 * With rotary positions the QK circuit of a query at t and a key at s is
 * W_Q·R(s-t)·W_Kᵀ, R a rotation of each head's pairs of dimensions by the
 * offset's angles: the scores above, from W_Q and W_K alone (as
 * TransformerLens computes them for rotary models), describe the offset 0.
 * V-composition does not involve the rotation. Smeared keys mix each key
 * with its predecessor before the rotation; W_K is read as it is. Norms are computed from the (d_head,d_head)
 * Gram matrices of the factors, never the (d_model,d_model) products.
 *
 *     int n = hl_gpt_total_heads(&m->cfg);
 *     double *k = malloc(sizeof *k * n * n);         // (src, dst) by flat head index
 *     hl_composition_scores(m, HL_COMPOSE_K, k, &err);
 *     double base = hl_composition_baseline(m->cfg.d_model, head_dim, 1000, 0);
 *
 * Heads are numbered by a flat index over the model at hand: layer l's heads
 * come after those of layers 0..l-1 (hl_gpt_head_index), so pruned models
 * work like any other.
 */
#ifndef HL_COMPOSITION_H
#define HL_COMPOSITION_H

#include <stdint.h>

#include "core/error.h"
#include "models/gpt.h"

typedef enum hl_compose_kind { HL_COMPOSE_Q, HL_COMPOSE_K, HL_COMPOSE_V, HL_COMPOSE_KINDS } hl_compose_kind;

/* "q", "k" or "v". */
const char *hl_compose_kind_name(hl_compose_kind kind);

/* One head's weights in PyTorch's orientation (y = W·x), as doubles, after
 * the processing described above. */
typedef struct hl_head_weights {
    int E, D;           /* d_model and the head's width */
    double *q, *k, *v;  /* (D,E) each: its rows of the in-projection */
    double *o;          /* (E,D): its columns of the out-projection */
} hl_head_weights;

hl_status hl_head_weights_get(const hl_gpt *m, int l, int h, hl_head_weights *w, hl_error *err);
void hl_head_weights_free(hl_head_weights *w);

/* scores (N,N), N = hl_gpt_total_heads, row = source head, column =
 * destination head: the kind's score where the source's layer is below the
 * destination's, NaN elsewhere. */
hl_status hl_composition_scores(const hl_gpt *m, hl_compose_kind kind, double *scores,
                                hl_error *err);

/* The mean score of `samples` pairs of random matrices of the same shapes:
 * each side a product of (E,D) and (D,E) factors with N(0,1) entries (the
 * same for every kind, since a transpose does not change the distribution). */
double hl_composition_baseline(int E, int D, int samples, uint64_t seed);

#endif
