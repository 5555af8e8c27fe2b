/* heads scores, maps, circuits and report: which head does what (analysis/detectors.h,
 * composition.h, head_effects.h, head_report.h). Heads are named by their index in
 * the model at hand. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/composition.h"
#include "analysis/detectors.h"
#include "analysis/head_effects.h"
#include "analysis/head_maps.h"
#include "analysis/roles.h"
#include "examples/heads/heads.h"
#include "io/csv_log.h"
#include "report/head_files.h"
#include "report/head_report.h"
#include "tasks/probe.h"

/* A model with what its file says, and the probe fit for it. */
typedef struct {
    hl_gpt *m;
    hl_gpt_meta meta;      /* meta.vocab: a text (charlm) model's tokens, else NULL */
    hl_probe_opts probe;
} model_in;

static model_in open_model(const options *o)
{
    model_in in = {0};
    hl_error err = {0};
    if (!(in.m = hl_gpt_load_meta(o->model, &in.meta, &err)))
        heads_refuse(&err);
    const hl_gpt_config *c = &in.m->cfg;
    if (c->n_heads > HL_HEADS_MAX)
        heads_bad_input("%s has %d heads per layer; this program handles up to %d", o->model,
                        c->n_heads, HL_HEADS_MAX);
    const bool toy = c->vocab_in == HL_TOY_VOCAB + 1 && c->vocab_out == HL_TOY_VOCAB;
    if (o->data && !in.meta.vocab && !strcmp(in.meta.task, "pretrained"))
        heads_bad_input("%s has no tokenizer headlab reads (%s): --data needs one to read the "
                        "text in its tokens", o->model, in.meta.vocab_note);
    if (o->data && !in.meta.vocab)
        heads_bad_input("%s is not a text model (vocabulary %d in, %d out, and no \"vocab\" in "
                        "the file): --data needs a charlm model", o->model, c->vocab_in,
                        c->vocab_out);
    /* The probe: toy models after BOS over their 16 tokens; text models over
     * letters or words. */
    in.probe = in.meta.vocab ? hl_probe_text_opts(in.meta.vocab)
                             : (hl_probe_opts){.bos = toy ? HL_TOY_BOS : -1, .seed = 12345};
    /* --sequences: the probe's size, but report's evaluation set on a toy
     * model (scores and circuits have no evaluation set). */
    if (o->sequences_given && (!toy || o->cmd != CMD_REPORT))
        in.probe.sequences = o->sequences;
    return in;
}

/* The model's induction probe, or an exit: 2 when it does not fit the model
 * (bad input), 1 when out of memory. */
static void make_probe(const model_in *in, hl_probe *p)
{
    hl_error err = {0};
    if (hl_probe_new(in->m, &in->probe, p, &err) == HL_OK)
        return;
    if (err.status == HL_ERR_NOMEM)
        heads_fail(&err);
    heads_bad_input("%s", err.message);
}

static void close_model(model_in *in)
{
    hl_gpt_free(in->m);
    hl_gpt_meta_clear(&in->meta);
}

static int32_t *read_data(const options *o, const model_in *in, size_t *n)
{
    int32_t *text = heads_read_tokens(o->data, in->meta.vocab, n);
    if (*n < (size_t)in->m->cfg.n_ctx + 1)
        heads_bad_input("%s has %zu tokens; windows of the model's %d+1 need at least %d",
                        o->data, *n, in->m->cfg.n_ctx, in->m->cfg.n_ctx + 1);
    return text;
}

static const char *out_path(const options *o, const char *name, char buf[4200])
{
    snprintf(buf, 4200, "%s/%s", o->out, name);
    return buf;
}

static void print_roles(const hl_gpt *m, const hl_head_scores *s, const char *what)
{
    printf("%s\nhead  ", what);
    for (int d = 0; d < HL_DETECTORS; d++)
        printf(" %7.7s", hl_detector_short(d));
    printf("  role\n");
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++) {
            char name[HL_HEAD_NAME_MAX], roles[128];
            printf("%-6s", hl_head_name(m, l, h, name));
            for (int d = 0; d < HL_DETECTORS; d++)
                printf(" %7.3f", s[l * m->cfg.n_heads + h].v[d]);
            printf("  %s\n", hl_head_roles(&s[l * m->cfg.n_heads + h], roles, sizeof roles));
        }
}

