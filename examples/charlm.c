/*
 * charlm: a byte-level GPT trained on any text file.
 *
 *     build/charlm --data FILE [--steps N] [--out DIR] [--resume CKPT] ...
 *
 * Splits the file 90/10 into training and validation bytes, trains with
 * AdamW (warm-up, cosine decay, gradient clipping), reports both losses,
 * logs every evaluation to DIR/train.csv, keeps DIR/checkpoint.safetensors
 * (weights, optimizer state, step, RNG) for --resume, and samples text.
 * Run with --help for every option. Under mpirun (a `make MPI=1` build) each
 * rank trains on its slice of every batch; rank 0 writes and samples.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "train/dist.h"
#include "io/fs.h"
#include "headlab.h"

#define VAL_BATCHES 8

typedef struct {
    const char *data, *out, *resume, *prompt;
    int steps, batch, ctx, d_model, heads, layers, eval_every, sample, threads, seed;
    double lr, dropout, temperature, clip;
} options;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: charlm --data FILE [options]\n"
        "Trains a byte-level transformer on FILE and samples from it.\n"
        "  --data FILE          training text (any bytes; 90%% train, 10%% validation)\n"
        "  --out DIR            where train.csv and checkpoint.safetensors go (out/charlm)\n"
        "  --resume CKPT        continue a run from its checkpoint (the model config comes\n"
        "                       from the checkpoint; --steps is the new total)\n"
        "  --steps N            training steps (2000)      --batch N       sequences (16)\n"
        "  --ctx N              context length (64)        --d-model N     width (128)\n"
        "  --heads N            attention heads (4)        --layers N      blocks (4)\n"
        "  --lr X               peak learning rate (1e-3)  --dropout X     (0)\n"
        "  --clip X             gradient-norm clip, 0 = off (1.0)\n"
        "  --eval-every N       validation interval (200)  --seed N        (0)\n"
        "  --sample N           bytes to sample at the end (400)\n"
        "  --temperature X      sampling temperature (0.8) --prompt TEXT   sampling prompt\n"
        "  --threads N          OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
        "Exit status: 0 done, 1 training failed (e.g. non-finite loss), 2 bad input.\n");
}

static void bad_value(const char *flag, const char *value)
{
    fprintf(stderr, "charlm: bad value for %s: %s\n", flag, value ? value : "(missing)");
    exit(2);
}

static int int_arg(const char *flag, const char *value, int lo, int hi)
{
    char *end;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || *end || errno || v < lo || v > hi)
        bad_value(flag, value);
    return (int)v;
}

static double real_arg(const char *flag, const char *value, double lo, double hi)
{
    char *end;
    double v = value ? strtod(value, &end) : 0;
    if (!value || *end || !(v >= lo && v <= hi))
        bad_value(flag, value);
    return v;
}

static options parse_options(int argc, char **argv)
{
    options o = {.out = "out/charlm", .prompt = "\n", .steps = 2000, .batch = 16, .ctx = 64,
                 .d_model = 128, .heads = 4, .layers = 4, .eval_every = 200, .sample = 400,
                 .lr = 1e-3, .temperature = 0.8, .clip = 1.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "charlm: unknown or incomplete option %s\n", a);
            usage(stderr);
            exit(2);
        }
        i++;
        if (!strcmp(a, "--data")) o.data = v;
        else if (!strcmp(a, "--out")) o.out = v;
        else if (!strcmp(a, "--resume")) o.resume = v;
        else if (!strcmp(a, "--prompt")) o.prompt = v;
        else if (!strcmp(a, "--steps")) o.steps = int_arg(a, v, 0, 100000000);
        else if (!strcmp(a, "--batch")) o.batch = int_arg(a, v, 1, 4096);
        else if (!strcmp(a, "--ctx")) o.ctx = int_arg(a, v, 2, 4096);
        else if (!strcmp(a, "--d-model")) o.d_model = int_arg(a, v, 1, 8192);
        else if (!strcmp(a, "--heads")) o.heads = int_arg(a, v, 1, 256);
        else if (!strcmp(a, "--layers")) o.layers = int_arg(a, v, 1, HL_GPT_MAX_LAYERS);
        else if (!strcmp(a, "--eval-every")) o.eval_every = int_arg(a, v, 1, 100000000);
        else if (!strcmp(a, "--sample")) o.sample = int_arg(a, v, 0, 1000000);
        else if (!strcmp(a, "--threads")) o.threads = int_arg(a, v, 1, 1024);
        else if (!strcmp(a, "--seed")) o.seed = int_arg(a, v, 0, 1 << 30);
        else if (!strcmp(a, "--lr")) o.lr = real_arg(a, v, 0, 10);
        else if (!strcmp(a, "--dropout")) o.dropout = real_arg(a, v, 0, 0.99);
        else if (!strcmp(a, "--clip")) o.clip = real_arg(a, v, 0, 1e9);
        else if (!strcmp(a, "--temperature")) o.temperature = real_arg(a, v, 1e-3, 100);
        else {
            fprintf(stderr, "charlm: unknown option %s\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (!o.data) {
        fprintf(stderr, "charlm: --data FILE is required\n");
        usage(stderr);
        exit(2);
    }
    return o;
}

/* The whole file; NULL with a message on error. */
static unsigned char *read_file(const char *path, size_t *size)
{
    unsigned char *text = hl_read_file(path, size);
    if (!text)
        fprintf(stderr, "charlm: cannot read %s: %s\n", path, strerror(errno));
    return text;
}

