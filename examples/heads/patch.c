/*
 * heads patch, paths, attrib, logit-lens: causal tools between a clean and a
 * corrupted input (analysis/patching.h).
 *
 * The task is the built-in induction task, two inputs of one length
 * (--clean, --corrupt: texts for byte models, token numbers for the others)
 * read at --positions, or a file of such pairs (--pairs, analysis/patch_pairs.h).
 *
 * The induction task (hl_patch_induction_task) corrupts only the
 * previous-token labels of the answers: restoring the induction heads'
 * outputs (z) restores the answer, and so does restoring their keys alone, or
 * the previous-token head's output reaching them through K (path patching),
 * while their values and queries hold nothing the corrupted run lacks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>

#include "analysis/head_maps.h"
#include "analysis/patch_pairs.h"
#include "analysis/patching.h"
#include "examples/heads/heads.h"
#include "tasks/probe.h"

/* The model and the task it is studied on. */
typedef struct {
    hl_gpt *m;
    hl_gpt_meta meta; /* meta.vocab: a text model's tokens, else NULL */
    hl_patch_task t;
    int32_t *buf;         /* the task's four (B,T) arrays, but for --pairs */
    hl_patch_pairs pairs; /* --pairs: the task, each pair's line and length */
    char what[4300];
} patch_in;

/* The built-in induction task (analysis/patching.h): o->sequences sequences. */
static void induction_task(const options *o, patch_in *in)
{
    const hl_gpt_config *c = &in->m->cfg;
    const bool toy = c->vocab_in == HL_TOY_VOCAB + 1 && c->vocab_out == HL_TOY_VOCAB;
    const hl_probe_opts text = in->meta.vocab ? hl_probe_text_opts(in->meta.vocab)
                                              : (hl_probe_opts){0};
    const int lo = text.token_lo;
    const int hi = text.token_hi ? text.token_hi
                                 : (c->vocab_in < c->vocab_out ? c->vocab_in : c->vocab_out);
    hl_error err = {0};
    if (hl_patch_induction_task(in->m, o->sequences, toy ? HL_TOY_BOS : -1, lo, hi,
                                (uint64_t)o->seed, &in->t, &in->buf, &err) != HL_OK) {
        if (err.status == HL_ERR_NOMEM)
            heads_out_of_memory();
        heads_bad_input("%s: %s", o->model, err.message);
    }
    const int half = (in->t.T - (toy ? 1 : 0)) / 2;
    snprintf(in->what, sizeof in->what, "induction task: %d sequences of %d random tokens "
             "repeated%s; corrupted: the first half's tokens at even offsets drawn again; "
             "scored at the second half's even offsets", o->sequences, half,
             toy ? " after BOS" : "");
}

/* "3,7" -> the positions, each in 0..T-2 (a next byte to read). */
static void parse_positions(const char *list, int T, bool *at)
{
    const size_t n = strlen(list);
    if (n && list[n - 1] == ',') /* as --heads and a --pairs file */
        heads_bad_input("--positions wants numbers separated by commas, not \"%s\"", list);
    for (const char *p = list; *p;) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p || (*end && *end != ','))
            heads_bad_input("--positions wants numbers separated by commas, not \"%s\"", list);
        if (t < 0 || t > T - 2)
            heads_bad_input("position %ld is out of range: the inputs have %d tokens, so "
                            "positions 0..%d have a next one to read", t, T, T - 2);
        at[t] = true;
        p = *end ? end + 1 : end;
    }
}

/* --clean or --corrupt as tokens: as the vocabulary encodes it (text
 * models) or token numbers separated by spaces or commas (other models); at
 * most n_ctx. Returns the count. */