/* ---- scores ------------------------------------------------------------------ */

static hl_status text_scores(const options *o, const model_in *in, hl_head_scores *s,
                             hl_error *err)
{
    size_t size;
    int32_t *text = read_data(o, in, &size);
    hl_eval_set *w = hl_eval_text_windows(text, size, o->windows, in->m->cfg.n_ctx, 16, err);
    free(text);
    if (!w)
        return err->status;
    heads_make_out_dir(o);
    char path[4200];
    hl_status st = hl_heads_detect(in->m, w, NULL, s, err);
    if (st == HL_OK)
        st = hl_detectors_write_csv(out_path(o, "scores_text.csv", path), in->m, s, err);
    if (st == HL_OK)
        st = hl_detectors_write_png(out_path(o, "scores_text.png", path), in->m, s,
                                    log(in->m->cfg.n_ctx), "detectors on windows of the text", err);
    hl_eval_set_free(w);
    return st;
}

int heads_run_scores(const options *o)
{
    model_in in = open_model(o);
    hl_error err = {0};
    hl_probe p;
    const size_t cells = (size_t)in.m->cfg.n_layers * in.m->cfg.n_heads;
    hl_head_scores *s = malloc(sizeof *s * cells), *ts = malloc(sizeof *ts * cells);
    if (!s || !ts) {
        hl_error_set(&err, HL_ERR_NOMEM, "out of memory");
        heads_fail(&err);
    }
    make_probe(&in, &p);
    if (o->data && text_scores(o, &in, ts, &err) != HL_OK)
        heads_fail(&err);
    heads_make_out_dir(o);
    char path[4200], what[256];
    if (hl_heads_detect(in.m, p.set, NULL, s, &err) != HL_OK ||
        hl_detectors_write_csv(out_path(o, "scores.csv", path), in.m, s, &err) != HL_OK ||
        hl_detectors_write_png(out_path(o, "scores.png", path), in.m, s, log(p.set->T),
                               "detectors on the induction probe", &err) != HL_OK)
        heads_fail(&err);
    snprintf(what, sizeof what, "induction probe: %d sequences of %d random tokens repeated "
             "once%s", p.set->n, p.half, p.start ? " after BOS" : "");
    print_roles(in.m, s, what);
    if (o->data) {
        snprintf(what, sizeof what, "\n%d windows of %d tokens of %s", o->windows,
                 in.m->cfg.n_ctx, o->data);
        print_roles(in.m, ts, what);
    }
    printf("wrote %s/scores.csv, %s/scores.png%s\n", o->out, o->out,
           o->data ? ", scores_text.csv, scores_text.png" : "");
    hl_probe_free(&p);
    free(s);
    free(ts);
    close_model(&in);
    return 0;
}

/* ---- maps -------------------------------------------------------------------- */

/* The first max tokens of text as a text model's vocabulary encodes it, into
 * x; how many. */
static int encode_text(const model_in *in, const char *text, int32_t *x, int max)
{
    int32_t *tokens;
    size_t n;
    hl_error err = {0};
    if (hl_vocab_encode(in->meta.vocab, (const unsigned char *)text, strlen(text), &tokens, &n,
                        &err) != HL_OK)
        heads_fail(&err);
    int k = 0;
    for (; (size_t)k < n && k < max; k++)
        x[k] = tokens[k];
    free(tokens);
    return k;
}

/* The input's tokens: --text, or --data from its --offset-th token, as the
 * model's vocabulary encodes them (text models), or numbers in --text (other
 * models); at most n_ctx. */
