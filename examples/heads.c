/*
 * heads: what each attention head of a trained model is worth — ablation,
 * importance and pruning.
 *
 *     build/heads ablate     --model FILE [--heads L.H,...] [--data FILE] [--out DIR]
 *     build/heads importance --model FILE [--data FILE] [--out DIR]
 *     build/heads prune      --model FILE --heads L.H,... [--data FILE] [--out DIR]
 *     build/heads prune      --model FILE --curve [--step-fraction X] [--finetune N] ...
 *
 * The evaluation set: for a toy_heads model, the toy generator (by default
 * toy_heads' own held-out set, 1000 sequences from seed 1000003), scored on
 * the repeated half ("scored" targets) and on the rest ("other"); for a
 * charlm model, --data FILE cut into evenly spaced windows of n_ctx+1 bytes.
 * Heads are named L<layer>H<head> by their index in the model as trained, also
 * after pruning. Writes into DIR (default out/heads): ablation.csv,
 * importance.csv and importance.png, pruned.safetensors, prune_curve.csv and
 * prune_curve.png. Run with --help for every option.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "viz/plot.h"
#include "io/fs.h"
#include "headlab.h"
#include "analysis/heads.h"
#include "analysis/toy_task.h"

#define TOY_SEED 1000003     /* toy_heads' held-out set */
#define FINETUNE_SEED 777    /* fine-tuning data, apart from the evaluation set */

typedef enum { CMD_ABLATE, CMD_IMPORTANCE, CMD_PRUNE } command;

typedef struct {
    command cmd;
    const char *model, *data, *finetune_data, *out, *heads;
    int seed, sequences, windows, batch, threads, finetune, timing_runs;
    bool curve;
    double step_fraction, lr;
    /* The last flag seen that only --curve, only a toy model or only a text uses. */
    const char *curve_flag, *toy_flag, *text_flag;
} options;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: heads ablate     --model FILE [--heads L.H,...] [options]\n"
        "       heads importance --model FILE [options]\n"
        "       heads prune      --model FILE --heads L.H,... [options]\n"
        "       heads prune      --model FILE --curve [--step-fraction X] [--finetune N]\n"
        "What each attention head of a toy_heads or charlm model is worth.\n"
        "  ablate      loss and accuracy with each head (or the --heads set together)\n"
        "              gated to 0 (zero ablation) and replaced by its mean output (mean\n"
        "              ablation), against the unablated model: a ranked table, ablation.csv\n"
        "  importance  mean |dL/dgate| per head, normalised per layer (Michel et al.\n"
        "              2019): a ranked table, importance.csv, importance.png\n"
        "  prune       removes the --heads set from the weights and writes the smaller\n"
        "              model to pruned.safetensors; with --curve, prunes the least\n"
        "              important heads step by step: prune_curve.csv, prune_curve.png\n"
        "Options:\n"
        "  --model FILE          model.safetensors or checkpoint.safetensors (toy_heads,\n"
        "                        charlm, or a model pruned by this program)\n"
        "  --out DIR             where the files go (out/heads)\n"
        "  --heads L.H,...       heads by layer and head index as trained, e.g. 1.3,0.2\n"
        "  --data FILE           charlm models: the text to evaluate on\n"
        "  --windows N           charlm: evenly spaced windows of n_ctx+1 bytes (64)\n"
        "  --seed N              toy models: seed of the evaluation sequences (1000003,\n"
        "                        toy_heads' held-out set)\n"
        "  --sequences N         toy models: evaluation sequences (1000)\n"
        "  --batch N             sequences per forward pass (toy 250, charlm 16); the\n"
        "                        importance takes one backward pass per batch\n"
        "  --threads N           OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
        "prune --curve:\n"
        "  --step-fraction X     share of the remaining heads pruned per step (0.1; at\n"
        "                        least one head per step, never a layer's last head)\n"
        "  --finetune N          AdamW steps after each pruning step (0)\n"
        "  --finetune-data FILE  charlm: the text to fine-tune on (required with --finetune)\n"
        "  --lr X                fine-tuning learning rate (1e-3)\n"
        "  --timing-runs N       timed forward passes per point; the median is kept (5)\n"
        "Exit status: 0 done, 1 failed while running, 2 bad input (nothing is written).\n");
}