static int input_tokens(const char *flag, const char *text, const patch_in *in, int32_t *x)
{
    const int max = in->m->cfg.n_ctx;
    if (in->meta.vocab) {
        int32_t *tokens;
        size_t n;
        hl_error err = {0};
        if (hl_vocab_encode(in->meta.vocab, (const unsigned char *)text, strlen(text), &tokens,
                            &n, &err) != HL_OK)
            heads_fail(&err);
        if (n > (size_t)max) {
            free(tokens);
            heads_bad_input("--%s is %zu tokens, longer than the model's context of %d", flag,
                            n, max);
        }
        memcpy(x, tokens, sizeof *x * n);
        free(tokens);
        return (int)n;
    }
    int n = 0;
    for (const char *c = text; *c; n++) {
        if (n == max)
            heads_bad_input("--%s is longer than the model's context of %d tokens", flag, max);
        char *end;
        long v = strtol(c, &end, 10);
        if (end == c || v < 0 || v >= in->m->cfg.vocab_in)
            heads_bad_input("--%s for this model is token numbers 0..%d separated by spaces, "
                            "not \"%s\"", flag, in->m->cfg.vocab_in - 1, text);
        x[n] = (int32_t)v;
        c = end + strspn(end, " ,");
    }
    return n;
}

/* Two inputs of one length: the clean one's next tokens are the answers, the
 * corrupted one's the wrong tokens (logit difference). */
static void text_task(const options *o, patch_in *in)
{
    const int max = in->m->cfg.n_ctx;
    /* Kept reachable from here until the end: a bad input exits (2) from
     * below, and the leak checker of the sanitizer build must not count it. */
    static bool *at;
    in->buf = malloc(sizeof *in->buf * (size_t)max * 4);
    at = calloc((size_t)max, sizeof *at);
    if (!at || !in->buf)
        heads_out_of_memory();
    int32_t *clean = in->buf, *corrupt = clean + max;
    const int T = input_tokens("clean", o->clean, in, clean);
    const int T2 = input_tokens("corrupt", o->corrupt, in, corrupt);
    if (T2 != T)
        heads_bad_input("--clean has %d tokens and --corrupt %d: patching needs one length", T,
                        T2);
    if (T < 2)
        heads_bad_input("the inputs have %d tokens; they need 2 or more", T);
    if (o->positions)
        parse_positions(o->positions, T, at);
    else
        at[T - 2] = true;
    int32_t *answer = corrupt + max, *wrong = answer + max;
    for (int t = 0; t < T; t++) {
        answer[t] = at[t] ? clean[t + 1] : -1;
        wrong[t] = at[t] ? corrupt[t + 1] : -1;
        if (at[t] && (answer[t] >= in->m->cfg.vocab_out || wrong[t] >= in->m->cfg.vocab_out))
            heads_bad_input("position %d: token %d is not an output token (vocab_out %d)", t,
                            answer[t] >= in->m->cfg.vocab_out ? answer[t] : wrong[t],
                            in->m->cfg.vocab_out);
        if (at[t] && o->metric_diff && answer[t] == wrong[t])
            heads_bad_input("position %d: both inputs continue with the same token, so the "
                            "logit difference there is 0 by construction", t);
    }
    free(at);
    at = NULL;
    in->t = (hl_patch_task){.B = 1, .T = T, .clean = clean, .corrupt = corrupt,
                            .answer = answer, .wrong = wrong};
    snprintf(in->what, sizeof in->what, "clean \"%.60s\", corrupted \"%.60s\"", o->clean,
             o->corrupt);
}

