/* The head study as one HTML page and the files behind it: see head_report.h. */
#include "report/head_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/composition.h"
#include "analysis/head_effects.h"
#include "analysis/head_maps.h"
#include "analysis/heads.h"
#include "analysis/patching.h"
#include "analysis/roles.h"
#include "report/head_files.h"
#include "report/html.h"

/* Path patching in the report: every head a sender in a model of at most
 * REPORT_PATHS_ALL heads, else REPORT_PATH_SENDERS of them (path_senders). */
#define REPORT_PATHS_ALL 48
#define REPORT_PATH_SENDERS 8

typedef struct {
    const hl_gpt *m;
    const hl_head_report_opts *o;
    const char *dir;
    hl_html *html;
    hl_probe probe;
    hl_head_scores *scores;              /* (L, n_heads) on the probe */
    double *comp[HL_COMPOSE_KINDS];      /* (N,N) each */
    double base[HL_COMPOSE_KINDS];
    hl_ablation_effect *effects;
    int n_effects, effect_sequences; /* the probe's first sequences they were measured on */
} study;

/* A table's cells as text. */
typedef struct {
    int cols, rows;
    char (*text)[48];
    const char **ptr;
} table;

static hl_status table_new(table *t, int cols, int rows, hl_error *err)
{
    t->cols = cols;
    t->rows = rows;
    t->text = calloc((size_t)cols * rows + 1, sizeof *t->text);
    t->ptr = malloc(sizeof *t->ptr * ((size_t)cols * rows + 1));
    if (!t->text || !t->ptr) {
        free(t->text);
        free(t->ptr);
        return hl_error_set(err, HL_ERR_NOMEM, "report: out of memory");
    }
    for (int i = 0; i < cols * rows; i++)
        t->ptr[i] = t->text[i];
    return HL_OK;
}

static char *cell(table *t, int r, int c) { return t->text[r * t->cols + c]; }

static void table_emit(hl_html *h, table *t, const char *const *header)
{
    hl_html_table(h, t->cols, header, t->ptr, t->rows);
    free(t->text);
    free(t->ptr);
}

static const char *path_in(const study *s, const char *name, char buf[4200])
{
    snprintf(buf, 4200, "%s/%s", s->dir, name);
    return buf;
}

/* ---- sections ----------------------------------------------------------------- */

static hl_status section_config(study *s, hl_error *err)
{
    (void)err;
    char config[1024];
    hl_gpt_config_format(&s->m->cfg, config, sizeof config);
    hl_html_section(s->html, "config", "Model");
    const hl_gpt_meta *meta = s->o->meta;
    hl_html_text(s->html, "%s: task %s, step %lld, %d heads in %d layers.",
                 s->o->model_path ? s->o->model_path : "(model)",
                 meta && meta->task[0] ? meta->task : "unknown",
                 meta ? (long long)meta->step : 0LL, hl_gpt_total_heads(&s->m->cfg),
                 s->m->cfg.n_layers);
    hl_html_pre(s->html, config);
    if (meta && hl_head_set_count(&meta->pruned)) {
        char pruned[1024];
        hl_pruned_heads_format(&meta->pruned, &s->m->cfg, pruned, sizeof pruned);
        hl_html_text(s->html, "Pruned (original indices): %s. Heads are named by their index "
                     "in this model.", pruned);
    }
    return HL_OK;
}

static hl_status section_roles(study *s, hl_error *err)
{
    const hl_gpt_config *c = &s->m->cfg;
    table t;
    if (table_new(&t, 2 + HL_DETECTORS, hl_gpt_total_heads(c), err) != HL_OK)
        return err->status;
    const char *header[2 + HL_DETECTORS] = {"head", "role"};
    for (int d = 0; d < HL_DETECTORS; d++)
        header[2 + d] = hl_detector_name(d);
    for (int l = 0, r = 0; l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++, r++) {
            const hl_head_scores *sc = &s->scores[l * c->n_heads + h];
            hl_head_name(s->m, l, h, cell(&t, r, 0));
            hl_head_roles(sc, cell(&t, r, 1), sizeof t.text[0]);
            for (int d = 0; d < HL_DETECTORS; d++)
                snprintf(cell(&t, r, 2 + d), sizeof t.text[0], "%.3f", sc->v[d]);
        }
    hl_html_section(s->html, "roles", "Roles");
    hl_html_text(s->html, "Detectors on the induction probe (%d sequences of %d random tokens "
                 "repeated once). Roles: previous-token >= %.2f, duplicate-token >= %.2f, "
                 "induction >= %.2f, copying >= %.2f, first-token >= %.2f, local >= %.2f, "
                 "self >= %.2f.", s->probe.set->n, s->probe.half, HL_ROLE_PREVIOUS,
                 HL_ROLE_DUPLICATE, HL_ROLE_INDUCTION, HL_ROLE_COPYING, HL_ROLE_FIRST,
                 HL_ROLE_LOCAL, HL_ROLE_SELF);
    table_emit(s->html, &t, header);
    return HL_OK;
}