static void bad_input(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void bad_input(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("heads: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static int int_arg(const char *flag, const char *value, int lo, int hi)
{
    char *end;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || *end || errno || v < lo || v > hi)
        bad_input("%s needs an integer in %d..%d, got %s", flag, lo, hi,
                  value ? value : "nothing");
    return (int)v;
}

static double real_arg(const char *flag, const char *value, double lo, double hi)
{
    char *end;
    double v = value ? strtod(value, &end) : 0;
    if (!value || *end || !(v >= lo && v <= hi))
        bad_input("%s needs a number in %g..%g, got %s", flag, lo, hi, value ? value : "nothing");
    return v;
}

static options parse_options(int argc, char **argv)
{
    options o = {.out = "out/heads", .seed = TOY_SEED, .sequences = 1000, .windows = 64,
                 .timing_runs = 5, .step_fraction = 0.1, .lr = 1e-3};
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        exit(0);
    }
    if (argc < 2)
        usage(stderr), bad_input("give a command: ablate, importance or prune");
    if (!strcmp(argv[1], "ablate"))
        o.cmd = CMD_ABLATE;
    else if (!strcmp(argv[1], "importance"))
        o.cmd = CMD_IMPORTANCE;
    else if (!strcmp(argv[1], "prune"))
        o.cmd = CMD_PRUNE;
    else
        usage(stderr), bad_input("unknown command %s (ablate, importance or prune)", argv[1]);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--curve")) {
            o.curve = true;
            continue;
        }
        if (!v)
            bad_input("unknown or incomplete option %s (see --help)", a);
        i++;
        if (!strcmp(a, "--step-fraction") || !strcmp(a, "--finetune") ||
            !strcmp(a, "--finetune-data") || !strcmp(a, "--lr"))
            o.curve_flag = a;
        if (!strcmp(a, "--seed") || !strcmp(a, "--sequences"))
            o.toy_flag = a;
        if (!strcmp(a, "--windows") || !strcmp(a, "--finetune-data"))
            o.text_flag = a;
        if (!strcmp(a, "--model")) o.model = v;
        else if (!strcmp(a, "--data")) o.data = v;
        else if (!strcmp(a, "--finetune-data")) o.finetune_data = v;
        else if (!strcmp(a, "--out")) o.out = v;
        else if (!strcmp(a, "--heads")) o.heads = v;
        else if (!strcmp(a, "--seed")) o.seed = int_arg(a, v, 0, 2147483647);
        else if (!strcmp(a, "--sequences")) o.sequences = int_arg(a, v, 1, 1000000);
        else if (!strcmp(a, "--windows")) o.windows = int_arg(a, v, 1, 1000000);
        else if (!strcmp(a, "--batch")) o.batch = int_arg(a, v, 1, 100000);
        else if (!strcmp(a, "--threads")) o.threads = int_arg(a, v, 1, 1024);
        else if (!strcmp(a, "--finetune")) o.finetune = int_arg(a, v, 0, 10000000);
        else if (!strcmp(a, "--timing-runs")) o.timing_runs = int_arg(a, v, 1, 1000);
        else if (!strcmp(a, "--step-fraction")) o.step_fraction = real_arg(a, v, 1e-6, 1);
        else if (!strcmp(a, "--lr")) o.lr = real_arg(a, v, 0, 10);
        else bad_input("unknown option %s (see --help)", a);
    }
    if (!o.model)
        bad_input("--model FILE is required");
    if (o.curve && o.cmd != CMD_PRUNE)
        bad_input("--curve belongs to the prune command");
    if (o.curve_flag && !o.curve)
        bad_input("%s belongs to prune --curve", o.curve_flag);
    if (o.data && o.toy_flag)
        bad_input("%s is for toy models; with --data the text is the evaluation set", o.toy_flag);
    if (!o.data && o.text_flag)
        bad_input("%s is for text models, evaluated on --data FILE", o.text_flag);
    if (o.cmd == CMD_IMPORTANCE && o.heads)
        bad_input("importance scores every head; --heads is for ablate and prune");
    if (o.cmd == CMD_PRUNE && !o.curve && !o.heads)
        bad_input("prune needs --heads L.H,... (or --curve)");
    if (o.curve && o.heads)
        bad_input("prune --curve chooses the heads itself; drop --heads");
    return o;
}

/* ---- files ------------------------------------------------------------------ */

/* Creates --out once the inputs are known to be good, before the work: a
 * place that cannot be written is bad input, found early. */
static void make_out_dir(const options *o)
{
    if (hl_make_dirs(o->out))
        bad_input("cannot create %s: %s", o->out, strerror(errno));
}

/* The whole file; NULL with a message on error. */
static unsigned char *read_file(const char *path, size_t *size)
{
    unsigned char *text = hl_read_file(path, size);
    if (!text)
        fprintf(stderr, "heads: cannot read %s: %s\n", path, strerror(errno));
    return text;
}

/* A text output built in memory and written atomically (temporary file,
 * flushed, renamed over the path), so a failed run leaves the old file. */
typedef struct {
    char *text;
    size_t size;
    FILE *f;
} text_out;

static FILE *text_begin(text_out *t)
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