/* --pairs FILE: every line a pair (analysis/patch_pairs.h). */
static void pairs_task(const options *o, patch_in *in)
{
    size_t size;
    unsigned char *text = hl_fs_read_file(o->pairs, &size);
    if (!text) {
        /* --pairs N was the induction task's size before it became a file. */
        const bool number = strspn(o->pairs, "0123456789") == strlen(o->pairs);
        heads_bad_input("cannot read --pairs %s: %s%s", o->pairs, strerror(errno),
                        number ? " (--pairs takes a file of pairs; the induction task's "
                                 "size is --sequences N)" : "");
    }
    hl_error err = {0};
    const hl_status s = hl_patch_pairs_parse((const char *)text, size, o->pairs, in->meta.vocab,
                                             &in->m->cfg, o->metric_diff ? HL_METRIC_LOGIT_DIFF
                                                                         : HL_METRIC_LOSS,
                                             &in->pairs, &err);
    free(text);
    if (s == HL_ERR_NOMEM)
        heads_fail(&err);
    if (s != HL_OK)
        heads_bad_input("%s", err.message);
    const hl_patch_pairs *p = &in->pairs;
    int shortest = p->task.T, scored = 0, blind = 0, first_line = 0;
    for (int i = 0; i < p->n; i++) {
        shortest = p->length[i] < shortest ? p->length[i] : shortest;
        scored += p->scored[i];
        /* A position before the texts first differ reads one prefix twice:
         * both runs give it the same metric, and patching cannot move it. */
        const size_t row = (size_t)i * p->task.T;
        int same = 0;
        while (same < p->length[i] && p->task.clean[row + same] == p->task.corrupt[row + same])
            same++;
        for (int t = 0; t < same; t++)
            if (p->task.answer[row + t] >= 0 && !blind++)
                first_line = p->line[i];
    }
    if (blind)
        printf("note: %d scored position%s (the first on line %d of %s) come%s before the "
               "clean and corrupted texts first differ: both runs read the same there, and "
               "%s nothing to any score\n", blind, blind == 1 ? "" : "s", first_line, o->pairs,
               blind == 1 ? "s" : "", blind == 1 ? "it adds" : "they add");
    in->t = p->task;
    snprintf(in->what, sizeof in->what, "pairs %s: %d pair%s of %d..%d tokens (padded to %d "
             "after their ends), %d scored positions", o->pairs, p->n, p->n == 1 ? "" : "s",
             shortest, p->task.T, p->task.T, scored);
}

static patch_in open_patch_model(const options *o)
{
    /* Static: what it holds stays reachable when a bad input exits (2) below,
     * so the sanitizer build's leak checker does not count it. */
    static patch_in in;
    hl_error err = {0};
    if (!(in.m = hl_gpt_load_meta(o->model, &in.meta, &err)))
        heads_refuse(&err);
    if (o->pairs)
        pairs_task(o, &in);
    else if (o->clean)
        text_task(o, &in);
    else
        induction_task(o, &in);
    in.t.metric = o->metric_diff ? HL_METRIC_LOGIT_DIFF : HL_METRIC_LOSS;
    double clean = NAN, corrupt = NAN;
    /* The logit lens reads the clean run alone (the corrupted text gives the
     * wrong tokens): two runs that score the same leave it its work. */
    if (hl_patch_baselines(in.m, &in.t, &clean, &corrupt, &err) != HL_OK &&
        !(o->cmd == CMD_LOGIT_LENS && !isnan(clean) && !isnan(corrupt)))
        heads_refuse(&err);
    printf("%s\n%s\n%s: clean %.4f, corrupted %.4f (scores: 0 = as corrupted, 1 = as clean)\n",
           o->model, in.what, o->metric_diff ? "logit difference" : "loss", clean, corrupt);
    if (fabs(clean - corrupt) < 0.05 && o->cmd != CMD_LOGIT_LENS)
        printf("note: the runs differ by %.4f only; every score below is a ratio to that "
               "difference, and small changes make large ratios\n", fabs(clean - corrupt));
    return in;
}

/* pairs.csv: each pair's (sequence's) own metric on the clean and on the
 * corrupted input, the line of --pairs FILE it is on (empty for the other
 * tasks), its tokens and scored positions. */