typedef struct {
    const unsigned char *bytes;
    size_t size;
} text_span;

/* B windows of T+1 bytes starting at the given offsets -> inputs and targets. */
static void make_batch(text_span s, const size_t *offsets, int B, int T, int32_t *x, int32_t *y)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            x[b * T + t] = s.bytes[offsets[b] + t];
            y[b * T + t] = s.bytes[offsets[b] + t + 1];
        }
}

static void random_offsets(text_span s, int B, int T, hl_rng *rng, size_t *offsets)
{
    for (int b = 0; b < B; b++)
        offsets[b] = (size_t)(hl_rng_uniform(rng) * (double)(s.size - (size_t)T - 1));
}

/* Mean loss over VAL_BATCHES fixed, evenly spread validation windows. */
static double validation_loss(hl_graph *g, const hl_gpt *m, text_span val, int B, int T,
                              int32_t *x, int32_t *y, size_t *offsets)
{
    double total = 0;
    bool grad = hl_graph_set_grad_enabled(g, false), training = hl_graph_set_training(g, false);
    size_t room = val.size - (size_t)T - 1, n = (size_t)VAL_BATCHES * B;
    for (int k = 0; k < VAL_BATCHES; k++) {
        for (int b = 0; b < B; b++)
            offsets[b] = room * (size_t)(k * B + b) / n;
        make_batch(val, offsets, B, T, x, y);
        hl_tensor *loss = hl_cross_entropy(g, hl_gpt_forward(g, m, x, B, T, NULL), y, -1);
        total += hl_graph_failed(g) ? NAN : loss->data[0];
        hl_graph_reset(g);
    }
    hl_graph_set_grad_enabled(g, grad);
    hl_graph_set_training(g, training);
    return total / VAL_BATCHES;
}

/* Samples n bytes after the prompt, printing them as they come. */
static void sample_text(hl_graph *g, const hl_gpt *m, const char *prompt, int n, double temperature,
                        hl_rng *rng)
{
    const int T = m->cfg.n_ctx, V = m->cfg.vocab_out;
    int32_t *context = malloc(sizeof *context * ((size_t)strlen(prompt) + (size_t)n + 1));
    double *p = malloc(sizeof *p * (size_t)V);
    if (!context || !p) {
        free(context);
        free(p);
        return;
    }
    int len = 0;
    for (const char *c = prompt; *c; c++)
        context[len++] = (unsigned char)*c;
    fputs(prompt, stdout);
    bool grad = hl_graph_set_grad_enabled(g, false), training = hl_graph_set_training(g, false);
    for (int i = 0; i < n; i++) {
        int start = len > T ? len - T : 0, width = len - start;
        hl_tensor *logits = hl_gpt_forward(g, m, context + start, 1, width, NULL);
        if (hl_graph_failed(g))
            break;
        const hl_real *row = logits->data + (size_t)(width - 1) * V;
        double max = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++)
            max = fmax(max, row[v] / temperature);
        for (int v = 0; v < V; v++)
            sum += p[v] = exp(row[v] / temperature - max);
        double u = hl_rng_uniform(rng) * sum;
        int next = 0;
        while (next < V - 1 && (u -= p[next]) > 0)
            next++;
        context[len++] = next;
        putchar(next);
        hl_graph_reset(g);
    }
    putchar('\n');
    hl_graph_set_grad_enabled(g, grad);
    hl_graph_set_training(g, training);
    free(context);
    free(p);
}

