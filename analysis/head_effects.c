/* Detector scores of later heads with an earlier head ablated: see head_effects.h.
 *
 * Ablating head (l, h) leaves the residual stream entering layer l as it was,
 * so each batch runs the blocks once (no unembedding: no logits are read),
 * keeping that stream at every layer, and each ablation reruns only the
 * blocks from l on (hl_gpt_forward_from). Over GPT-2 small's 132 heads outside
 * the last layer that is 936 block passes, where whole forward passes would
 * be 1,584 and 132 unembeddings. Only the detectors that can be a head's main
 * one are measured (hl_head_main_detector), and each later head keeps the sum
 * of its own alone. */
#include "analysis/head_effects.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/heads.h"
#include "analysis/roles.h"
#include "core/graph.h"

int hl_heads_ablation_sequences(const hl_gpt *m, const hl_eval_set *set)
{
    const hl_gpt_config *c = &m->cfg;
    double per_sequence = 0;
    for (int l = 0; l + 1 < c->n_layers; l++)
        per_sequence += (double)hl_gpt_layer_heads(c, l) * (c->n_layers - l) * set->T;
    const double fit = per_sequence > 0 ? HL_SWEEP_WORK / per_sequence : set->n;
    return fit >= set->n ? set->n : fit >= 1 ? (int)fit : 1;
}

/* The detectors hl_head_main_detector chooses among; the rest are skipped. */
static unsigned main_detectors_only(void)
{
    const unsigned main = 1u << HL_DETECT_PREVIOUS | 1u << HL_DETECT_DUPLICATE |
                          1u << HL_DETECT_INDUCTION | 1u << HL_DETECT_FIRST |
                          1u << HL_DETECT_SELF;
    return ~main & ((1u << HL_DETECTORS) - 1);
}

typedef struct {
    const hl_gpt *m;
    int L, N;
    hl_detector *main;       /* N: each head's main detector, by flat index */
    hl_detector_sums *clean; /* L: no head ablated */
    hl_detector_sums *batch; /* one layer of one ablated pass, this batch */
    double *after;           /* N * N: [i * N + j], head j's main detector, head i ablated */
    hl_tensor *gate[HL_GPT_MAX_LAYERS];
} sweep;

static hl_status sweep_begin(sweep *w, const hl_gpt *m, const hl_head_scores *scores,
                             hl_error *err)
{
    const hl_gpt_config *c = &m->cfg;
    *w = (sweep){.m = m, .L = c->n_layers, .N = hl_gpt_total_heads(c)};
    w->clean = malloc(sizeof *w->clean * (size_t)w->L);
    w->batch = malloc(sizeof *w->batch);
    w->after = calloc((size_t)w->N * w->N, sizeof *w->after);
    w->main = malloc(sizeof *w->main * (size_t)w->N);
    if (!w->clean || !w->batch || !w->after || !w->main)
        return hl_error_set(err, HL_ERR_NOMEM, "ablation effects: out of memory");
    for (int l = 0; l < w->L; l++) {
        hl_detector_sums_begin(&w->clean[l], hl_gpt_layer_heads(c, l));
        w->clean[l].skip = main_detectors_only();
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++)
            w->main[hl_gpt_head_index(c, l, h)] =
                hl_head_main_detector(&scores[l * c->n_heads + h]);
        int H = hl_gpt_layer_heads(c, l);
        if (!(w->gate[l] = hl_tensor_new_checked("gate", 1, &H, false, err)))
            return err->status;
        hl_tensor_fill(w->gate[l], 1);
    }
    return HL_OK;
}

static void sweep_free(sweep *w)
{
    free(w->clean);
    free(w->batch);
    free(w->after);
    free(w->main);
    for (int l = 0; l < w->L; l++)
        hl_tensor_free(w->gate[l]);
}

/* Adds one ablated pass's maps of layers after sl to the sums of flat head i. */
static hl_status add_ablated(sweep *w, int i, int sl, const hl_eval_batch *b,
                             const hl_mha_trace *trace, hl_error *err)
{
    const hl_gpt_config *c = &w->m->cfg;
    for (int l = sl + 1; l < w->L; l++) {
        const int H = hl_gpt_layer_heads(c, l);
        hl_detector_sums_begin(w->batch, H);
        w->batch->skip = main_detectors_only();
        if (hl_detector_sums_add(w->batch, b->tokens, trace[l].attn, b->repeats, err) != HL_OK)
            return err->status;
        for (int h = 0; h < H; h++) {
            const int j = hl_gpt_head_index(c, l, h);
            w->after[(size_t)i * w->N + j] += w->batch->sum[h][w->main[j]];
        }
    }
    return HL_OK;
}