static void write_pairs_csv(const options *o, const patch_in *in)
{
    const hl_patch_task *t = &in->t;
    double *clean = malloc(sizeof *clean * 2 * (size_t)t->B), *corrupt = clean + t->B;
    if (!clean)
        heads_out_of_memory();
    hl_error err = {0};
    if (hl_patch_sequence_metrics(in->m, t, clean, corrupt, &err) != HL_OK)
        heads_fail(&err);
    text_out out;
    FILE *f = heads_text_begin(&out);
    fprintf(f, "pair,line,tokens,positions,clean,corrupted\n");
    for (int b = 0; b < t->B; b++) {
        int scored = 0;
        for (int i = 0; i < t->T; i++)
            scored += t->answer[(size_t)b * t->T + i] >= 0;
        fprintf(f, "%d,", b);
        if (o->pairs)
            fprintf(f, "%d", in->pairs.line[b]);
        fprintf(f, ",%d,%d,%.9g,%.9g\n", o->pairs ? in->pairs.length[b] : t->T, scored,
                clean[b], corrupt[b]);
    }
    free(clean);
    heads_text_save_or_exit(&out, o->out, "pairs.csv");
}

/* --out made and pairs.csv written, once the inputs are known to be good. */
static void start_output(const options *o, const patch_in *in)
{
    heads_make_out_dir(o);
    write_pairs_csv(o, in);
    printf("wrote %s/pairs.csv (each pair's own metric)\n", o->out);
}

static void close_patch_model(patch_in *in)
{
    hl_patch_pairs_free(&in->pairs);
    free(in->buf);
    hl_gpt_free(in->m);
    hl_gpt_meta_clear(&in->meta);
}

static const char *act_name(hl_act a)
{
    static const char *const names[] = {"q", "k", "v", "pattern", "z", "resid_pre", "resid_post"};
    return names[a];
}

/* --act LIST -> acts (order kept, each once); `allowed` are the kinds the
 * command takes, and acts has room for n_allowed. */
static int parse_acts(const char *list, const hl_act *allowed, int n_allowed, hl_act *acts)
{
    int n = 0;
    for (const char *p = list; *p;) {
        const size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < n_allowed; i++)
            if (len == strlen(act_name(allowed[i])) && !strncmp(p, act_name(allowed[i]), len))
                found = i;
        if (found < 0 && len == 5 && !strncmp(p, "resid", 5))
            for (int i = 0; i < n_allowed; i++)
                found = allowed[i] == HL_ACT_RESID_PRE ? i : found;
        if (found < 0) {
            char names[96] = "";
            for (int i = 0; i < n_allowed; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         i ? ", " : "",
                         allowed[i] == HL_ACT_RESID_PRE ? "resid" : act_name(allowed[i]));
            heads_bad_input("--act: unknown activation \"%.*s\" (this command takes %s)",
                            (int)len, p, names);
        }
        for (int i = 0; i < n; i++)
            if (acts[i] == allowed[found])
                heads_bad_input("--act: \"%.*s\" named twice", (int)len, p);
        acts[n++] = allowed[found]; /* at most n_allowed, all different */
        p += len;
        if (*p && !*++p)
            heads_bad_input("--act: \"%s\" ends in a comma", list);
    }
    if (!n)
        heads_bad_input("--act names no activation");
    return n;
}

/* A (rows, cols) heatmap of values (NaN drawn red), min..max. */
static void write_grid(const char *dir, const char *name, const double *v, int rows, int cols,
                       const char *const *row_labels, const char *const *col_labels,
                       const char *title)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    hl_error err = {0};
    hl_tensor *grid = hl_tensor_new_checked("grid", 2, (int[]){rows, cols}, false, &err);
    if (!grid)
        heads_fail(&err);
    for (int i = 0; i < rows * cols; i++)
        grid->data[i] = (hl_real)v[i];
    hl_heatmap_opts opts = {.cell_px = cols > 64 ? 6 : 24, .range = HL_HEATMAP_RANGE_GLOBAL,
                            .title = title, .row_labels = row_labels,
                            .col_labels = col_labels};
    if (hl_heatmap_write(grid, path, &opts, &err) != HL_OK)
        heads_fail(&err);
    hl_tensor_free(grid);
}