static hl_gpt *build_model(const options *o, hl_error *err)
{
    if (!o->resume) {
        hl_gpt_config cfg = {.vocab_in = 256, .vocab_out = 256, .n_ctx = o->ctx,
                             .d_model = o->d_model, .n_heads = o->heads, .n_layers = o->layers,
                             .mlp = true, .layernorm = true, .dropout = o->dropout,
                             .emb_std = 0.02};
        return hl_gpt_new(&cfg, err);
    }
    return hl_gpt_load(o->resume, err);
}

/* One optimizer step on this rank's rows of the global batch; returns the
 * global mean loss and sets *norm to the clipped gradient norm. */
static double train_step(hl_graph *g, hl_gpt *m, hl_optim *opt, text_span train, int B, int T,
                         hl_rng *data_rng, int32_t *x, int32_t *y, size_t *offsets,
                         const options *o, double lr_scale, double *norm)
{
    /* Every rank draws the whole global batch (one RNG stream for all), then
     * trains on its slice, its loss weighted by its share of the rows. */
    random_offsets(train, B, T, data_rng, offsets);
    int begin, end;
    hl_dist_shard(B, &begin, &end);
    const int rows = end - begin;
    make_batch(train, offsets + begin, rows, T, x, y);
    hl_params_zero_grad(m->params);
    hl_tensor *loss = hl_cross_entropy(g, hl_gpt_forward(g, m, x, rows, T, NULL), y, -1);
    loss = hl_scale(g, loss, (hl_real)rows / (hl_real)B);
    if (hl_graph_backward(g, loss) != HL_OK) {
        fprintf(stderr, "charlm: %s\n", hl_graph_message(g));
        hl_dist_abort(1);
    }
    double local = loss->data[0];
    hl_dist_allreduce_grads(m->params);
    *norm = hl_clip_grad_norm(m->params, o->clip);
    if (!isfinite(local) || !isfinite(*norm)) {
        const hl_node *bad = hl_graph_first_nonfinite(g);
        fprintf(stderr, "charlm: the %s is not finite (first non-finite op output: %s); the "
                "last checkpoint keeps the last good state\n",
                isfinite(local) ? "gradient" : "loss", bad ? hl_op_get(bad->op)->name : "none");
        hl_dist_abort(1);
    }
    hl_optim_step(opt, lr_scale);
    hl_graph_reset(g);
    return hl_dist_sum(local);
}