static int text_save(text_out *t, const char *dir, const char *name)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    fclose(t->f);
    FILE *f = fopen(tmp, "w");
    bool ok = f && fwrite(t->text, 1, t->size, f) == t->size;
    ok = f && fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
    ok = f && fclose(f) == 0 && ok;
    ok = ok && rename(tmp, path) == 0;
    free(t->text);
    if (!ok) {
        fprintf(stderr, "heads: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

/* ---- the model and its evaluation set ---------------------------------- */

typedef struct {
    hl_gpt *m;
    hl_gpt_meta meta;
    hl_eval_set *set;
    bool toy;
    unsigned char *text; /* charlm: the --data file */
    size_t text_size;
    char what[160];      /* the evaluation set, in words */
} study;

static bool is_toy_model(const hl_gpt_config *c)
{
    return c->vocab_in == HL_TOY_VOCAB + 1 && c->vocab_out == HL_TOY_VOCAB && c->n_ctx >= HL_TOY_T;
}

static hl_eval_set *toy_set(const options *o, hl_error *err)
{
    hl_eval_set *set = hl_eval_set_new(o->sequences, HL_TOY_T, 2, o->batch ? o->batch : 250, err);
    hl_toy_batch *b = set ? hl_toy_batch_new(o->sequences) : NULL;
    if (!b) {
        hl_eval_set_free(set);
        return NULL;
    }
    hl_rng rng;
    hl_rng_seed(&rng, (uint64_t)o->seed);
    hl_toy_sample(b, &rng);
    size_t n = (size_t)o->sequences * HL_TOY_T;
    memcpy(set->tokens, b->tokens, n * sizeof *set->tokens);
    memcpy(set->targets[0], b->scored, n * sizeof *set->targets[0]);
    memcpy(set->targets[1], b->other, n * sizeof *set->targets[1]);
    snprintf(set->group_names[0], sizeof set->group_names[0], "scored");
    snprintf(set->group_names[1], sizeof set->group_names[1], "other");
    hl_toy_batch_free(b);
    return set;
}

/* Windows of T+1 bytes at evenly spaced offsets: tokens and next bytes. */
static hl_eval_set *text_set(const unsigned char *text, size_t size, int windows, int T, int batch,
                             hl_error *err)
{
    hl_eval_set *set = hl_eval_set_new(windows, T, 1, batch, err);
    if (!set)
        return NULL;
    size_t room = size - (size_t)T - 1;
    for (int w = 0; w < windows; w++) {
        size_t at = windows > 1 ? room * (size_t)w / (size_t)(windows - 1) : 0;
        for (int t = 0; t < T; t++) {
            set->tokens[(size_t)w * T + t] = text[at + t];
            set->targets[0][(size_t)w * T + t] = text[at + t + 1];
        }
    }
    snprintf(set->group_names[0], sizeof set->group_names[0], "text");
    return set;
}

/* Loads the model and builds its evaluation set; exits 2 on bad input. */
static study open_study(const options *o)
{
    study s = {0};
    hl_error err = {0};
    s.m = hl_gpt_load_meta(o->model, &s.meta, &err);
    if (!s.m)
        bad_input("%s", err.message);
    const hl_gpt_config *c = &s.m->cfg;
    if (c->n_heads > HL_HEADS_MAX)
        bad_input("%s has %d heads per layer; this program handles up to %d", o->model,
                  c->n_heads, HL_HEADS_MAX);
    if (o->data) {
        if (!strcmp(s.meta.task, "toy_heads"))
            bad_input("%s is a toy_heads model, evaluated on the toy task: drop --data",
                      o->model);
        if (c->vocab_in != 256 || c->vocab_out != 256)
            bad_input("%s is not a byte-level model (vocabulary %d in, %d out, not 256): "
                      "--data needs a charlm model", o->model, c->vocab_in, c->vocab_out);
        if (!(s.text = read_file(o->data, &s.text_size)))
            exit(2);
        if (s.text_size < (size_t)c->n_ctx + 1)
            bad_input("%s has %zu bytes; windows of the model's %d+1 need at least %d",
                      o->data, s.text_size, c->n_ctx, c->n_ctx + 1);
        s.set = text_set(s.text, s.text_size, o->windows, c->n_ctx, o->batch ? o->batch : 16,
                         &err);
        snprintf(s.what, sizeof s.what, "%d windows of %d bytes from %s", o->windows,
                 c->n_ctx + 1, o->data);
    } else {
        if (!strcmp(s.meta.task, "charlm"))
            bad_input("%s is a charlm model: give the text to evaluate on with --data FILE",
                      o->model);
        if (!is_toy_model(c))
            bad_input("%s does not fit the toy task (it wants vocabulary %d in, %d out and %d "
                      "positions; the model has %d, %d, %d); for a text model give --data FILE",
                      o->model, HL_TOY_VOCAB + 1, HL_TOY_VOCAB, HL_TOY_T, c->vocab_in,
                      c->vocab_out, c->n_ctx);
        s.toy = true;
        s.set = toy_set(o, &err);
        snprintf(s.what, sizeof s.what, "%d toy sequences from seed %d%s", o->sequences, o->seed,
                 o->seed == TOY_SEED && o->sequences == 1000 ? " (toy_heads' held-out set)" : "");
    }
    if (!s.set) {
        fprintf(stderr, "heads: %s\n", err.message[0] ? err.message : "out of memory");
        exit(1);
    }
    return s;
}

static void close_study(study *s)
{
    hl_gpt_free(s->m);
    hl_eval_set_free(s->set);
    free(s->text);
}

static int total_heads(const hl_gpt *m)
{
    int n = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        n += hl_gpt_layer_heads(&m->cfg, l);
    return n;
}

/* "L1H3": layer and original head index of current head h of layer l. */
static const char *head_name(const study *s, int l, int h, char buf[24])
{
    snprintf(buf, 24, "L%dH%d", l, hl_head_original(&s->meta.pruned, s->m->cfg.n_heads, l, h));
    return buf;
}

/* --heads "1.3,0.2" (original indices) -> the current heads; exits 2 on a bad list. */
static hl_head_set parse_heads(const study *s, const char *list)
{
    hl_head_set set = {0};
    const hl_gpt_config *c = &s->m->cfg;
    const char *p = list;
    int n = 0;
    while (*p) {
        char *end;
        long l = strtol(p, &end, 10), h = -1;
        bool ok = end != p && *end == '.';
        if (ok) {
            const char *q = end + 1;
            h = strtol(q, &end, 10);
            ok = end != q && (*end == ',' || *end == '\0');
        }
        if (!ok)
            bad_input("--heads wants layer.head pairs separated by commas (e.g. 1.3,0.2), not "
                      "\"%s\"", list);
        if (l < 0 || l >= c->n_layers)
            bad_input("head %ld.%ld is out of range: the model has layers 0..%d", l, h,
                      c->n_layers - 1);
        if (h < 0 || h >= c->n_heads)
            bad_input("head %ld.%ld is out of range: layer %ld has heads 0..%d", l, h, l,
                      c->n_heads - 1);
        int current = hl_head_current(&s->meta.pruned, c->n_heads, (int)l, (int)h);
        if (current < 0)
            bad_input("head %ld.%ld was pruned from this model", l, h);
        set.on[l][current] = true;
        p = *end ? end + 1 : end;
        n++;
        if (*end && !*p)
            bad_input("--heads \"%s\" ends with a comma", list);
    }
    if (!n)
        bad_input("--heads names no head");
    return set;
}

static void print_model(const study *s, const char *path)
{
    char pruned[1024] = "";
    if (hl_head_set_count(&s->meta.pruned))
        hl_pruned_heads_format(&s->meta.pruned, &s->m->cfg, pruned, sizeof pruned);
    printf("model %s: %s, %d layers x %d heads%s%s%s, %zu parameters\nevaluation: %s\n", path,
           s->meta.task[0] ? s->meta.task : "no task recorded", s->m->cfg.n_layers,
           s->m->cfg.n_heads, pruned[0] ? " (pruned: " : "", pruned, pruned[0] ? ")" : "",
           hl_params_n_values(s->m->params), s->what);
}

static void print_result(const hl_eval_set *set, const char *what, const hl_eval_result *r)
{
    printf("%s:", what);
    for (int k = 0; k < set->n_groups; k++)
        printf("%s %s loss %.4f, accuracy %.4f", k ? ";" : "", set->group_names[k], r->loss[k],
               r->accuracy[k]);
    printf("\n");
}

static void fail(const hl_error *err)
{
    fprintf(stderr, "heads: %s\n", err->message);
    exit(1);
}

/* ---- ablate ------------------------------------------------------------- */

typedef struct {
    char name[1024];
    hl_head_set heads;
    hl_eval_result zero, mean;
} ablation_row;

static int by_zero_damage(const void *pa, const void *pb)
{
    const ablation_row *a = pa, *b = pb;
    double da = a->zero.loss[0], db = b->zero.loss[0];
    return da < db ? 1 : da > db ? -1 : strcmp(a->name, b->name);
}

/* "3.0512 (+2.7017)  0.0904" for each group. */
static void print_cells(const hl_eval_set *set, const hl_eval_result *r, const hl_eval_result *base)
{
    for (int k = 0; k < set->n_groups; k++)
        printf("  %7.4f (%+7.4f) %6.4f", r->loss[k], r->loss[k] - base->loss[k], r->accuracy[k]);
}

static void write_ablation_csv(FILE *f, const hl_eval_set *set, const char *heads,
                               const char *kind, const hl_eval_result *r,
                               const hl_eval_result *base)
{
    fprintf(f, "%s,%s", heads, kind);
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",%.6f,%.6f", r->loss[k], r->accuracy[k]);
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",%.6f", r->loss[k] - base->loss[k]);
    fprintf(f, "\n");
}

