/* The model under study, its evaluation set, and the helpers the commands share. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/heads/heads.h"

/* ---- messages and files ------------------------------------------------ */

void heads_bad_input(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("heads: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

/* A file that cannot be read or written is bad input (exit 2), also when it
 * is found only while writing the results. */
static int exit_status(const hl_error *err)
{
    return err->status == HL_ERR_IO ? 2 : 1;
}

void heads_fail(const hl_error *err)
{
    fprintf(stderr, "heads: %s\n", err->message);
    exit(exit_status(err));
}

void heads_refuse(const hl_error *err)
{
    fprintf(stderr, "heads: %s\n", err->message);
    exit(err->status == HL_ERR_NOMEM ? 1 : 2);
}

void heads_out_of_memory(void)
{
    fprintf(stderr, "heads: out of memory\n");
    exit(1);
}

/* A place that cannot be written is bad input, found early. */
void heads_make_out_dir(const options *o)
{
    if (hl_fs_make_dirs(o->out))
        heads_bad_input("cannot create %s: %s", o->out, strerror(errno));
}

/* A token file's tokens (data/token_file.h), whole, when its vocabulary is
 * the model's; exits 2 otherwise. */
static int32_t *read_token_file(const char *path, const hl_vocab *vocab, size_t *n)
{
    hl_error err = {0};
    hl_token_file *f = hl_token_file_open(path, &err);
    if (!f)
        heads_bad_input("%s", err.message);
    const hl_token_header *h = hl_token_file_header(f);
    const bool same = hl_vocab_same_tokens(vocab, hl_token_file_vocab(f)) &&
                      (int64_t)h->vocab_size == hl_vocab_size(vocab);
    if (!same)
        heads_bad_input("%s was made with another vocabulary than the model's (%u tokens, %s)",
                        path, h->vocab_size, hl_vocab_kind(hl_token_file_vocab(f)));
    int32_t *tokens = malloc(sizeof *tokens * (h->n_tokens ? h->n_tokens : 1));
    if (!tokens) {
        fprintf(stderr, "heads: %s: out of memory\n", path);
        exit(1);
    }
    if (hl_token_file_read(f, 0, h->n_tokens, tokens, &err) != HL_OK)
        heads_bad_input("%s", err.message);
    *n = h->n_tokens;
    hl_token_file_close(f);
    return tokens;
}

int32_t *heads_read_tokens(const char *path, const hl_vocab *vocab, size_t *n)
{
    unsigned char magic[8];
    FILE *probe = fopen(path, "rb");
    const bool token_file = probe && fread(magic, 1, 8, probe) == 8 && hl_token_magic(magic, 8);
    if (probe)
        fclose(probe);
    if (token_file)
        return read_token_file(path, vocab, n);
    size_t size;
    unsigned char *text = hl_fs_read_file(path, &size);
    if (!text)
        heads_bad_input("cannot read %s: %s", path, strerror(errno));
    int32_t *tokens;
    hl_error err = {0};
    hl_status st = hl_vocab_encode(vocab, text, size, &tokens, n, &err);
    free(text);
    if (st != HL_OK)
        heads_fail(&err);
    return tokens;
}

FILE *heads_text_begin(text_out *t)
{
    t->text = NULL;
    t->size = 0;
    t->f = open_memstream(&t->text, &t->size);
    if (!t->f) {
        fprintf(stderr, "heads: out of memory\n");
        exit(1);
    }
    return t->f;
}

int heads_text_save(text_out *t, const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    hl_error err = {0};
    bool ok = fclose(t->f) == 0 && hl_atomic_write(path, t->text, t->size, &err) == HL_OK;
    free(t->text);
    if (!ok) {
        fprintf(stderr, "heads: %s\n", err.message[0] ? err.message : "out of memory");
        return exit_status(&err);
    }
    return 0;
}

void heads_text_save_or_exit(text_out *t, const char *dir, const char *name)
{
    const int rc = heads_text_save(t, dir, name);
    if (rc)
        exit(rc);
}

/* ---- timing -------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double heads_forward_seconds(const hl_gpt *m, const hl_eval_set *set, int runs, hl_error *err)
{
    hl_graph *g = hl_graph_new(0);
    double times[1000];
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory"), NAN;
    hl_graph_set_grad_enabled(g, false);
    hl_graph_set_training(g, false);
    for (int r = -1; r < runs; r++) {
        double t0 = hl_seconds();
        for (hl_eval_batch b = {0}; hl_eval_set_next(set, &b);) {
            hl_gpt_forward(g, m, b.tokens, b.B, set->T, NULL);
            hl_graph_reset(g);
        }
        if (r >= 0)
            times[r] = hl_seconds() - t0;
    }
    hl_graph_free(g);
    qsort(times, (size_t)runs, sizeof *times, cmp_double);
    return runs % 2 ? times[runs / 2] : (times[runs / 2 - 1] + times[runs / 2]) / 2;
}

/* ---- the model and its evaluation set ---------------------------------- */

static bool is_toy_model(const hl_gpt_config *c)
{
    return c->vocab_in == HL_TOY_VOCAB + 1 && c->vocab_out == HL_TOY_VOCAB && c->n_ctx >= HL_TOY_T;
}

static hl_eval_set *toy_set(const options *o, hl_error *err)
{
    hl_toy_batch *b = hl_toy_batch_new(o->sequences);
    if (!b)
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory"), NULL;
    hl_rng rng;
    hl_rng_seed(&rng, (uint64_t)o->seed);
    hl_toy_sample(b, &rng);
    hl_eval_set *set = hl_toy_eval_set(b, o->batch ? o->batch : HL_TOY_HELDOUT_BATCH, err);
    hl_toy_batch_free(b);
    return set;
}

/* Loads the model and builds its evaluation set; exits 2 on bad input. */
study heads_open_study(const options *o)
{
    study s = {0};
    hl_error err = {0};
    s.m = hl_gpt_load_meta(o->model, &s.meta, &err);
    if (!s.m)
        heads_refuse(&err);
    const hl_gpt_config *c = &s.m->cfg;
    if (c->n_heads > HL_HEADS_MAX)
        heads_bad_input("%s has %d heads per layer; this program handles up to %d", o->model,
                  c->n_heads, HL_HEADS_MAX);
    /* A pretrained folder without a tokenizer headlab reads has no text to
     * evaluate on: say so once, rather than ask for --data and refuse it. */
    if (!strcmp(s.meta.task, "pretrained") && !s.meta.vocab)
        heads_bad_input("%s has no tokenizer headlab reads (%s): ablate, importance and prune "
                        "evaluate on text in its tokens; scores, maps, circuits, report, "
                        "the patching commands, export and eval --token-ids work without one",
                        o->model,
                        s.meta.vocab_note);
    if (o->data) {
        if (!strcmp(s.meta.task, "toy_heads"))
            heads_bad_input("%s is a toy_heads model, evaluated on the toy task: drop --data",
                      o->model);
        if (!s.meta.vocab)
            heads_bad_input("%s is not a text model (vocabulary %d in, %d out, and no \"vocab\" "
                      "in the file): --data needs a charlm model", o->model, c->vocab_in,
                      c->vocab_out);
        s.text = heads_read_tokens(o->data, s.meta.vocab, &s.text_tokens);
        if (s.text_tokens < (size_t)c->n_ctx + 1)
            heads_bad_input("%s has %zu tokens; windows of the model's %d+1 need at least %d",
                      o->data, s.text_tokens, c->n_ctx, c->n_ctx + 1);
        const int batch = o->batch ? o->batch : 16;
        if (o->repeat && c->n_ctx / 2 < 2)
            heads_bad_input("--repeat: the model's %d positions hold no span of 2 tokens and "
                            "its repeat", c->n_ctx);
        if (o->repeat)
            s.set = hl_eval_repeat_windows(s.text, s.text_tokens, o->windows, c->n_ctx / 2, batch,
                                           &err);
        else
            s.set = hl_eval_text_windows(s.text, s.text_tokens, o->windows, c->n_ctx, batch, &err);
        snprintf(s.what, sizeof s.what, o->repeat ? "%d windows of %d tokens from %s, each "
                 "repeated" : "%d windows of %d tokens from %s", o->windows,
                 o->repeat ? c->n_ctx / 2 : c->n_ctx + 1, o->data);
    } else {
        if (!strcmp(s.meta.task, "charlm") || !strcmp(s.meta.task, "pretrained"))
            heads_bad_input("%s is a %s model: give the text to evaluate on with --data FILE",
                      o->model, s.meta.task);
        if (!is_toy_model(c))
            heads_bad_input("%s does not fit the toy task (it wants vocabulary %d in, %d out and %d "
                      "positions; the model has %d, %d, %d); for a text model give --data FILE",
                      o->model, HL_TOY_VOCAB + 1, HL_TOY_VOCAB, HL_TOY_T, c->vocab_in,
                      c->vocab_out, c->n_ctx);
        s.toy = true;
        s.set = toy_set(o, &err);
        snprintf(s.what, sizeof s.what, "%d toy sequences from seed %d%s", o->sequences, o->seed,
                 o->seed == HL_TOY_HELDOUT_SEED && o->sequences == HL_TOY_HELDOUT_SEQUENCES ? " (toy_heads' held-out set)" : "");
    }
    if (!s.set) {
        fprintf(stderr, "heads: %s\n", err.message[0] ? err.message : "out of memory");
        exit(1);
    }
    return s;
}

void heads_close_study(study *s)
{
    hl_gpt_free(s->m);
    hl_gpt_meta_clear(&s->meta);
    hl_eval_set_free(s->set);
    free(s->text);
}

int heads_total(const hl_gpt *m)
{
    int n = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        n += hl_gpt_layer_heads(&m->cfg, l);
    return n;
}

/* One head at *p, as "1.3" or as the files name it, "L1H3" (either case);
 * moves *p past it. */
static bool read_head(const char **p, long *l, long *h)
{
    const bool named = **p == 'L' || **p == 'l';
    const char *q = *p + named;
    char *end;
    if (*q < '0' || *q > '9')
        return false;
    *l = strtol(q, &end, 10);
    if (named ? *end != 'H' && *end != 'h' : *end != '.')
        return false;
    q = end + 1;
    if (*q < '0' || *q > '9')
        return false;
    *h = strtol(q, &end, 10);
    *p = end;
    return true;
}

/* --heads "1.3,0.2" or "L1H3,L0H2" (indices as trained) -> the heads of m;
 * exits 2 on a head it does not have. */
hl_head_set heads_parse_list(const hl_gpt *m, const char *list)
{
    hl_head_set set = {0};
    for (const char *p = list; *p;) {
        long l, h;
        if (!read_head(&p, &l, &h) || (*p && *p != ',') || (*p == ',' && !p[1]))
            heads_bad_input("--heads wants heads separated by commas, each layer.head or "
                            "LlayerHhead (e.g. 1.3,0.2 or L1H3,L0H2), not \"%s\"", list);
        if (l < 0 || l >= m->cfg.n_layers || h < 0 || h >= m->cfg.n_heads)
            heads_bad_input("head L%ldH%ld is out of range: the model has layers 0..%d, heads "
                            "0..%d per layer as trained", l, h, m->cfg.n_layers - 1,
                            m->cfg.n_heads - 1);
        int current = hl_gpt_head_current(m, (int)l, (int)h);
        if (current < 0)
            heads_bad_input("head L%ldH%ld was pruned from this model", l, h);
        set.on[l][current] = true;
        p += *p == ',';
    }
    if (!hl_head_set_count(&set))
        heads_bad_input("--heads names no head");
    return set;
}

void heads_print_model(const study *s, const char *path)
{
    char pruned[1024] = "";
    if (hl_head_set_count(&s->meta.pruned))
        hl_pruned_heads_format(&s->meta.pruned, &s->m->cfg, pruned, sizeof pruned);
    printf("model %s: %s, %d layers x %d heads%s%s%s, %zu parameters\nevaluation: %s\n", path,
           s->meta.task[0] ? s->meta.task : "no task recorded", s->m->cfg.n_layers,
           s->m->cfg.n_heads, pruned[0] ? " (pruned: " : "", pruned, pruned[0] ? ")" : "",
           hl_params_n_values(s->m->params), s->what);
}

void heads_print_result(const hl_eval_set *set, const char *what, const hl_eval_result *r)
{
    printf("%s:", what);
    for (int k = 0; k < set->n_groups; k++)
        printf("%s %s loss %.4f, accuracy %.4f", k ? ";" : "", set->group_names[k], r->loss[k],
               r->accuracy[k]);
    printf("\n");
}