static hl_status section_maps(study *s, hl_error *err)
{
    hl_tensor *maps = hl_heads_attention(s->m, s->o->map_tokens, s->o->map_T, err);
    if (!maps || hl_maps_write(s->dir, s->m, maps, s->o->map_tokens, s->o->vocab, NULL,
                               s->scores, err) != HL_OK) {
        hl_tensor_free(maps);
        return err->status;
    }
    hl_tensor_free(maps);
    char path[4200];
    hl_html_section(s->html, "maps", "Attention maps");
    hl_html_text(s->html, "Every head on one input of %d tokens (attn_L<l>H<h>.png per head).",
                 s->o->map_T);
    hl_html_image(s->html, path_in(s, "maps_grid.png", path), "attention maps of every head");
    return HL_OK;
}

static hl_status section_detectors(study *s, hl_error *err)
{
    char path[4200];
    if (hl_detectors_write_csv(path_in(s, "scores.csv", path), s->m, s->scores, err) != HL_OK ||
        hl_detectors_write_png(path_in(s, "scores.png", path), s->m, s->scores,
                               log(s->probe.set->T), "detectors on the induction probe",
                               err) != HL_OK)
        return err->status;
    hl_html_section(s->html, "detectors", "Detectors");
    hl_html_image(s->html, path, "heads by detectors");
    if (!s->o->text)
        return HL_OK;
    hl_eval_set *w = hl_eval_text_windows(s->o->text, s->o->text_tokens,
                                          s->o->text_windows ? s->o->text_windows : 64,
                                          s->m->cfg.n_ctx, 16, err);
    hl_head_scores *ts = malloc(sizeof *ts * (size_t)s->m->cfg.n_layers * s->m->cfg.n_heads);
    hl_status st = w && ts ? hl_heads_detect(s->m, w, NULL, ts, err)
                           : hl_error_set(err, HL_ERR_NOMEM, "report: out of memory");
    if (st == HL_OK)
        st = hl_detectors_write_csv(path_in(s, "scores_text.csv", path), s->m, ts, err);
    if (st == HL_OK)
        st = hl_detectors_write_png(path_in(s, "scores_text.png", path), s->m, ts,
                                    log(s->m->cfg.n_ctx), "detectors on windows of the text", err);
    if (st == HL_OK)
        hl_html_image(s->html, path, "heads by detectors on the text");
    hl_eval_set_free(w);
    free(ts);
    return st;
}

static const hl_eval_set *eval_set(const study *s)
{
    return s->o->eval ? s->o->eval : s->probe.set;
}

/* Each head ablated alone reruns the model: on the probe, over the sequences
 * the causal check reads (all of a small model's; see study_measure). */
static hl_status section_ablation(study *s, hl_error *err)
{
    const hl_gpt_config *c = &s->m->cfg;
    hl_eval_set probe_part = *s->probe.set;
    probe_part.n = s->effect_sequences;
    const hl_eval_set *set = s->o->eval ? s->o->eval : &probe_part;
    hl_eval_result base, r;
    table t;
    if (hl_heads_evaluate(s->m, set, NULL, NULL, &base, err) != HL_OK ||
        table_new(&t, 4, hl_gpt_total_heads(c), err) != HL_OK)
        return err->status;
    hl_status st = HL_OK;
    for (int l = 0, row = 0; st == HL_OK && l < c->n_layers; l++)
        for (int h = 0; st == HL_OK && h < hl_gpt_layer_heads(c, l); h++, row++) {
            hl_head_set off = {0};
            off.on[l][h] = true;
            st = hl_heads_evaluate(s->m, set, &off, NULL, &r, err);
            hl_head_name(s->m, l, h, cell(&t, row, 0));
            snprintf(cell(&t, row, 1), sizeof t.text[0], "%.4f", r.loss[0]);
            snprintf(cell(&t, row, 2), sizeof t.text[0], "%+.4f", r.loss[0] - base.loss[0]);
            snprintf(cell(&t, row, 3), sizeof t.text[0], "%.4f", r.accuracy[0]);
        }
    hl_html_section(s->html, "ablation", "Ablation");
    hl_html_text(s->html, "Each head gated to 0 alone, on %s (%d sequences of %d tokens): loss "
                 "of the target group \"%s\"; unablated %.4f, accuracy %.4f.",
                 s->o->eval                   ? "the evaluation set"
                 : set->n < s->probe.set->n ? "the induction probe's repeated half (its first "
                                              "sequences)"
                                            : "the induction probe's repeated half",
                 set->n, set->T, set->group_names[0], base.loss[0], base.accuracy[0]);
    table_emit(s->html, &t, (const char *[]){"head ablated", "loss", "change", "accuracy"});
    return st;
}