static int run_ablate(const options *o, study *s)
{
    hl_error err = {0};
    const hl_eval_set *set = s->set;
    const hl_gpt_config *c = &s->m->cfg;
    ablation_row *rows = calloc((size_t)total_heads(s->m) + 1, sizeof *rows);
    if (!rows)
        return fprintf(stderr, "heads: out of memory\n"), 1;
    int n = 0;
    if (o->heads) {
        rows[0].heads = parse_heads(s, o->heads);
        for (int l = 0; l < c->n_layers; l++)
            for (int h = 0; h < hl_gpt_layer_heads(c, l); h++)
                if (rows[0].heads.on[l][h]) {
                    char name[24];
                    snprintf(rows[0].name + strlen(rows[0].name),
                             sizeof rows[0].name - strlen(rows[0].name), "%s%s",
                             rows[0].name[0] ? "+" : "", head_name(s, l, h, name));
                }
        n = 1;
    } else {
        for (int l = 0; l < c->n_layers; l++)
            for (int h = 0; h < hl_gpt_layer_heads(c, l); h++, n++) {
                head_name(s, l, h, rows[n].name);
                rows[n].heads.on[l][h] = true;
            }
    }
    make_out_dir(o);
    print_model(s, o->model);
    hl_eval_result base;
    hl_head_means means;
    if (hl_heads_evaluate(s->m, set, NULL, NULL, &base, &err) ||
        hl_heads_mean_outputs(s->m, set, &means, &err))
        fail(&err);
    print_result(set, "baseline", &base);
    for (int i = 0; i < n; i++)
        if (hl_heads_evaluate(s->m, set, &rows[i].heads, NULL, &rows[i].zero, &err) ||
            hl_heads_evaluate(s->m, set, &rows[i].heads, &means, &rows[i].mean, &err))
            fail(&err);
    hl_head_means_free(&means);

    /* The CSV in model order, the table ranked by the zero ablation's damage. */
    text_out csv;
    FILE *f = text_begin(&csv);
    fprintf(f, "heads,ablation");
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",%s_loss,%s_accuracy", set->group_names[k], set->group_names[k]);
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",delta_%s_loss", set->group_names[k]);
    fprintf(f, "\n");
    write_ablation_csv(f, set, "none", "none", &base, &base);
    for (int i = 0; i < n; i++) {
        write_ablation_csv(f, set, rows[i].name, "zero", &rows[i].zero, &base);
        write_ablation_csv(f, set, rows[i].name, "mean", &rows[i].mean, &base);
    }
    qsort(rows, (size_t)n, sizeof *rows, by_zero_damage);
    printf("\nranked by the zero ablation's %s loss; each cell: loss (change) accuracy\n",
           set->group_names[0]);
    int width = 6;
    for (int i = 0; i < n; i++)
        width = (int)strlen(rows[i].name) > width ? (int)strlen(rows[i].name) : width;
    printf("rank  %-*s", width, "heads");
    for (int kind = 0; kind < 2; kind++)
        for (int k = 0; k < set->n_groups; k++) {
            char label[40];
            snprintf(label, sizeof label, "%s: %s", kind ? "mean" : "zero", set->group_names[k]);
            printf("  %-24s", label);
        }
    printf("\n");
    for (int i = 0; i < n; i++) {
        printf("%4d  %-*s", i + 1, width, rows[i].name);
        print_cells(set, &rows[i].zero, &base);
        print_cells(set, &rows[i].mean, &base);
        printf("\n");
    }
    free(rows);
    if (text_save(&csv, o->out, "ablation.csv"))
        return 1;
    printf("wrote %s/ablation.csv\n", o->out);
    return 0;
}

