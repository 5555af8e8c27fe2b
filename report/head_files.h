/*
 * head_files.h: the files of a head study — CSV tables and PNG pictures of
 * detectors, attention maps, composition scores and ablation effects, and the
 * circuit diagram. Heads are named L<layer>H<head> by their index in the
 * model at hand (also in pruned models). Every file is written atomically.
 *
 *     hl_detectors_write_csv("out/scores.csv", m, scores, &err);
 *     hl_detectors_write_png("out/scores.png", m, scores, log(probe_T), "detectors", &err);
 */
#ifndef HL_HEAD_FILES_H
#define HL_HEAD_FILES_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis/composition.h"
#include "analysis/detectors.h"
#include "analysis/head_effects.h"
#include "models/head_set.h"
#include "text/vocab.h"

/* "L1H3" into buf: head h of layer l of m, named by its index as trained
 * (the same name before and after pruning; models/head_set.h). */
#define HL_HEAD_NAME_MAX 24
const char *hl_head_name(const hl_gpt *m, int l, int h, char buf[HL_HEAD_NAME_MAX]);

/* layer,head and every detector by name (previous_token, ..., induction_tl):
 * one row per head (scores with row stride cfg.n_heads). */
hl_status hl_detectors_write_csv(const char *path, const hl_gpt *m, const hl_head_scores *scores,
                                 hl_error *err);

/* Heads (rows) by detectors (columns) on a 0..1 scale: entropy divided by
 * entropy_max (ln T of the sequences), copying below 0 drawn as 0. */
hl_status hl_detectors_write_png(const char *path, const hl_gpt *m, const hl_head_scores *scores,
                                 double entropy_max, const char *title, hl_error *err);

/* kind,src,dst,score for every pair of heads in different layers, q then k then v. */
hl_status hl_composition_write_csv(const char *path, const hl_gpt *m,
                                   const double *const scores[HL_COMPOSE_KINDS], hl_error *err);

/* One kind's scores, sources (rows) by destinations (columns), 0..max, with
 * the random baseline in the title; pairs that cannot compose are blank (0). */
hl_status hl_composition_write_png(const char *path, const hl_gpt *m, hl_compose_kind kind,
                                   const double *scores, double baseline, hl_error *err);

/* layer,head,importance,raw,rank for every head, head its original index
 * and rank 1 the most important (ties in layer and head order), from raw and
 * norm as hl_heads_importance fills them: heads importance's CSV. */
hl_status hl_importance_write_csv(const char *path, const hl_gpt *m, const double *raw,
                                  const double *norm, hl_error *err);

/* src,dst,detector,before,after. */
hl_status hl_ablation_effects_write_csv(const char *path, const hl_gpt *m,
                                        const hl_ablation_effect *rows, int n, hl_error *err);

/* Every head in `which` (NULL: all): dir/attn_L<l>H<h>.png, the head's map
 * with the input's tokens on both axes (hl_token_label with vocab), and dir/maps_grid.png,
 * the chosen heads side by side, labelled with their roles when scores is not
 * NULL. maps (N,T,T) as hl_heads_attention returns. Cells shrink with T, so a
 * head's picture stays within about 1,024 pixels a side and a grid tile within
 * 256; past 256 tokens the grid shows the largest weight of each block of
 * tokens, without token labels. */
hl_status hl_maps_write(const char *dir, const hl_gpt *m, const hl_tensor *maps,
                        const int32_t *tokens, const hl_vocab *vocab, const hl_head_set *which,
                        const hl_head_scores *scores, hl_error *err);

/* Heads as nodes (a row per layer), and for each kind its strongest pairs
 * above the baseline as edges (at most one per destination head and kind),
 * wider for stronger scores. */
hl_status hl_circuit_diagram_write(const char *path, const hl_gpt *m,
                                   const double *const scores[HL_COMPOSE_KINDS],
                                   const double baseline[HL_COMPOSE_KINDS], hl_error *err);

#endif