static int32_t *map_input(const options *o, const model_in *in, int *T)
{
    const int max = in->m->cfg.n_ctx;
    int32_t *x = malloc(sizeof *x * (size_t)max);
    if (!x)
        heads_out_of_memory();
    int n = 0;
    if (o->data) {
        size_t size;
        int32_t *text = heads_read_tokens(o->data, in->meta.vocab, &size);
        if ((size_t)o->offset >= size) {
            free(text);
            free(x);
            heads_bad_input("--offset %d is past the end of %s (%zu tokens)", o->offset, o->data,
                            size);
        }
        for (size_t i = (size_t)o->offset; i < size && n < max; i++)
            x[n++] = text[i];
        free(text);
    } else if (in->meta.vocab) {
        n = encode_text(in, o->text, x, max);
    } else {
        for (const char *c = o->text; *c && n < max;) {
            char *end;
            long v = strtol(c, &end, 10);
            if (end == c || v < 0 || v >= in->m->cfg.vocab_in)
                free(x), heads_bad_input("--text for this model is token numbers 0..%d separated by "
                                "spaces, not \"%s\"", in->m->cfg.vocab_in - 1, o->text);
            x[n++] = (int32_t)v;
            c = end + strspn(end, " ,");
        }
    }
    if (n == 0)
        free(x), heads_bad_input("the input is empty: give some text");
    *T = n;
    return x;
}

/* maps.csv: each query's top key for the heads drawn (which, or every head
 * when NULL). */
static int write_maps_csv(const options *o, const hl_gpt *m, const hl_tensor *maps,
                          const int32_t *x, const hl_vocab *vocab, const hl_head_set *which)
{
    text_out csv;
    FILE *f = heads_text_begin(&csv);
    const int T = maps->shape[1];
    fprintf(f, "head,query,query_token,top_key,top_key_token,attention\n");
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++) {
            if (which && !which->on[l][h])
                continue;
            const hl_real *a = maps->data + (size_t)hl_gpt_head_index(&m->cfg, l, h) * T * T;
            for (int t = 0; t < T; t++) {
                int best = 0;
                for (int j = 1; j <= t; j++)
                    best = a[t * T + j] > a[t * T + best] ? j : best;
                char name[HL_HEAD_NAME_MAX], label[HL_TOKEN_LABEL_MAX];
                fprintf(f, "%s,%d,", hl_head_name(m, l, h, name), t);
                hl_csv_log_quote(f, hl_token_label(x[t], vocab, label));
                fprintf(f, ",%d,", best);
                hl_csv_log_quote(f, hl_token_label(x[best], vocab, label));
                fprintf(f, ",%.6f\n", a[t * T + best]);
            }
        }
    return heads_text_save(&csv, o->out, "maps.csv");
}

int heads_run_maps(const options *o)
{
    model_in in = open_model(o);
    hl_head_set which = o->heads ? heads_parse_list(in.m, o->heads) : (hl_head_set){0};
    int T;
    int32_t *x = map_input(o, &in, &T);
    hl_error err = {0};
    hl_tensor *maps = hl_heads_attention(in.m, x, T, &err);
    if (!maps)
        heads_bad_input("%s", err.message);
    heads_make_out_dir(o);
    if (hl_maps_write(o->out, in.m, maps, x, in.meta.vocab, o->heads ? &which : NULL, NULL,
                      &err) != HL_OK)
        heads_fail(&err);
    int rc = write_maps_csv(o, in.m, maps, x, in.meta.vocab, o->heads ? &which : NULL);
    if (!rc)
        printf("%d tokens; wrote %s/attn_L<l>H<h>.png (%d heads), %s/maps_grid.png, "
               "%s/maps.csv\n", T, o->out, o->heads ? hl_head_set_count(&which)
                                                    : hl_gpt_total_heads(&in.m->cfg),
               o->out, o->out);
    hl_tensor_free(maps);
    free(x);
    close_model(&in);
    return rc;
}

/* ---- circuits ------------------------------------------------------------------ */

/* The head with the highest induction score, and its two strongest
 * K-composition sources; what ablating each earlier head does to it. */