/* ---- importance ------------------------------------------------------------ */

typedef struct {
    int layer, head; /* current index */
    double norm, raw;
} scored_head;

static int by_importance(const void *pa, const void *pb)
{
    const scored_head *a = pa, *b = pb;
    if (a->norm != b->norm)
        return a->norm < b->norm ? 1 : -1;
    return a->layer != b->layer ? a->layer - b->layer : a->head - b->head;
}

/* Every current head with its scores, most important first. */
static int rank_heads(const study *s, const double *raw, const double *norm, scored_head *out)
{
    int n = 0;
    const hl_gpt_config *c = &s->m->cfg;
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++)
            out[n++] = (scored_head){l, h, norm[l * c->n_heads + h], raw[l * c->n_heads + h]};
    qsort(out, (size_t)n, sizeof *out, by_importance);
    return n;
}

/* (L, n_heads) by original head index; pruned heads are NaN (drawn red). */
static int write_heatmap(const study *s, const double *norm, const char *dir, hl_error *err)
{
    const hl_gpt_config *c = &s->m->cfg;
    hl_tensor *map = hl_tensor_new_checked("importance", 2, (int[]){c->n_layers, c->n_heads},
                                           false, err);
    char (*names)[16] = malloc(sizeof *names * (size_t)(c->n_layers + c->n_heads));
    const char **rows = malloc(sizeof *rows * (size_t)(c->n_layers + c->n_heads));
    if (!map || !names || !rows) {
        hl_tensor_free(map);
        free(names);
        free(rows);
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory"), -1;
    }
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < c->n_heads; h++) {
            int current = hl_head_current(&s->meta.pruned, c->n_heads, l, h);
            map->data[l * c->n_heads + h] =
                current < 0 ? (hl_real)NAN : (hl_real)norm[l * c->n_heads + current];
        }
    for (int i = 0; i < c->n_layers + c->n_heads; i++) {
        snprintf(names[i], sizeof names[i], i < c->n_layers ? "L%d" : "H%d",
                 i < c->n_layers ? i : i - c->n_layers);
        rows[i] = names[i];
    }
    int side = c->n_layers > c->n_heads ? c->n_layers : c->n_heads;
    int cell = 480 / side < 12 ? 12 : 480 / side > 64 ? 64 : 480 / side;
    const char *label[] = {hl_head_set_count(&s->meta.pruned)
                               ? "importance, L2-normalised per layer (red: pruned)"
                               : "importance, L2-normalised per layer"};
    hl_heatmap_opts opts = {.cell_px = cell, .range = HL_HEATMAP_RANGE_UNIT, .labels = label,
                            .title = "head importance (Michel et al. 2019)",
                            .row_labels = rows, .col_labels = rows + c->n_layers};
    char path[4200];
    snprintf(path, sizeof path, "%s/importance.png", dir);
    int rc = hl_heatmap_write(map, path, &opts, err) == HL_OK ? 0 : -1;
    hl_tensor_free(map);
    free(names);
    free(rows);
    return rc;
}

static int run_importance(const options *o, study *s)
{
    hl_error err = {0};
    const hl_gpt_config *c = &s->m->cfg;
    const size_t cells = (size_t)c->n_layers * c->n_heads;
    double *raw = malloc(cells * sizeof *raw), *norm = malloc(cells * sizeof *norm);
    scored_head *ranked = malloc(cells * sizeof *ranked);
    if (!raw || !norm || !ranked)
        return fprintf(stderr, "heads: out of memory\n"), 1;
    make_out_dir(o);
    print_model(s, o->model);
    if (hl_heads_importance(s->m, s->set, raw, norm, &err))
        fail(&err);
    int n = rank_heads(s, raw, norm, ranked);
    printf("\nimportance = mean |dL/dgate| over %d batches (L = the sum of the %d group "
           "losses), L2-normalised per layer\n",
           (s->set->n + s->set->batch - 1) / s->set->batch, s->set->n_groups);
    printf("rank  head    importance   raw |dL/dg|\n");
    text_out csv;
    FILE *f = text_begin(&csv);
    fprintf(f, "layer,head,importance,raw,rank\n");
    for (int i = 0; i < n; i++) {
        char name[24];
        printf("%4d  %-6s  %10.4f   %11.5f\n", i + 1,
               head_name(s, ranked[i].layer, ranked[i].head, name), ranked[i].norm,
               ranked[i].raw);
    }
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++) {
            int rank = 0;
            while (ranked[rank].layer != l || ranked[rank].head != h)
                rank++;
            fprintf(f, "%d,%d,%.6f,%.8f,%d\n", l,
                    hl_head_original(&s->meta.pruned, c->n_heads, l, h),
                    norm[l * c->n_heads + h], raw[l * c->n_heads + h], rank + 1);
        }
    int rc = 0;
    if (text_save(&csv, o->out, "importance.csv") || write_heatmap(s, norm, o->out, &err)) {
        if (err.message[0])
            fprintf(stderr, "heads: %s\n", err.message);
        rc = 1;
    } else {
        printf("wrote %s/importance.csv, %s/importance.png\n", o->out, o->out);
    }
    free(raw);
    free(norm);
    free(ranked);
    return rc;
}

/* ---- prune ------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of a forward pass over the whole set, after one untimed
 * pass that sizes the graph's arena. */