static hl_status section_importance(study *s, hl_error *err)
{
    const hl_gpt_config *c = &s->m->cfg;
    const size_t n = (size_t)c->n_layers * c->n_heads;
    double *raw = malloc(sizeof *raw * n), *norm = malloc(sizeof *norm * n);
    table t = {0};
    hl_status st = raw && norm ? HL_OK : hl_error_set(err, HL_ERR_NOMEM, "report: out of memory");
    if (st == HL_OK)
        st = hl_heads_importance(s->m, eval_set(s), raw, norm, err);
    char path[4200];
    if (st == HL_OK)
        st = hl_importance_write_csv(path_in(s, "importance.csv", path), s->m, raw, norm, err);
    if (st == HL_OK)
        st = table_new(&t, 3, hl_gpt_total_heads(c), err);
    for (int l = 0, row = 0; st == HL_OK && l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++, row++) {
            hl_head_name(s->m, l, h, cell(&t, row, 0));
            snprintf(cell(&t, row, 1), sizeof t.text[0], "%.4f", norm[l * c->n_heads + h]);
            snprintf(cell(&t, row, 2), sizeof t.text[0], "%.5f", raw[l * c->n_heads + h]);
        }
    if (st == HL_OK) {
        hl_html_section(s->html, "importance", "Importance");
        hl_html_text(s->html, "Mean |dL/dgate| per head (Michel et al. 2019), normalised by "
                     "its layer's L2 norm, on the same set as the ablation (importance.csv).");
        table_emit(s->html, &t, (const char *[]){"head", "importance", "raw |dL/dg|"});
    }
    free(raw);
    free(norm);
    return st;
}

static hl_status section_composition(study *s, hl_error *err)
{
    char path[4200], name[64];
    if (hl_composition_write_csv(path_in(s, "composition.csv", path), s->m,
                                 (const double *const *)s->comp, err) != HL_OK)
        return err->status;
    hl_html_section(s->html, "composition", "Composition");
    hl_html_text(s->html, "Q-, K- and V-composition scores (Elhage et al. 2021, as "
                 "TransformerLens computes them, LayerNorm gains folded) between heads in "
                 "different layers; random matrices of the same shapes score %.3f on average.",
                 s->base[0]);
    for (int k = 0; k < HL_COMPOSE_KINDS; k++) {
        snprintf(name, sizeof name, "composition_%s.png", hl_compose_kind_name(k));
        if (hl_composition_write_png(path_in(s, name, path), s->m, k, s->comp[k], s->base[k],
                                     err) != HL_OK)
            return err->status;
        hl_html_image(s->html, path, name);
    }
    return HL_OK;
}