static void print_induction_circuit(const hl_gpt *m, const hl_head_scores *s, const double *k,
                                    const hl_ablation_effect *rows, int n)
{
    const hl_gpt_config *c = &m->cfg;
    const int N = hl_gpt_total_heads(c);
    int best_l = -1, best_h = -1;
    for (int l = 1; l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++) {
            const double v = s[l * c->n_heads + h].v[HL_DETECT_INDUCTION];
            if (!isnan(v) &&
                (best_l < 0 || v > s[best_l * c->n_heads + best_h].v[HL_DETECT_INDUCTION]))
                best_l = l, best_h = h;
        }
    if (best_l < 0) { /* no induction score: a probe too short to tell one */
        printf("\nno induction head: the probe gives no induction score\n");
        return;
    }
    char name[HL_HEAD_NAME_MAX], src[HL_HEAD_NAME_MAX], roles[128];
    const int j = hl_gpt_head_index(c, best_l, best_h);
    printf("\nbest induction head %s (induction %.3f); its strongest K-composition sources:\n",
           hl_head_name(m, best_l, best_h, name), s[best_l * c->n_heads + best_h].v[HL_DETECT_INDUCTION]);
    int first = -1;
    for (int rank = 0; rank < 2; rank++) {
        int top = -1;
        for (int i = 0; i < N; i++)
            if (!isnan(k[(size_t)i * N + j]) && i != first &&
                (top < 0 || k[(size_t)i * N + j] > k[(size_t)top * N + j]))
                top = i;
        if (top < 0)
            break;
        first = rank == 0 ? top : first;
        for (int l = 0, i = 0; l < c->n_layers; l++)
            for (int h = 0; h < hl_gpt_layer_heads(c, l); h++, i++)
                if (i == top)
                    printf("  %s  K %.3f  role %s (previous_token %.3f, local %.3f)\n",
                           hl_head_name(m, l, h, src), k[(size_t)top * N + j],
                           hl_head_roles(&s[l * c->n_heads + h], roles, sizeof roles),
                           s[l * c->n_heads + h].v[HL_DETECT_PREVIOUS],
                           s[l * c->n_heads + h].v[HL_DETECT_LOCAL]);
    }
    printf("its own detector on those sequences, with each earlier head ablated:\n");
    for (int i = 0; i < n; i++)
        if (rows[i].dst_layer == best_l && rows[i].dst_head == best_h)
            printf("  without %-6s %s %.3f -> %.3f\n",
                   hl_head_name(m, rows[i].src_layer, rows[i].src_head, src),
                   hl_detector_name(rows[i].detector), rows[i].before, rows[i].after);
}

static void write_composition(const options *o, const hl_gpt *m, double *comp[HL_COMPOSE_KINDS],
                              double base[HL_COMPOSE_KINDS], hl_error *err)
{
    char path[4200], name[64];
    const hl_gpt_config *c = &m->cfg;
    for (int k = 0; k < HL_COMPOSE_KINDS; k++) {
        if (hl_composition_scores(m, k, comp[k], err) != HL_OK)
            heads_fail(err);
        base[k] = hl_composition_baseline(c->d_model, c->d_model / c->n_heads, 200, 1);
        snprintf(name, sizeof name, "composition_%s.png", hl_compose_kind_name(k));
        if (hl_composition_write_png(out_path(o, name, path), m, k, comp[k], base[k], err) != HL_OK)
            heads_fail(err);
    }
    if (hl_composition_write_csv(out_path(o, "composition.csv", path), m,
                                 (const double *const *)comp, err) != HL_OK ||
        hl_circuit_diagram_write(out_path(o, "circuit.png", path), m,
                                 (const double *const *)comp, base, err) != HL_OK)
        heads_fail(err);
    printf("random baseline (matrices of the same shapes, mean of 200): %.3f\n", base[0]);
}

int heads_run_circuits(const options *o)
{
    model_in in = open_model(o);
    hl_error err = {0};
    hl_probe p;
    const hl_gpt_config *c = &in.m->cfg;
    if (c->n_layers < 2)
        heads_bad_input("%s has one layer: no heads in different layers to compose", o->model);
    make_probe(&in, &p);
    const int N = hl_gpt_total_heads(c);
    double *comp[HL_COMPOSE_KINDS], base[HL_COMPOSE_KINDS];
    hl_head_scores *s = malloc(sizeof *s * (size_t)c->n_layers * c->n_heads);
    for (int k = 0; k < HL_COMPOSE_KINDS; k++)
        comp[k] = malloc(sizeof *comp[k] * (size_t)N * N);
    if (!s || !comp[0] || !comp[1] || !comp[2])
        heads_out_of_memory();
    heads_make_out_dir(o);
    write_composition(o, in.m, comp, base, &err);
    hl_ablation_effect *rows;
    int n;
    char path[4200];
    /* The causal sweep reruns the model once per head: on a large model, over
     * fewer sequences unless --sequences says how many. */
    const int swept = in.probe.sequences ? p.set->n : hl_heads_ablation_sequences(in.m, p.set);
    if (hl_heads_detect(in.m, p.set, NULL, s, &err) != HL_OK ||
        hl_heads_ablation_effects(in.m, p.set, swept, s, &rows, &n, &err) != HL_OK ||
        hl_ablation_effects_write_csv(out_path(o, "ablation_effects.csv", path), in.m, rows, n, &err) !=
            HL_OK)
        heads_fail(&err);
    printf("ablation effects over %d of the probe's %d sequences%s\n", swept, p.set->n,
           swept < p.set->n ? " (--sequences N: all N)" : "");
    print_induction_circuit(in.m, s, comp[HL_COMPOSE_K], rows, n);
    printf("wrote %s/composition.csv, composition_{q,k,v}.png, circuit.png, "
           "ablation_effects.csv\n", o->out);
    free(rows);
    free(s);
    for (int k = 0; k < HL_COMPOSE_KINDS; k++)
        free(comp[k]);
    hl_probe_free(&p);
    close_model(&in);
    return 0;
}