static double forward_seconds(const hl_gpt *m, const hl_eval_set *set, int runs, hl_error *err)
{
    hl_graph *g = hl_graph_new(0);
    double times[1000];
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory"), NAN;
    hl_graph_set_grad_enabled(g, false);
    hl_graph_set_training(g, false);
    for (int r = -1; r < runs; r++) {
        double t0 = hl_seconds();
        for (int first = 0; first < set->n; first += set->batch) {
            int B = set->n - first < set->batch ? set->n - first : set->batch;
            hl_gpt_forward(g, m, set->tokens + (size_t)first * set->T, B, set->T, NULL);
            hl_graph_reset(g);
        }
        if (r >= 0)
            times[r] = hl_seconds() - t0;
    }
    hl_graph_free(g);
    qsort(times, (size_t)runs, sizeof *times, cmp_double);
    return runs % 2 ? times[runs / 2] : (times[runs / 2 - 1] + times[runs / 2]) / 2;
}

/* Largest |logit difference| between two models (a run with its ablation) on
 * the set's first batch. */
static double logit_difference(const hl_gpt *a, const hl_gpt_run *a_run, const hl_gpt *b,
                               const hl_eval_set *set)
{
    hl_graph *g = hl_graph_new(0);
    if (!g)
        return NAN;
    hl_graph_set_grad_enabled(g, false);
    hl_graph_set_training(g, false);
    int B = set->n < set->batch ? set->n : set->batch;
    hl_tensor *x = hl_gpt_forward(g, a, set->tokens, B, set->T, a_run);
    hl_tensor *y = hl_gpt_forward(g, b, set->tokens, B, set->T, NULL);
    double worst = hl_graph_failed(g) ? NAN : 0;
    for (size_t i = 0; !hl_graph_failed(g) && i < x->numel; i++)
        worst = fmax(worst, fabs((double)x->data[i] - y->data[i]));
    hl_graph_free(g);
    return worst;
}

static int save_pruned(const options *o, const hl_gpt *m, const hl_gpt_meta *meta)
{
    hl_error err = {0};
    char path[4200];
    snprintf(path, sizeof path, "%s/pruned.safetensors", o->out);
    if (hl_gpt_save_meta(path, m, meta, &err) != HL_OK) {
        fprintf(stderr, "heads: %s\n", err.message);
        return 1;
    }
    printf("wrote %s\n", path);
    return 0;
}

static int run_prune_once(const options *o, study *s)
{
    hl_error err = {0};
    hl_head_set remove = parse_heads(s, o->heads);
    hl_gpt_meta meta = s->meta;
    hl_gpt *small = hl_gpt_prune(s->m, &remove, &meta.pruned, &err);
    if (!small)
        bad_input("%s", err.message);
    make_out_dir(o);
    print_model(s, o->model);
    hl_eval_result gated, after;
    if (hl_heads_evaluate(s->m, s->set, &remove, NULL, &gated, &err) ||
        hl_heads_evaluate(small, s->set, NULL, NULL, &after, &err))
        fail(&err);
    hl_heads_run gated_run;
    if (hl_heads_run_ablate(&gated_run, s->m, s->set->T, &remove, NULL, &err))
        fail(&err);
    double diff = logit_difference(s->m, &gated_run.run, small, s->set);
    hl_heads_run_free(&gated_run);
    double t_before = forward_seconds(s->m, s->set, o->timing_runs, &err);
    double t_after = forward_seconds(small, s->set, o->timing_runs, &err);
    char record[1024];
    hl_pruned_heads_format(&meta.pruned, &small->cfg, record, sizeof record);
    printf("pruned %d heads (record \"%s\"): %zu -> %zu parameters, forward pass over the set "
           "%.2f -> %.2f ms (median of %d)\n",
           hl_head_set_count(&remove), record, hl_params_n_values(s->m->params),
           hl_params_n_values(small->params), t_before * 1e3, t_after * 1e3, o->timing_runs);
    print_result(s->set, "heads gated to 0", &gated);
    print_result(s->set, "pruned model    ", &after);
    printf("largest logit difference, pruned vs gated, on the first batch: %.3g\n", diff);
    int rc = save_pruned(o, small, &meta);
    hl_gpt_free(small);
    return rc;
}

/* ---- prune --curve ----------------------------------------------------------- */

typedef struct {
    bool toy;
    hl_rng rng;
    hl_toy_batch *toy_batch;
    const unsigned char *text;
    size_t size;
    int B, T;
    int32_t *x, *y;
} train_source;

/* One fine-tuning batch: tokens and the targets of each group. */
static void next_batch(train_source *src, const int32_t **tokens, const int32_t *targets[2])
{
    if (src->toy) {
        hl_toy_sample(src->toy_batch, &src->rng);
        *tokens = src->toy_batch->tokens;
        targets[0] = src->toy_batch->scored;
        targets[1] = src->toy_batch->other;
        return;
    }
    for (int b = 0; b < src->B; b++) {
        size_t at = (size_t)(hl_rng_uniform(&src->rng) * (double)(src->size - (size_t)src->T - 1));
        for (int t = 0; t < src->T; t++) {
            src->x[b * src->T + t] = src->text[at + t];
            src->y[b * src->T + t] = src->text[at + t + 1];
        }
    }
    *tokens = src->x;
    targets[0] = src->y;
}

/* Fine-tunes every weight for `steps` AdamW steps (fresh optimizer state:
 * the weights changed shape). */