/* The causal check: each later head's own detector with each earlier head ablated. */
static hl_status section_circuit(study *s, hl_error *err)
{
    char path[4200], a[HL_HEAD_NAME_MAX], b[HL_HEAD_NAME_MAX];
    if (hl_circuit_diagram_write(path_in(s, "circuit.png", path), s->m,
                                 (const double *const *)s->comp, s->base, err) != HL_OK)
        return err->status;
    hl_html_section(s->html, "circuit", "Circuit");
    hl_html_image(s->html, path, "circuit diagram");
    table t;
    if (hl_ablation_effects_write_csv(path_in(s, "ablation_effects.csv", path), s->m, s->effects,
                                      s->n_effects, err) != HL_OK ||
        table_new(&t, 5, s->n_effects, err) != HL_OK)
        return err->status;
    for (int i = 0; i < s->n_effects; i++) {
        const hl_ablation_effect *e = &s->effects[i];
        snprintf(cell(&t, i, 0), sizeof t.text[0], "%s", hl_head_name(s->m, e->src_layer, e->src_head, a));
        snprintf(cell(&t, i, 1), sizeof t.text[0], "%s", hl_head_name(s->m, e->dst_layer, e->dst_head, b));
        snprintf(cell(&t, i, 2), sizeof t.text[0], "%s", hl_detector_name(e->detector));
        snprintf(cell(&t, i, 3), sizeof t.text[0], "%.3f", e->before);
        snprintf(cell(&t, i, 4), sizeof t.text[0], "%.3f", e->after);
    }
    hl_html_text(s->html, "Each later head's own detector on the first %d of the probe's %d "
                 "sequences, with one earlier head zero-ablated (ablation_effects.csv).",
                 s->effect_sequences, s->probe.set->n);
    table_emit(s->html, &t, (const char *[]){"ablated", "head", "detector", "before", "after"});
    return HL_OK;
}

/* The per-head patching numbers of the report's induction task. */
typedef struct {
    double clean, corrupt;
    double *z, *k, *attrib, *dla, *paths; /* (L, n_heads) each; paths (N,N) through K */
    hl_head_set senders;                  /* of a large model's paths (path_senders) */
} patch_numbers;

static void patch_numbers_free(patch_numbers *p)
{
    free(p->z);
    free(p->k);
    free(p->attrib);
    free(p->dla);
    free(p->paths);
}

/* Path patching's senders: every head of a model of at most
 * REPORT_PATHS_ALL heads; of a larger one (one pass per sender and receiver:
 * hours on GPT-2 small) the REPORT_PATH_SENDERS heads, outside the last
 * layer, whose output patches the most (largest |patch z|). */
static const hl_head_set *path_senders(const hl_gpt *m, const double *z, hl_head_set *set)
{
    const hl_gpt_config *c = &m->cfg;
    if (hl_gpt_total_heads(c) <= REPORT_PATHS_ALL)
        return NULL;
    memset(set, 0, sizeof *set);
    for (int k = 0; k < REPORT_PATH_SENDERS; k++) {
        int best_l = -1, best_h = -1;
        for (int l = 0; l + 1 < c->n_layers; l++)
            for (int h = 0; h < hl_gpt_layer_heads(c, l); h++) {
                const double v = fabs(z[l * c->n_heads + h]);
                if (!set->on[l][h] && !isnan(v) &&
                    (best_l < 0 || v > fabs(z[best_l * c->n_heads + best_h])))
                    best_l = l, best_h = h;
            }
        if (best_l >= 0)
            set->on[best_l][best_h] = true;
    }
    return set;
}

static hl_status measure_patching(const study *s, const hl_patch_task *t, patch_numbers *p,
                                  hl_error *err)
{
    const hl_gpt_config *c = &s->m->cfg;
    const size_t cells = (size_t)c->n_layers * c->n_heads, N = (size_t)hl_gpt_total_heads(c);
    p->z = malloc(sizeof *p->z * cells);
    p->k = malloc(sizeof *p->k * cells);
    p->attrib = malloc(sizeof *p->attrib * cells);
    p->dla = malloc(sizeof *p->dla * cells);
    p->paths = malloc(sizeof *p->paths * N * N);
    if (!p->z || !p->k || !p->attrib || !p->dla || !p->paths)
        return hl_error_set(err, HL_ERR_NOMEM, "report: out of memory");
    if (hl_patch_baselines(s->m, t, &p->clean, &p->corrupt, err) != HL_OK ||
        hl_patch_heads(s->m, t, HL_ACT_Z, false, p->z, err) != HL_OK ||
        hl_patch_heads(s->m, t, HL_ACT_K, false, p->k, err) != HL_OK ||
        hl_patch_attrib_heads(s->m, t, HL_ACT_Z, false, p->attrib, err) != HL_OK ||
        hl_patch_logit_attribution(s->m, t, p->dla, err) != HL_OK)
        return err->status;
    if (c->n_layers < 2) {
        for (size_t i = 0; i < N * N; i++)
            p->paths[i] = NAN;
        return HL_OK;
    }
    return hl_patch_paths_from(s->m, t, HL_ACT_K, path_senders(s->m, p->z, &p->senders),
                               p->paths, err);
}