/* ---- report --------------------------------------------------------------------- */

/* A sentence with a repeat, for the maps of a text model given no text. */
static const char default_text[] =
    "The cat sat on the mat. Then the cat sat on the mat again, and the dog sat too.";

/* The maps' input: --text, else the start of --data (from --offset), else the
 * first toy sequence of the set, else the default sentence. */
static int32_t *report_input(const options *o, const model_in *in, const study *s, int *T)
{
    if (o->text || o->data)
        return map_input(o, in, T);
    int32_t *x = malloc(sizeof *x * (size_t)in->m->cfg.n_ctx);
    if (!x)
        heads_out_of_memory();
    if (s && s->toy) {
        *T = s->set->T;
        memcpy(x, s->set->tokens, sizeof *x * (size_t)*T);
        return x;
    }
    *T = 0;
    if (in->meta.vocab)
        *T = encode_text(in, default_text, x, in->m->cfg.n_ctx);
    else
        for (const char *c = default_text; *c && *T < in->m->cfg.n_ctx; c++)
            x[(*T)++] = (unsigned char)*c % in->m->cfg.vocab_in;
    return x;
}

int heads_run_report(const options *o)
{
    model_in in = open_model(o);
    const bool toy = in.probe.bos >= 0;
    /* A probe that does not fit the model is bad input, found before --out
     * is made (the report builds its own). */
    hl_probe p;
    make_probe(&in, &p);
    hl_probe_free(&p);
    hl_error err = {0};
    /* An evaluation set for the ablation and importance tables where there is one. */
    study s = {0};
    if (toy || o->data)
        s = heads_open_study(o);
    else if (o->curve && !in.meta.vocab)
        heads_bad_input("--curve needs a text to evaluate on, and %s has no tokenizer headlab "
                        "reads (%s)", o->model, in.meta.vocab_note);
    else if (o->curve)
        heads_bad_input("--curve on a text model needs --data FILE to evaluate on");
    int T;
    int32_t *x = report_input(o, &in, s.m ? &s : NULL, &T);
    heads_make_out_dir(o);
    char curve[4200];
    if (o->curve) {
        study pruned = heads_open_study(o); /* the curve prunes the model it is given */
        const int failed = heads_run_prune_curve(o, &pruned);
        heads_close_study(&pruned);
        if (failed) {
            free(x);
            if (s.m)
                heads_close_study(&s);
            close_model(&in);
            return 1;
        }
    }
    hl_head_report_opts ro = {.model_path = o->model, .meta = &in.meta, .probe = in.probe,
                              .vocab = in.meta.vocab, .map_tokens = x, .map_T = T,
                              .text = s.text, .text_tokens = s.text_tokens,
                              .text_windows = o->windows, .eval = s.set,
                              .curve_png = o->curve ? out_path(o, "prune_curve.png", curve) : NULL};
    if (hl_head_report_write(in.m, &ro, o->out, &err) != HL_OK)
        heads_fail(&err);
    printf("wrote %s/report.html (and the CSV and PNG files behind it)\n", o->out);
    free(x);
    if (s.m)
        heads_close_study(&s);
    close_model(&in);
    return 0;
}