static int finetune(hl_gpt *m, train_source *src, int n_groups, int steps, double lr,
                    hl_error *err)
{
    hl_optim *opt = hl_optim_new(m->params,
                                 &(hl_optim_config){.kind = HL_OPTIM_ADAMW, .lr = lr,
                                                    .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8,
                                                    .weight_decay = 0.01},
                                 err);
    hl_graph *g = hl_graph_new(0);
    if (!opt || !g) {
        hl_optim_free(opt);
        hl_graph_free(g);
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory"), -1;
    }
    hl_graph_seed(g, FINETUNE_SEED);
    int rc = 0;
    for (int step = 0; step < steps && !rc; step++) {
        const int32_t *tokens, *targets[2];
        next_batch(src, &tokens, targets);
        hl_params_zero_grad(m->params);
        hl_tensor *logits = hl_gpt_forward(g, m, tokens, src->B, src->T, NULL);
        hl_tensor *loss = NULL;
        for (int k = 0; k < n_groups; k++) {
            hl_tensor *ce = hl_cross_entropy(g, logits, targets[k], HL_EVAL_IGNORE);
            loss = loss ? hl_add(g, loss, ce) : ce;
        }
        if (hl_graph_backward(g, loss) != HL_OK) {
            hl_error_set(err, hl_graph_status(g), "fine-tuning: %s", hl_graph_message(g));
            rc = -1;
        } else if (!isfinite(loss->data[0]) || !isfinite(hl_clip_grad_norm(m->params, 1.0))) {
            hl_error_set(err, HL_ERR_NUMERIC, "fine-tuning step %d: the loss or a gradient is "
                         "not finite", step);
            rc = -1;
        } else {
            hl_optim_step(opt, 1.0);
        }
        hl_graph_reset(g);
    }
    hl_params_zero_grad(m->params);
    hl_optim_free(opt);
    hl_graph_free(g);
    return rc;
}

typedef struct {
    int step, heads_left, params;
    double fraction, forward_ms;
    char pruned_now[512];
    hl_eval_result r;
} curve_point;

/* The n least important heads that may go (a layer keeps at least one). */
static int choose_heads(const study *s, const double *raw, const double *norm, int n,
                        hl_head_set *remove, char *names, size_t size)
{
    const hl_gpt_config *c = &s->m->cfg;
    scored_head *ranked = malloc(sizeof *ranked * (size_t)c->n_layers * c->n_heads);
    if (!ranked)
        return -1;
    int total = rank_heads(s, raw, norm, ranked), left[HL_GPT_MAX_LAYERS], chosen = 0;
    for (int l = 0; l < c->n_layers; l++)
        left[l] = hl_gpt_layer_heads(c, l);
    memset(remove, 0, sizeof *remove);
    names[0] = '\0';
    for (int i = total - 1; i >= 0 && chosen < n; i--) {
        const scored_head *h = &ranked[i];
        if (left[h->layer] <= 1)
            continue;
        left[h->layer]--;
        remove->on[h->layer][h->head] = true;
        char name[24];
        size_t used = strlen(names);
        snprintf(names + used, size - used, "%s%s", chosen ? " " : "",
                 head_name(s, h->layer, h->head, name));
        chosen++;
    }
    free(ranked);
    return chosen;
}

static void print_point(const hl_eval_set *set, const curve_point *p)
{
    printf("%4d  %10d  %8.3f  %8d  %10.2f", p->step, p->heads_left, p->fraction, p->params,
           p->forward_ms);
    for (int k = 0; k < set->n_groups; k++)
        printf("  %8.4f  %8.4f", p->r.loss[k], p->r.accuracy[k]);
    printf("  %s\n", p->pruned_now);
}

static int write_curve_plot(const study *s, const curve_point *pts, int n, int finetune,
                            const char *dir, hl_error *err)
{
    const hl_eval_set *set = s->set;
    double *buf = malloc(sizeof *buf * (size_t)n * (3 + 2 * HL_EVAL_MAX_GROUPS));
    if (!buf)
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory"), -1;
    double *x = buf, *params = buf + n, *time = buf + 2 * n;
    char labels[2][HL_EVAL_MAX_GROUPS][48];
    hl_plot_series loss[HL_EVAL_MAX_GROUPS], acc[HL_EVAL_MAX_GROUPS], cost[2];
    for (int i = 0; i < n; i++) {
        x[i] = pts[i].fraction;
        params[i] = (double)pts[i].params / pts[0].params;
        time[i] = pts[i].forward_ms / pts[0].forward_ms;
    }
    for (int k = 0; k < set->n_groups; k++) {
        double *l = buf + (3 + 2 * k) * n, *a = l + n;
        for (int i = 0; i < n; i++) {
            l[i] = pts[i].r.loss[k];
            a[i] = pts[i].r.accuracy[k];
        }
        snprintf(labels[0][k], sizeof labels[0][k], "%s loss", set->group_names[k]);
        snprintf(labels[1][k], sizeof labels[1][k], "%s accuracy", set->group_names[k]);
        loss[k] = (hl_plot_series){labels[0][k], x, l, n};
        acc[k] = (hl_plot_series){labels[1][k], x, a, n};
    }
    cost[0] = (hl_plot_series){"parameters", x, params, n};
    cost[1] = (hl_plot_series){"forward time", x, time, n};
    hl_plot_panel panels[] = {
        {.y_label = "loss (nats)", .series = loss, .n_series = set->n_groups},
        {.y_label = "accuracy", .series = acc, .n_series = set->n_groups, .y_max = 1},
        {.y_label = "vs unpruned", .series = cost, .n_series = 2}};
    char title[160];
    int len = snprintf(title, sizeof title, "pruning %d heads, least important first",
                       s->m->cfg.n_layers * s->m->cfg.n_heads);
    if (finetune)
        snprintf(title + len, sizeof title - (size_t)len, ", %d fine-tuning steps after each",
                 finetune);
    hl_plot_opts opts = {.title = title, .x_label = "fraction of heads pruned", .x_max = 1};
    char path[4200];
    snprintf(path, sizeof path, "%s/prune_curve.png", dir);
    int rc = hl_plot_write(panels, 3, path, &opts, err) == HL_OK ? 0 : -1;
    free(buf);
    return rc;
}