/* The induction task's sequences: 20, fewer (2 at least) where patching
 * every head's z and k and the paths of 8 senders, about 6 passes per head
 * through every layer, would pass HL_SWEEP_WORK. */
static int patching_sequences(const hl_gpt *m)
{
    const hl_gpt_config *c = &m->cfg;
    const int half = c->n_ctx / 2 < HL_REPEAT_HALF_MAX ? c->n_ctx / 2 : HL_REPEAT_HALF_MAX;
    const double per_sequence = 6.0 * hl_gpt_total_heads(c) * c->n_layers * (2 * half + 1);
    const double fit = HL_SWEEP_WORK / per_sequence;
    return fit >= 20 ? 20 : fit >= 2 ? (int)fit : 2;
}

/* Activation, path and attribution patching and direct logit attribution on
 * the induction task (analysis/patching.h) built on the probe's tokens. */
static hl_status section_patching(study *s, hl_error *err)
{
    const hl_gpt_config *c = &s->m->cfg;
    const hl_probe_opts *po = &s->o->probe;
    const bool range = po->token_lo || po->token_hi;
    const int common = c->vocab_in < c->vocab_out ? c->vocab_in : c->vocab_out;
    hl_html_section(s->html, "patching", "Patching");
    hl_patch_task t;
    int32_t *buf = NULL;
    patch_numbers p = {0};
    hl_error local = {0};
    /* A task the model cannot take (a short context, a one-token vocabulary)
     * or two runs that score alike leave the section's reason, not a failure. */
    if (hl_patch_induction_task(s->m, patching_sequences(s->m), po->bos,
                                range ? po->token_lo : 0,
                                range ? po->token_hi : common, po->seed, &t, &buf,
                                &local) != HL_OK ||
        measure_patching(s, &t, &p, &local) != HL_OK) {
        free(buf);
        patch_numbers_free(&p);
        if (local.status == HL_ERR_NOMEM)
            return hl_error_set(err, local.status, "%s", local.message);
        hl_html_text(s->html, "Not computed: %s.", local.message);
        return HL_OK;
    }
    hl_html_text(s->html, "The induction task: %d sequences of random tokens repeated once; "
                 "corrupted by drawing the first half's tokens at even offsets again, so "
                 "that at the second half's even offsets the answer is still in place and "
                 "only the label saying which token comes before it is wrong. Loss: clean "
                 "%.4f, corrupted %.4f. Patching scores are (patched - corrupted) / (clean - "
                 "corrupted): 0 as corrupted, 1 as clean (heads patch, paths, attrib, "
                 "logit-lens).", t.B, p.clean, p.corrupt);
    const int N = hl_gpt_total_heads(c);
    table tb;
    hl_status st = table_new(&tb, 5, N, err);
    for (int l = 0, r = 0; st == HL_OK && l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++, r++) {
            const int i = l * c->n_heads + h;
            hl_head_name(s->m, l, h, cell(&tb, r, 0));
            snprintf(cell(&tb, r, 1), sizeof tb.text[0], "%.3f", p.z[i]);
            snprintf(cell(&tb, r, 2), sizeof tb.text[0], "%.3f", p.k[i]);
            snprintf(cell(&tb, r, 3), sizeof tb.text[0], "%.3f", p.attrib[i]);
            snprintf(cell(&tb, r, 4), sizeof tb.text[0], "%.3f", p.dla[i]);
        }
    if (st == HL_OK)
        table_emit(s->html, &tb, (const char *[]){"head", "patch z", "patch k",
                                                  "attribution z", "direct logit attr."});
    /* The five strongest routes through K. */
    int best[5] = {-1, -1, -1, -1, -1};
    for (int i = 0; i < N * N; i++) {
        if (isnan(p.paths[i]))
            continue;
        int at = 5;
        while (at > 0 && (best[at - 1] < 0 || p.paths[i] > p.paths[best[at - 1]]))
            at--;
        if (at == 5)
            continue;
        memmove(best + at + 1, best + at, sizeof *best * (size_t)(4 - at));
        best[at] = i;
    }
    int rows = 0;
    while (rows < 5 && best[rows] >= 0)
        rows++;
    if (st == HL_OK && rows > 0 && (st = table_new(&tb, 3, rows, err)) == HL_OK) {
        for (int r = 0; r < rows; r++) {
            int sl = 0, sh = 0, dl = 0, dh = 0;
            hl_gpt_head_at(c, best[r] / N, &sl, &sh);
            hl_gpt_head_at(c, best[r] % N, &dl, &dh);
            hl_head_name(s->m, sl, sh, cell(&tb, r, 0));
            hl_head_name(s->m, dl, dh, cell(&tb, r, 1));
            snprintf(cell(&tb, r, 2), sizeof tb.text[0], "%.3f", p.paths[best[r]]);
        }
        hl_html_text(s->html, "The strongest routes through K: the sender's clean output "
                     "reaching the receiver's keys only, everything else corrupted%s.",
                     N > REPORT_PATHS_ALL ? " (senders: the 8 heads outside the last "
                                            "layer whose z patches the most)" : "");
        table_emit(s->html, &tb, (const char *[]){"sender", "receiver", "path patching (k)"});
    }
    free(buf);
    patch_numbers_free(&p);
    return st;
}