/* Every head's name in flat order (hl_gpt_head_index), malloc'ed. */
static const char **flat_names(const hl_gpt *m, char (**store)[HL_HEAD_NAME_MAX])
{
    const int N = hl_gpt_total_heads(&m->cfg);
    *store = malloc(sizeof **store * (size_t)N);
    const char **names = malloc(sizeof *names * (size_t)N);
    if (!*store || !names)
        heads_out_of_memory();
    for (int l = 0, i = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++, i++)
            names[i] = hl_head_name(m, l, h, (*store)[i]);
    return names;
}

/* Per-head values (row stride n_heads) in flat order, NaN past pruned heads dropped. */
static double *flat_values(const hl_gpt *m, const double *v, int per)
{
    const int N = hl_gpt_total_heads(&m->cfg);
    double *f = malloc(sizeof *f * (size_t)N * per);
    if (!f)
        heads_out_of_memory();
    for (int l = 0, i = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++, i++)
            memcpy(f + (size_t)i * per, v + ((size_t)l * m->cfg.n_heads + h) * per,
                   sizeof *f * (size_t)per);
    return f;
}

/* The per-head table: a row per layer, a column per head (as trained). */
static void print_head_grid(const hl_gpt *m, const double *v, const char *what)
{
    printf("\n%s (rows: layers; columns: heads as trained)\n     ", what);
    for (int h = 0; h < m->cfg.n_heads; h++)
        printf("  %7s%d", "H", h);
    printf("\n");
    for (int l = 0; l < m->cfg.n_layers; l++) {
        printf("L%-3d", l);
        for (int h = 0; h < m->cfg.n_heads; h++) {
            const int current = hl_gpt_head_current(m, l, h);
            if (current < 0)
                printf("  %8s", "pruned");
            else
                printf("  %8.4f", v[l * m->cfg.n_heads + current]);
        }
        printf("\n");
    }
}

static void fail_if(hl_status s, const hl_error *err)
{
    if (s != HL_OK)
        heads_fail(err);
}

/* ---- patch -------------------------------------------------------------------- */