int main(int argc, char **argv)
{
    hl_dist_init(&argc, &argv);
    options o = parse_options(argc, argv);
    const bool lead = hl_dist_rank() == 0; /* rank 0 alone prints and writes */
#ifdef _OPENMP
    if (o.threads)
        omp_set_num_threads(o.threads);
#endif
    size_t size = 0;
    unsigned char *text = read_file(o.data, &size);
    if (!text)
        hl_dist_abort(2);
    hl_error err = {0};
    hl_gpt *m = build_model(&o, &err);
    if (!m) {
        fprintf(stderr, "charlm: %s\n", err.message);
        hl_dist_abort(2);
    }
    const int T = m->cfg.n_ctx, B = o.batch;
    size_t n_val = size / 10;
    text_span train = {text, size - n_val}, val = {text + size - n_val, n_val};
    if (val.size < (size_t)T + 2 || train.size < (size_t)T + 2) {
        fprintf(stderr, "charlm: %s has %zu bytes; with --ctx %d it needs at least %d\n", o.data,
                size, T, 10 * (T + 2));
        hl_dist_abort(2);
    }
    if (B < hl_dist_size()) {
        fprintf(stderr, "charlm: --batch %d is smaller than the %d ranks\n", B, hl_dist_size());
        hl_dist_abort(2);
    }
    char config[512], check[1024];
    hl_gpt_config_format(&m->cfg, config, sizeof config);
    snprintf(check, sizeof check, "%s batch=%d steps=%d lr=%g clip=%g seed=%d data_bytes=%zu",
             config, B, o.steps, o.lr, o.clip, o.seed, size);
    if (hl_dist_check_same(check, &err) != HL_OK) {
        if (lead)
            fprintf(stderr, "charlm: the ranks were started with different options or data: %s\n",
                    err.message);
        hl_dist_abort(2);
    }
    if (lead && hl_make_dirs(o.out)) {
        fprintf(stderr, "charlm: cannot create %s: %s\n", o.out, strerror(errno));
        hl_dist_abort(2);
    }
    hl_optim *opt = hl_optim_new(m->params,
                                 &(hl_optim_config){.kind = HL_OPTIM_ADAMW, .lr = o.lr,
                                                    .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8,
                                                    .weight_decay = 0.01},
                                 &err);
    hl_graph *g = hl_graph_new(0);
    int32_t *x = malloc(sizeof *x * (size_t)B * T), *y = malloc(sizeof *y * (size_t)B * T);
    size_t *offsets = malloc(sizeof *offsets * (size_t)B);
    if (!opt || !g || !x || !y || !offsets) {
        fprintf(stderr, "charlm: %s\n", err.message[0] ? err.message : "out of memory");
        hl_dist_abort(1);
    }
    hl_rng init_rng, data_rng;
    hl_rng_seed(&init_rng, (uint64_t)o.seed);
    hl_rng_seed(&data_rng, (uint64_t)o.seed + 1);
    hl_graph_seed(g, (uint64_t)o.seed + 2 + (uint64_t)hl_dist_rank()); /* dropout per rank */
    int64_t start = 0;
    hl_checkpoint_rng rngs[] = {{"data", &data_rng}, {"dropout", &g->rng}};
    if (o.resume) {
        if (hl_checkpoint_load(o.resume, m->params, opt, &start, rngs, 2, &err) != HL_OK) {
            fprintf(stderr, "charlm: %s\n", err.message);
            hl_dist_abort(2);
        }
        if (lead)
            printf("resumed from %s at step %lld\n", o.resume, (long long)start);
    } else {
        hl_gpt_init_weights(m, &init_rng);
    }
    hl_dist_broadcast_params(m->params);
    char path[4200];
    snprintf(path, sizeof path, "%s/train.csv", o.out);
    FILE *log = lead ? fopen(path, start ? "a" : "w") : NULL;
    if (lead && !log) {
        fprintf(stderr, "charlm: cannot write %s: %s\n", path, strerror(errno));
        hl_dist_abort(2);
    }
    if (lead && !start)
        fprintf(log, "step,train_loss,val_loss,lr,grad_norm,seconds\n");
    if (lead)
        printf("charlm: %s, %zu bytes (%zu train, %zu validation); %zu parameters; batch %d "
               "over %d rank(s)\n  %s\n",
               o.data, size, train.size, val.size, hl_params_n_values(m->params), B,
               hl_dist_size(), config);

    const hl_lr_schedule sched = {.warmup_steps = 100, .total_steps = o.steps, .cosine = true,
                                  .min_scale = 0.1};
    hl_progress progress;
    if (lead)
        hl_progress_begin(&progress, stdout, o.steps, o.eval_every);
    double t0 = hl_seconds(), train_loss = NAN, norm = 0;
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", o.out);
    hl_checkpoint_meta meta[] = {{"config", config}, {"task", "charlm"}};
    for (int64_t step = start; step <= o.steps; step++) {
        if (lead && (step % o.eval_every == 0 || step == o.steps)) {
            double val_loss = validation_loss(g, m, val, B, T, x, y, offsets);
            fprintf(log, "%lld,%.6f,%.6f,%.6g,%.4f,%.2f\n", (long long)step, train_loss, val_loss,
                    o.lr * hl_lr_scale(&sched, step), norm, hl_seconds() - t0);
            fflush(log);
            if (progress.tty)
                printf("\n");
            if (isnan(train_loss)) /* nothing trained yet in this run */
                printf("step %lld: validation loss %.4f\n", (long long)step, val_loss);
            else
                printf("step %lld: train loss %.4f, validation loss %.4f\n", (long long)step,
                       train_loss, val_loss);
            if (step > start &&
                hl_checkpoint_save(path, m->params, opt, step, rngs, 2, meta, 2, &err) != HL_OK) {
                fprintf(stderr, "charlm: %s\n", err.message);
                hl_dist_abort(1);
            }
        }
        if (step == o.steps)
            break;
        train_loss = train_step(g, m, opt, train, B, T, &data_rng, x, y, offsets, &o,
                                hl_lr_scale(&sched, step), &norm);
        if (lead)
            hl_progress_update(&progress, step + 1, train_loss, -1);
    }
    if (lead) {
        hl_progress_end(&progress);
        fclose(log);
        if (o.sample > 0) {
            printf("--- sample (temperature %.2f) ---\n", o.temperature);
            sample_text(g, m, o.prompt, o.sample, o.temperature, &data_rng);
        }
    }
    free(x);
    free(y);
    free(offsets);
    free(text);
    hl_graph_free(g);
    hl_optim_free(opt);
    hl_gpt_free(m);
    hl_dist_finalize();
    return 0;
}