static hl_status section_curve(study *s, hl_error *err)
{
    (void)err;
    hl_html_section(s->html, "curve", "Pruning curve");
    if (s->o->curve_png)
        hl_html_image(s->html, s->o->curve_png, "pruning curve");
    else
        hl_html_text(s->html, "Not computed (heads report --curve adds it).");
    return HL_OK;
}

/* ---- the whole study ------------------------------------------------------------ */

static void study_free(study *s)
{
    hl_probe_free(&s->probe);
    free(s->scores);
    for (int k = 0; k < HL_COMPOSE_KINDS; k++)
        free(s->comp[k]);
    free(s->effects);
    hl_html_free(s->html);
}

/* Detectors, composition scores and ablation effects: the numbers every section uses. */
static hl_status study_measure(study *s, hl_error *err)
{
    const hl_gpt_config *c = &s->m->cfg;
    const int N = hl_gpt_total_heads(c);
    if (hl_probe_new(s->m, &s->o->probe, &s->probe, err) != HL_OK)
        return err->status;
    s->scores = malloc(sizeof *s->scores * (size_t)c->n_layers * c->n_heads);
    for (int k = 0; k < HL_COMPOSE_KINDS; k++)
        s->comp[k] = malloc(sizeof *s->comp[k] * (size_t)N * N);
    if (!s->scores || !s->comp[0] || !s->comp[1] || !s->comp[2])
        return hl_error_set(err, HL_ERR_NOMEM, "report: out of memory");
    if (hl_heads_detect(s->m, s->probe.set, NULL, s->scores, err) != HL_OK)
        return err->status;
    for (int k = 0; k < HL_COMPOSE_KINDS; k++) {
        if (hl_composition_scores(s->m, k, s->comp[k], err) != HL_OK)
            return err->status;
        s->base[k] = hl_composition_baseline(c->d_model, c->d_model / c->n_heads, 200, 1);
    }
    /* --sequences given: all of them; else as many as the sweep's budget takes. */
    s->effect_sequences = s->o->probe.sequences ? s->probe.set->n
                                                : hl_heads_ablation_sequences(s->m, s->probe.set);
    return hl_heads_ablation_effects(s->m, s->probe.set, s->effect_sequences, s->scores,
                                     &s->effects, &s->n_effects, err);
}

hl_status hl_head_report_write(const hl_gpt *m, const hl_head_report_opts *o, const char *dir,
                               hl_error *err)
{
    if (!o || !o->map_tokens || o->map_T < 1)
        return hl_error_set(err, HL_ERR_ARG, "report: needs an input for the attention maps");
    char title[512];
    snprintf(title, sizeof title, "Which head does what: %s",
             o->model_path ? o->model_path : "model");
    study s = {.m = m, .o = o, .dir = dir, .html = hl_html_new(title)};
    if (!s.html)
        return hl_error_set(err, HL_ERR_NOMEM, "report: out of memory");
    hl_status (*const sections[])(study *, hl_error *) = {
        section_config,   section_roles,       section_maps,    section_detectors,
        section_ablation, section_importance,  section_composition, section_circuit,
        section_patching, section_curve,
    };
    hl_status st = study_measure(&s, err);
    for (size_t i = 0; st == HL_OK && i < sizeof sections / sizeof sections[0]; i++)
        st = sections[i](&s, err);
    char path[4200];
    if (st == HL_OK)
        st = hl_html_save(s.html, path_in(&s, "report.html", path), err);
    study_free(&s);
    return st;
}