int heads_run_patch(const options *o)
{
    static const hl_act allowed[] = {HL_ACT_Z, HL_ACT_Q, HL_ACT_K, HL_ACT_V, HL_ACT_PATTERN,
                                     HL_ACT_RESID_PRE};
    hl_act acts[8];
    const int n_acts = parse_acts(o->act ? o->act : "z", allowed, 6, acts);
    patch_in in = open_patch_model(o);
    start_output(o, &in);
    const hl_gpt *m = in.m;
    const int L = m->cfg.n_layers, T = in.t.T, N = hl_gpt_total_heads(&m->cfg);
    char (*store)[HL_HEAD_NAME_MAX];
    const char **names = flat_names(m, &store);
    hl_error err = {0};
    for (int a = 0; a < n_acts; a++) {
        const hl_act act = acts[a];
        char csv[64], png[64], title[160];
        text_out t;
        FILE *f = heads_text_begin(&t);
        if (act == HL_ACT_RESID_PRE) {
            double *v = malloc(sizeof *v * (size_t)(L + 1) * T);
            if (!v)
                heads_out_of_memory();
            const double t0 = hl_seconds();
            fail_if(hl_patch_resid(m, &in.t, v, &err), &err);
            printf("\nresidual stream (entering each layer; layer %d = after the last), one "
                   "position at a time: %.2f s\n", L, hl_seconds() - t0);
            fprintf(f, "layer,position,score\n");
            for (int l = 0; l <= L; l++)
                for (int p = 0; p < T; p++)
                    fprintf(f, "%d,%d,%.6f\n", l, p, v[(size_t)l * T + p]);
            heads_text_save_or_exit(&t, o->out, "patch_resid.csv");
            char rl[HL_GPT_MAX_LAYERS + 1][8];
            const char *rows[HL_GPT_MAX_LAYERS + 1];
            for (int l = 0; l <= L; l++) {
                snprintf(rl[l], sizeof rl[l], l < L ? "L%d" : "out", l);
                rows[l] = rl[l];
            }
            write_grid(o->out, "patch_resid.png", v, L + 1, T, rows, NULL,
                       "residual stream patched per (layer, position)");
            printf("wrote %s/patch_resid.csv, %s/patch_resid.png\n", o->out, o->out);
            free(v);
            continue;
        }
        const int per = o->per_position ? T : 1;
        double *v = malloc(sizeof *v * (size_t)L * m->cfg.n_heads * per);
        if (!v)
            heads_out_of_memory();
        const double t0 = hl_seconds();
        fail_if(hl_patch_heads(m, &in.t, act, o->per_position, v, &err), &err);
        const double seconds = hl_seconds() - t0;
        snprintf(csv, sizeof csv, "patch_%s%s.csv", act_name(act), per > 1 ? "_pos" : "");
        snprintf(png, sizeof png, "patch_%s%s.png", act_name(act), per > 1 ? "_pos" : "");
        fprintf(f, per > 1 ? "layer,head,position,score\n" : "layer,head,score\n");
        for (int l = 0; l < L; l++)
            for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++)
                for (int p = 0; p < per; p++) {
                    fprintf(f, "%d,%d,", l, m->head_original[l][h]);
                    if (per > 1)
                        fprintf(f, "%d,", p);
                    fprintf(f, "%.6f\n", v[((size_t)l * m->cfg.n_heads + h) * per + p]);
                }
        heads_text_save_or_exit(&t, o->out, csv);
        double *flat = flat_values(m, v, per);
        snprintf(title, sizeof title, "activation patching of %s%s", act_name(act),
                 per > 1 ? " per position (rows: heads, columns: positions)" : "");
        write_grid(o->out, png, flat, per > 1 ? N : 1, per > 1 ? T : N, per > 1 ? names : NULL,
                   per > 1 ? NULL : names, title);
        if (per == 1) {
            snprintf(title, sizeof title, "activation patching of %s, all positions (%.2f s)",
                     act_name(act), seconds);
            print_head_grid(m, v, title);
        } else {
            printf("\nactivation patching of %s per (head, position): %.2f s\n", act_name(act),
                   seconds);
        }
        printf("wrote %s/%s, %s/%s\n", o->out, csv, o->out, png);
        free(flat);
        free(v);
    }
    free(store);
    free(names);
    close_patch_model(&in);
    return 0;
}

/* ---- paths ---------------------------------------------------------------------- */