/* One batch: the clean pass, then each head ablated from its layer on. */
static hl_status sweep_batch(sweep *w, hl_graph *g, hl_graph *rest, const hl_eval_batch *b,
                             int T, hl_error *err)
{
    const hl_gpt *m = w->m;
    hl_tensor *resid[HL_GPT_MAX_LAYERS + 1];
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    hl_gpt_run clean = {.trace = trace, .resid = resid};
    hl_gpt_forward_from(g, m, hl_gpt_embed(g, m, b->tokens, b->B, T), 0, &clean);
    if (hl_graph_failed(g))
        return hl_error_set(err, hl_graph_status(g), "ablation effects: %s", hl_graph_message(g));
    for (int l = 0; l < w->L; l++)
        if (hl_detector_sums_add(&w->clean[l], b->tokens, trace[l].attn, b->repeats, err) != HL_OK)
            return err->status;
    for (int sl = 0, i = 0; sl + 1 < w->L; sl++)
        for (int sh = 0; sh < hl_gpt_layer_heads(&m->cfg, sl); sh++, i++) {
            hl_gpt_run run = {.trace = trace};
            run.gate[sl] = w->gate[sl];
            w->gate[sl]->data[sh] = 0;
            hl_gpt_forward_from(rest, m, resid[sl], sl, &run);
            w->gate[sl]->data[sh] = 1;
            if (hl_graph_failed(rest))
                return hl_error_set(err, hl_graph_status(rest), "ablation effects: %s",
                                    hl_graph_message(rest));
            if (add_ablated(w, i, sl, b, trace, err) != HL_OK)
                return err->status;
            hl_graph_reset(rest);
        }
    return HL_OK;
}

static hl_status run_sweep(sweep *w, const hl_eval_set *set, hl_error *err)
{
    hl_graph *g = hl_graph_new(0), *rest = hl_graph_new(0);
    hl_status s = g && rest ? HL_OK
                            : hl_error_set(err, HL_ERR_NOMEM, "ablation effects: out of memory");
    for (int k = 0; s == HL_OK && k < 2; k++) {
        hl_graph_set_grad_enabled(k ? rest : g, false);
        hl_graph_set_training(k ? rest : g, false);
    }
    for (hl_eval_batch b = {0}; s == HL_OK && hl_eval_set_next(set, &b);) {
        s = sweep_batch(w, g, rest, &b, set->T, err);
        hl_graph_reset(g);
    }
    hl_graph_free(g);
    hl_graph_free(rest);
    return s;
}

/* Sequences per batch: the clean pass's maps of every layer and an ablated
 * pass's together within HL_EVAL_PASS_BYTES (no logits are made). */
static int sweep_batch_size(const hl_gpt *m, const hl_eval_set *set)
{
    double maps = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        maps += (double)hl_gpt_layer_heads(&m->cfg, l) * set->T * set->T;
    const double fit = HL_EVAL_PASS_BYTES / (2 * maps * sizeof(hl_real));
    return fit >= set->batch ? set->batch : fit >= 1 ? (int)fit : 1;
}

/* The rows from the sweep's sums: d's own detector, chosen on scores. */
static void fill_rows(const sweep *w, hl_ablation_effect *rows, int *n)
{
    const hl_gpt_config *c = &w->m->cfg;
    hl_head_scores before[HL_HEADS_MAX];
    int count = 0;
    for (int dl = 1; dl < w->L; dl++) {
        hl_detector_sums_finish(&w->clean[dl], before);
        for (int dh = 0; dh < hl_gpt_layer_heads(c, dl); dh++) {
            const int j = hl_gpt_head_index(c, dl, dh);
            const hl_detector d = w->main[j];
            const double rows_read = w->clean[dl].count[d];
            for (int sl = 0; sl < dl; sl++)
                for (int sh = 0; sh < hl_gpt_layer_heads(c, sl); sh++) {
                    const int i = hl_gpt_head_index(c, sl, sh);
                    const double after =
                        rows_read > 0 ? w->after[(size_t)i * w->N + j] / rows_read : NAN;
                    rows[count++] = (hl_ablation_effect){sl, sh, dl, dh, d, before[dh].v[d],
                                                         after};
                }
        }
    }
    *n = count;
}

hl_status hl_heads_ablation_effects(const hl_gpt *m, const hl_eval_set *set, int sequences,
                                    const hl_head_scores *scores, hl_ablation_effect **out,
                                    int *n, hl_error *err)
{
    *out = NULL;
    *n = 0;
    if (hl_eval_set_check(set, m, err) != HL_OK)
        return err->status;
    if (m->cfg.n_layers < 2)
        return HL_OK;
    if (sequences < 1 || sequences > set->n)
        return hl_error_set(err, HL_ERR_ARG, "ablation effects: %d sequences of a set of %d",
                            sequences, set->n);
    hl_eval_set part = *set;
    part.n = sequences;
    part.batch = sweep_batch_size(m, &part);
    const int N = hl_gpt_total_heads(&m->cfg);
    sweep w;
    hl_ablation_effect *rows = malloc(sizeof *rows * (size_t)N * N);
    hl_status s = sweep_begin(&w, m, scores, err);
    if (s == HL_OK && !rows)
        s = hl_error_set(err, HL_ERR_NOMEM, "ablation effects: out of memory");
    if (s == HL_OK)
        s = run_sweep(&w, &part, err);
    if (s == HL_OK)
        fill_rows(&w, rows, n);
    sweep_free(&w);
    if (s != HL_OK) {
        free(rows);
        return s;
    }
    *out = rows;
    return HL_OK;
}