static int measure_point(study *s, const options *o, curve_point *p, hl_error *err)
{
    const int original = s->m->cfg.n_layers * s->m->cfg.n_heads;
    p->heads_left = total_heads(s->m);
    p->fraction = (double)(original - p->heads_left) / original;
    p->params = (int)hl_params_n_values(s->m->params);
    p->forward_ms = forward_seconds(s->m, s->set, o->timing_runs, err) * 1e3;
    return hl_heads_evaluate(s->m, s->set, NULL, NULL, &p->r, err) == HL_OK ? 0 : -1;
}

static int run_prune_curve(const options *o, study *s)
{
    hl_error err = {0};
    const hl_eval_set *set = s->set;
    train_source src = {.toy = s->toy, .T = set->T};
    unsigned char *ft_text = NULL;
    if (o->finetune > 0 && !s->toy) {
        if (!o->finetune_data)
            bad_input("--finetune on a charlm model needs --finetune-data FILE (the text to "
                      "train on; keep it apart from the --data evaluation text)");
        if (!(ft_text = read_file(o->finetune_data, &src.size)))
            exit(2);
        if (src.size < (size_t)set->T + 2)
            bad_input("%s is too short to fine-tune on (%zu bytes)", o->finetune_data, src.size);
    }
    src.text = ft_text;
    src.B = s->toy ? 32 : 16;
    hl_rng_seed(&src.rng, FINETUNE_SEED);
    src.toy_batch = s->toy ? hl_toy_batch_new(src.B) : NULL;
    src.x = malloc(sizeof *src.x * (size_t)src.B * src.T);
    src.y = malloc(sizeof *src.y * (size_t)src.B * src.T);
    const hl_gpt_config *c = &s->m->cfg;
    const size_t cells = (size_t)c->n_layers * c->n_heads;
    double *raw = malloc(cells * sizeof *raw), *norm = malloc(cells * sizeof *norm);
    curve_point *pts = calloc((size_t)total_heads(s->m) + 1, sizeof *pts);
    if (!raw || !norm || !pts || !src.x || !src.y || (s->toy && !src.toy_batch))
        return fprintf(stderr, "heads: out of memory\n"), 1;

    make_out_dir(o);
    print_model(s, o->model);
    printf("pruning %.0f%% of the remaining heads per step%s\n", o->step_fraction * 100,
           o->finetune ? ", then fine-tuning" : "");
    if (o->finetune)
        printf("fine-tuning: %d AdamW steps of %d sequences, lr %g\n", o->finetune, src.B, o->lr);
    printf("step  heads_left  fraction    params  forward_ms");
    for (int k = 0; k < set->n_groups; k++)
        printf("  %8.8s  %8.8s", set->group_names[k], "accuracy");
    printf("  pruned\n");
    int n = 0;
    for (;; n++) {
        curve_point *p = &pts[n];
        p->step = n;
        if (measure_point(s, o, p, &err))
            fail(&err);
        print_point(set, p);
        int left = total_heads(s->m), prunable = left - c->n_layers;
        if (prunable <= 0)
            break;
        int want = (int)lround(o->step_fraction * left);
        hl_head_set remove;
        if (hl_heads_importance(s->m, set, raw, norm, &err))
            fail(&err);
        if (choose_heads(s, raw, norm, want < 1 ? 1 : want, &remove, pts[n + 1].pruned_now,
                         sizeof pts[n + 1].pruned_now) < 0)
            return fprintf(stderr, "heads: out of memory\n"), 1;
        hl_gpt *small = hl_gpt_prune(s->m, &remove, &s->meta.pruned, &err);
        if (!small)
            fail(&err);
        hl_gpt_free(s->m);
        s->m = small;
        c = &s->m->cfg;
        if (o->finetune && finetune(s->m, &src, set->n_groups, o->finetune, o->lr, &err))
            fail(&err);
    }
    n++;

    text_out csv;
    FILE *f = text_begin(&csv);
    fprintf(f, "step,heads_left,fraction_pruned,pruned_now,params,forward_ms");
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",%s_loss,%s_accuracy", set->group_names[k], set->group_names[k]);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%d,%d,%.6f,%s,%d,%.4f", pts[i].step, pts[i].heads_left, pts[i].fraction,
                pts[i].pruned_now, pts[i].params, pts[i].forward_ms);
        for (int k = 0; k < set->n_groups; k++)
            fprintf(f, ",%.6f,%.6f", pts[i].r.loss[k], pts[i].r.accuracy[k]);
        fprintf(f, "\n");
    }
    int rc = 0;
    if (text_save(&csv, o->out, "prune_curve.csv") ||
               write_curve_plot(s, pts, n, o->finetune, o->out, &err)) {
        if (err.message[0])
            fprintf(stderr, "heads: %s\n", err.message);
        rc = 1;
    } else {
        printf("wrote %s/prune_curve.csv, %s/prune_curve.png\n", o->out, o->out);
    }
    free(raw);
    free(norm);
    free(pts);
    free(src.x);
    free(src.y);
    free(ft_text);
    hl_toy_batch_free(src.toy_batch);
    return rc;
}

int main(int argc, char **argv)
{
    options o = parse_options(argc, argv);
#ifdef _OPENMP
    if (o.threads)
        omp_set_num_threads(o.threads);
#endif
    study s = open_study(&o);
    int rc = o.cmd == CMD_ABLATE       ? run_ablate(&o, &s)
             : o.cmd == CMD_IMPORTANCE ? run_importance(&o, &s)
             : o.curve                 ? run_prune_curve(&o, &s)
                                       : run_prune_once(&o, &s);
    close_study(&s);
    return rc;
}