int heads_run_paths(const options *o)
{
    static const hl_act allowed[] = {HL_ACT_Q, HL_ACT_K, HL_ACT_V};
    hl_act acts[4];
    const int n_acts = parse_acts(o->act ? o->act : "q,k,v", allowed, 3, acts);
    patch_in in = open_patch_model(o);
    const hl_gpt *m = in.m;
    const int L = m->cfg.n_layers;
    if (L < 2)
        heads_bad_input("%s has one layer: a path needs a sender and a later receiver", o->model);
    /* The senders are checked before start_output writes anything. */
    const hl_head_set senders = o->heads ? heads_parse_list(m, o->heads) : (hl_head_set){0};
    bool before_last = !o->heads;
    for (int l = 0; l < L - 1; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++)
            before_last |= senders.on[l][h];
    if (!before_last)
        heads_bad_input("every --heads sender is in the last layer (%d) of %s: a path needs a "
                        "sender and a later receiver", L - 1, o->model);
    start_output(o, &in);
    const int N = hl_gpt_total_heads(&m->cfg);
    char (*store)[HL_HEAD_NAME_MAX];
    const char **names = flat_names(m, &store);
    double *v = malloc(sizeof *v * (size_t)N * N);
    if (!v)
        heads_out_of_memory();
    hl_error err = {0};
    for (int a = 0; a < n_acts; a++) {
        const double t0 = hl_seconds();
        fail_if(hl_patch_paths_from(m, &in.t, acts[a], o->heads ? &senders : NULL, v, &err),
                &err);
        const double seconds = hl_seconds() - t0;
        char csv[32], png[32], title[128];
        snprintf(csv, sizeof csv, "paths_%s.csv", act_name(acts[a]));
        snprintf(png, sizeof png, "paths_%s.png", act_name(acts[a]));
        text_out t;
        FILE *f = heads_text_begin(&t);
        fprintf(f, "sender,receiver,score\n");
        int best = -1;
        for (int i = 0; i < N * N; i++) {
            if (isnan(v[i]))
                continue;
            fprintf(f, "%s,%s,%.6f\n", names[i / N], names[i % N], v[i]);
            if (best < 0 || v[i] > v[best])
                best = i;
        }
        heads_text_save_or_exit(&t, o->out, csv);
        snprintf(title, sizeof title, "path patching through %s (rows: sender, columns: receiver)",
                 act_name(acts[a]));
        write_grid(o->out, png, v, N, N, names, names, title);
        printf("\npath patching through %s: %.2f s; ", act_name(acts[a]), seconds);
        /* Every path scores NaN only when each patched run's metric is NaN. */
        if (best < 0)
            printf("no path has a finite score\n");
        else
            printf("the strongest path %s -> %s: %.4f\n", names[best / N], names[best % N],
                   v[best]);
        for (int s = 0; s < N; s++) {
            bool any = false;
            for (int r = 0; r < N; r++)
                if (!isnan(v[s * N + r])) {
                    if (!any)
                        printf("  %-6s ->", names[s]);
                    any = true;
                    printf(" %s %.3f", names[r], v[s * N + r]);
                }
            if (any)
                printf("\n");
        }
        printf("wrote %s/%s, %s/%s\n", o->out, csv, o->out, png);
    }
    free(v);
    free(store);
    free(names);
    close_patch_model(&in);
    return 0;
}

/* ---- attrib ----------------------------------------------------------------------- */

/* Pearson's correlation of the finite pairs. */
static double correlation(const double *x, const double *y, int n)
{
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(x[i]) || isnan(y[i]))
            continue;
        sx += x[i], sy += y[i], sxx += x[i] * x[i], syy += y[i] * y[i], sxy += x[i] * y[i];
        k++;
    }
    const double vx = sxx - sx * sx / k, vy = syy - sy * sy / k;
    return vx > 0 && vy > 0 ? (sxy - sx * sy / k) / sqrt(vx * vy) : NAN;
}

int heads_run_attrib(const options *o)
{
    static const hl_act allowed[] = {HL_ACT_Z, HL_ACT_Q, HL_ACT_K, HL_ACT_V, HL_ACT_PATTERN};
    hl_act acts[8];
    const int n_acts = parse_acts(o->act ? o->act : "z", allowed, 5, acts);
    patch_in in = open_patch_model(o);
    start_output(o, &in);
    const hl_gpt *m = in.m;
    const int cells = m->cfg.n_layers * m->cfg.n_heads;
    double *patched = malloc(sizeof *patched * (size_t)cells);
    double *attrib = malloc(sizeof *attrib * (size_t)cells);
    if (!patched || !attrib)
        heads_out_of_memory();
    hl_error err = {0};
    for (int a = 0; a < n_acts; a++) {
        double t0 = hl_seconds();
        fail_if(hl_patch_attrib_heads(m, &in.t, acts[a], false, attrib, &err), &err);
        const double t_attrib = hl_seconds() - t0;
        t0 = hl_seconds();
        fail_if(hl_patch_heads(m, &in.t, acts[a], false, patched, &err), &err);
        const double t_patch = hl_seconds() - t0;
        char csv[32];
        snprintf(csv, sizeof csv, "attrib_%s.csv", act_name(acts[a]));
        text_out t;
        FILE *f = heads_text_begin(&t);
        fprintf(f, "layer,head,activation_patching,attribution_patching\n");
        printf("\n%s: attribution patching (%.2f s: 2 forward passes, 1 backward) beside "
               "activation patching (%.2f s)\n%-6s  %10s  %10s\n", act_name(acts[a]), t_attrib,
               t_patch, "head", "activation", "attribution");
        for (int l = 0; l < m->cfg.n_layers; l++)
            for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++) {
                const int i = l * m->cfg.n_heads + h;
                char name[HL_HEAD_NAME_MAX];
                fprintf(f, "%d,%d,%.6f,%.6f\n", l, m->head_original[l][h], patched[i], attrib[i]);
                printf("%-6s  %10.4f  %10.4f\n", hl_head_name(m, l, h, name), patched[i],
                       attrib[i]);
            }
        heads_text_save_or_exit(&t, o->out, csv);
        printf("correlation (Pearson) of the two over the heads: %.3f\nwrote %s/%s\n",
               correlation(patched, attrib, cells), o->out, csv);
    }
    free(patched);
    free(attrib);
    close_patch_model(&in);
    return 0;
}

