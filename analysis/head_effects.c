/* Detector scores of later heads with an earlier head ablated: see head_effects.h.
 *
 * Ablating head (l, h) leaves the residual stream entering layer l as it was,
 * so each batch runs the model once, keeping that stream at every layer, and
 * each ablation reruns only the blocks from l on (hl_gpt_forward_from), with
 * no unembedding: a sweep over GPT-2 small's 144 heads costs 924 block passes,
 * where 144 whole forward passes would cost 1,728 and the unembeddings. Only the detectors that can be a head's main one are
 * measured (hl_head_main_detector). */
#include "analysis/head_effects.h"

#include <stdlib.h>
#include <string.h>

#include "analysis/heads.h"
#include "analysis/roles.h"
#include "core/graph.h"

/* Block-passes of one sequence position in the sweep at most (summed over the
 * ablations: layers from the ablated one on), over the sequences it reads. */
#define EFFECT_WORK (1 << 21)

int hl_heads_ablation_sequences(const hl_gpt *m, const hl_eval_set *set)
{
    const hl_gpt_config *c = &m->cfg;
    double per_sequence = 0;
    for (int l = 0; l + 1 < c->n_layers; l++)
        per_sequence += (double)hl_gpt_layer_heads(c, l) * (c->n_layers - l) * set->T;
    const double fit = per_sequence > 0 ? EFFECT_WORK / per_sequence : set->n;
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
    hl_detector_sums *clean;   /* L: no head ablated */
    hl_detector_sums *ablated; /* N * L: [i * L + l], layers after flat head i's only */
    hl_tensor *gate[HL_GPT_MAX_LAYERS];
} sweep;

static hl_status sweep_begin(sweep *w, const hl_gpt *m, hl_error *err)
{
    const hl_gpt_config *c = &m->cfg;
    *w = (sweep){.m = m, .L = c->n_layers, .N = hl_gpt_total_heads(c)};
    w->clean = malloc(sizeof *w->clean * (size_t)w->L);
    w->ablated = malloc(sizeof *w->ablated * (size_t)w->N * w->L);
    if (!w->clean || !w->ablated)
        return hl_error_set(err, HL_ERR_NOMEM, "ablation effects: out of memory");
    for (int i = 0; i < (w->N + 1) * w->L; i++) {
        hl_detector_sums *sums = i < w->L ? &w->clean[i] : &w->ablated[i - w->L];
        hl_detector_sums_begin(sums, hl_gpt_layer_heads(c, i % w->L));
        sums->skip = main_detectors_only();
    }
    for (int l = 0; l < w->L; l++) {
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
    free(w->ablated);
    for (int l = 0; l < w->L; l++)
        hl_tensor_free(w->gate[l]);
}

/* One batch: the clean pass, then each head ablated from its layer on. */
static hl_status sweep_batch(sweep *w, hl_graph *g, hl_graph *rest, const hl_eval_batch *b,
                             int T, hl_error *err)
{
    const hl_gpt *m = w->m;
    hl_tensor *resid[HL_GPT_MAX_LAYERS + 1];
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    hl_gpt_run clean = {.trace = trace, .resid = resid};
    hl_gpt_forward(g, m, b->tokens, b->B, T, &clean);
    for (int l = 0; !hl_graph_failed(g) && l < w->L; l++)
        if (hl_detector_sums_add(&w->clean[l], b->tokens, trace[l].attn, b->repeats, err) != HL_OK)
            return err->status;
    for (int sl = 0, i = 0; !hl_graph_failed(g) && sl + 1 < w->L; sl++)
        for (int sh = 0; sh < hl_gpt_layer_heads(&m->cfg, sl); sh++, i++) {
            hl_gpt_run run = {.trace = trace};
            run.gate[sl] = w->gate[sl];
            w->gate[sl]->data[sh] = 0;
            hl_gpt_forward_from(rest, m, resid[sl], sl, &run);
            w->gate[sl]->data[sh] = 1;
            if (hl_graph_failed(rest))
                return hl_error_set(err, hl_graph_status(rest), "ablation effects: %s",
                                    hl_graph_message(rest));
            for (int l = sl + 1; l < w->L; l++)
                if (hl_detector_sums_add(&w->ablated[(size_t)i * w->L + l], b->tokens,
                                         trace[l].attn, b->repeats, err) != HL_OK)
                    return err->status;
            hl_graph_reset(rest);
        }
    if (hl_graph_failed(g))
        return hl_error_set(err, hl_graph_status(g), "ablation effects: %s", hl_graph_message(g));
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

/* The rows from the sweep's sums: d's own detector, chosen on scores. */
static void fill_rows(const sweep *w, const hl_head_scores *scores, hl_ablation_effect *rows,
                      int *n)
{
    const hl_gpt_config *c = &w->m->cfg;
    const int stride = c->n_heads;
    hl_head_scores before[HL_HEADS_MAX], after[HL_HEADS_MAX];
    int count = 0;
    for (int dl = 1; dl < w->L; dl++) {
        hl_detector_sums_finish(&w->clean[dl], before);
        for (int dh = 0; dh < hl_gpt_layer_heads(c, dl); dh++) {
            const hl_detector d = hl_head_main_detector(&scores[dl * stride + dh]);
            for (int sl = 0; sl < dl; sl++)
                for (int sh = 0; sh < hl_gpt_layer_heads(c, sl); sh++) {
                    const int i = hl_gpt_head_index(c, sl, sh);
                    hl_detector_sums_finish(&w->ablated[(size_t)i * w->L + dl], after);
                    rows[count++] = (hl_ablation_effect){sl, sh, dl, dh, d, before[dh].v[d],
                                                         after[dh].v[d]};
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
    part.batch = hl_eval_pass_batch(m, &part, true);
    const int N = hl_gpt_total_heads(&m->cfg);
    sweep w;
    hl_ablation_effect *rows = malloc(sizeof *rows * (size_t)N * N);
    hl_status s = sweep_begin(&w, m, err);
    if (s == HL_OK && !rows)
        s = hl_error_set(err, HL_ERR_NOMEM, "ablation effects: out of memory");
    if (s == HL_OK)
        s = run_sweep(&w, &part, err);
    if (s == HL_OK)
        fill_rows(&w, scores, rows, n);
    sweep_free(&w);
    if (s != HL_OK) {
        free(rows);
        return s;
    }
    *out = rows;
    return HL_OK;
}
