/*
 * head_report.h: one self-contained report.html on which head does what in a
 * model — its config, the role table, every head's attention map, the
 * detectors heatmap, ablation and importance tables, composition heatmaps, a
 * circuit diagram, the causal check and (when given) the pruning curve — with
 * every CSV and PNG behind it in the same folder.
 *
 *     hl_head_report_opts o = {.model_path = path, .meta = &meta, .probe = {.bos = 16},
 *                              .map_tokens = x, .map_T = 32};
 *     if (hl_head_report_write(m, &o, "out/report", &err) != HL_OK) ...err.message...
 *
 * Files in dir: scores.csv, scores.png (and scores_text.csv with a text),
 * attn_L<l>H<h>.png, maps_grid.png, composition.csv, composition_{q,k,v}.png,
 * ablation_effects.csv, circuit.png, importance.csv and report.html.
 */
#ifndef HL_HEAD_REPORT_H
#define HL_HEAD_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/detectors.h"
#include "io/model_io.h"
#include "tasks/probe.h"
#include "train/eval.h"

typedef struct hl_head_report_opts {
    const char *model_path;       /* named in the title */
    const hl_gpt_meta *meta;      /* task, step, pruned heads; may be NULL */
    hl_probe_opts probe;          /* the induction probe (hl_probe_new) */
    const hl_vocab *vocab;        /* a text model's tokens, to label maps; NULL: numbers */
    const int32_t *map_tokens;    /* the input the maps are drawn on, map_T tokens */
    int map_T;
    const int32_t *text;          /* optional: detectors also on windows of this text, */
    size_t text_tokens;           /* as tokens */
    int text_windows;             /* 0: 64 */
    const hl_eval_set *eval;      /* ablation and importance on this set; NULL: the probe */
    const char *curve_png;        /* a pruning curve to include, or NULL */
} hl_head_report_opts;

hl_status hl_head_report_write(const hl_gpt *m, const hl_head_report_opts *o, const char *dir,
                               hl_error *err);

#endif