/* ---- logit-lens ------------------------------------------------------------------- */

enum { LENS_TOP = 5 };

int heads_run_logit_lens(const options *o)
{
    patch_in in = open_patch_model(o);
    start_output(o, &in);
    const hl_gpt *m = in.m;
    const int L = m->cfg.n_layers, T = in.t.T;
    double *metric = malloc(sizeof *metric * (size_t)(L + 1));
    double *dla = malloc(sizeof *dla * (size_t)L * m->cfg.n_heads);
    int32_t *top = malloc(sizeof *top * (size_t)(L + 1) * T * LENS_TOP);
    if (!metric || !dla || !top)
        heads_out_of_memory();
    hl_error err = {0};
    fail_if(hl_patch_logit_lens(m, &in.t, LENS_TOP, metric, top, &err), &err);
    fail_if(hl_patch_logit_attribution(m, &in.t, dla, &err), &err);
    /* The last scored position of sequence 0, where the lens is printed. */
    int at = T - 2;
    for (int t = 0; t < T; t++)
        if (in.t.answer[t] >= 0)
            at = t;
    char label[HL_TOKEN_LABEL_MAX];
    printf("\nlogit lens (the stream read through the final LayerNorm and unembedding), "
           "sequence 0 at position %d, answer %s:\n%-8s  %10s  top %d\n", at,
           hl_token_label(in.t.answer[at], in.meta.vocab, label), "stream",
           o->metric_diff ? "logit diff" : "loss", LENS_TOP);
    text_out t;
    FILE *f = heads_text_begin(&t);
    fprintf(f, "layer,metric,position,top\n");
    for (int l = 0; l <= L; l++) {
        char name[16];
        snprintf(name, sizeof name, l < L ? "L%d in" : "out", l);
        printf("%-8s  %10.4f ", name, metric[l]);
        for (int p = 0; p < T; p++) {
            fprintf(f, "%d,%.6f,%d,", l, metric[l], p);
            for (int i = 0; i < LENS_TOP; i++) {
                const int32_t tok = top[((size_t)l * T + p) * LENS_TOP + i];
                fprintf(f, "%s%d", i ? " " : "", tok);
                if (p == at)
                    printf(" %s", hl_token_label(tok, in.meta.vocab, label));
            }
            fputc('\n', f);
        }
        printf("\n");
    }
    heads_text_save_or_exit(&t, o->out, "logit_lens.csv");
    print_head_grid(m, dla, o->metric_diff ? "direct logit attribution to the logit difference"
                                           : "direct logit attribution to the answer's logit");
    FILE *g = heads_text_begin(&t);
    fprintf(g, "layer,head,direct_logit_attribution\n");
    for (int l = 0; l < L; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++)
            fprintf(g, "%d,%d,%.6f\n", l, m->head_original[l][h], dla[l * m->cfg.n_heads + h]);
    heads_text_save_or_exit(&t, o->out, "dla.csv");
    printf("wrote %s/logit_lens.csv, %s/dla.csv\n", o->out, o->out);
    free(metric);
    free(dla);
    free(top);
    close_patch_model(&in);
    return 0;
}
