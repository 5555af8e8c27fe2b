/*
 * toy_heads: train the 2-layer attention-only transformer of TOYTASK.md and
 * watch its heads specialise (previous-token, 2-back, induction), in numbers,
 * CSV and PNG attention maps.
 *
 *     build/toy_heads [--seed N] [--steps N] [--threads N] [--out DIR]
 *                     [--eval-every N] [--resume CKPT] [--check-sync]
 *     mpirun -np 2 build/mpi/toy_heads ...       (data-parallel, `make MPI=1`)
 *
 * Writes into DIR (default out/toy_heads/): scores.csv, train.csv,
 * attn_L<l>H<h>.png, grid.png, grid_mean.png, grid_step<N>.png,
 * model.safetensors (weights with PyTorch-style names and the config) and
 * checkpoint.safetensors (weights, AdamW state, step and RNG, for --resume).
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

#include "io/checkpoint.h"
#include "train/dist.h"
#include "train/progress.h"
#include "io/fs.h"
#include "headlab.h"
#include "models/gpt.h"
#include "viz/heatmap.h"
#include "analysis/toy_task.h"

#define HELDOUT_SIZE 1000
#define HELDOUT_BATCH 250
#define HELDOUT_SEED 1000003
#define BATCH 32

typedef struct {
    int seed, steps, threads, eval_every;
    bool check_sync;
    const char *out, *resume;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: toy_heads [--seed N] [--steps N] [--threads N] [--out DIR]\n"
            "                 [--eval-every N] [--resume CHECKPOINT] [--check-sync]\n"
            "Trains the toy head-specialisation model of TOYTASK.md (2 layers x 4 heads,\n"
            "attention only) and writes scores.csv, train.csv, attention PNGs and\n"
            "model.safetensors into DIR (default out/toy_heads).\n"
            "  --seed N        model and data seed (default 0)\n"
            "  --steps N       training steps (default 3000)\n"
            "  --threads N     OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
            "  --eval-every N  held-out evaluation interval (default 100)\n"
            "  --resume FILE   continue from a checkpoint.safetensors of an earlier run\n"
            "  --check-sync    (MPI) check after every step that all ranks hold the same\n"
            "                  parameters (a hash compared across ranks)\n"
            "Under mpirun (a `make MPI=1` build) each rank trains on its slice of every\n"
            "batch and the gradients are summed over the ranks; rank 0 writes the files.\n");
}

static int parse_int(const char *flag, const char *value, int lo, int hi)
{
    char *end;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "toy_heads: %s needs an integer in %d..%d, got %s\n", flag, lo, hi,
                value ? value : "nothing");
        exit(2);
    }
    return (int)v;
}

static options parse_options(int argc, char **argv)
{
    options o = {.seed = 0, .steps = 3000, .eval_every = 100, .out = "out/toy_heads"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--seed")) {
            o.seed = parse_int(a, v, 0, 1 << 30), i++;
        } else if (!strcmp(a, "--steps")) {
            o.steps = parse_int(a, v, 0, 100000000), i++;
        } else if (!strcmp(a, "--threads")) {
            o.threads = parse_int(a, v, 1, 1024), i++;
        } else if (!strcmp(a, "--eval-every")) {
            o.eval_every = parse_int(a, v, 1, 100000000), i++;
        } else if (!strcmp(a, "--check-sync")) {
            o.check_sync = true;
        } else if (!strcmp(a, "--out") && v) {
            o.out = v, i++;
        } else if (!strcmp(a, "--resume") && v) {
            o.resume = v, i++;
        } else {
            fprintf(stderr, "toy_heads: unknown or incomplete option %s\n", a);
            usage(stderr);
            exit(2);
        }
    }
    return o;
}

/* ---- the model and its loss ---- */

typedef struct {
    hl_tensor *scored, *other; /* mean cross-entropies, (1) each */
    hl_tensor *logits;         /* (B,T,V) */
    hl_mha_trace trace[2];     /* attention (B,H,T,T) and head outputs per layer */
} toy_forward;

static toy_forward forward(hl_graph *g, const hl_gpt *m, const hl_toy_batch *b)
{
    toy_forward f;
    f.logits = hl_gpt_forward(g, m, b->tokens, b->B, HL_TOY_T, f.trace);
    f.scored = hl_cross_entropy(g, f.logits, b->scored, HL_TOY_IGNORE);
    f.other = hl_cross_entropy(g, f.logits, b->other, HL_TOY_IGNORE);
    return f;
}

/* ---- evaluation on the held-out set ---- */

typedef struct {
    hl_toy_batch *batches[HELDOUT_SIZE / HELDOUT_BATCH];
    hl_graph *g;
} heldout_set;

typedef struct {
    double scored_loss, accuracy;
    hl_toy_head_scores heads[2][8];
} evaluation;

static int heldout_make(heldout_set *h)
{
    hl_rng rng;
    hl_rng_seed(&rng, HELDOUT_SEED);
    for (int i = 0; i < HELDOUT_SIZE / HELDOUT_BATCH; i++) {
        h->batches[i] = hl_toy_batch_new(HELDOUT_BATCH);
        if (!h->batches[i])
            return -1;
        hl_toy_sample(h->batches[i], &rng);
    }
    h->g = hl_graph_new(0);
    return h->g ? 0 : -1;
}

static void heldout_free(heldout_set *h)
{
    for (int i = 0; i < HELDOUT_SIZE / HELDOUT_BATCH; i++)
        hl_toy_batch_free(h->batches[i]);
    hl_graph_free(h->g);
}

/* Scored loss and accuracy, and (when heads is set) every head's scores. */
static int evaluate(heldout_set *h, const hl_gpt *m, bool heads, evaluation *e)
{
    const int L = m->cfg.n_layers, H = m->cfg.n_heads, V = m->cfg.vocab_out;
    hl_toy_score_sums sums[2];
    hl_error err = {0};
    for (int l = 0; l < L; l++)
        if (hl_toy_scores_begin(&sums[l], H, &err) != HL_OK) {
            fprintf(stderr, "toy_heads: evaluation: %s\n", err.message);
            return -1;
        }
    double loss_sum = 0, correct = 0, count = 0;
    hl_graph_set_grad_enabled(h->g, false);
    for (int i = 0; i < HELDOUT_SIZE / HELDOUT_BATCH; i++) {
        const hl_toy_batch *b = h->batches[i];
        toy_forward f = forward(h->g, m, b);
        if (hl_graph_failed(h->g)) {
            fprintf(stderr, "toy_heads: evaluation: %s\n", hl_graph_message(h->g));
            return -1;
        }
        int n = 0;
        for (int p = 0; p < b->B * HL_TOY_T; p++) {
            if (b->scored[p] == HL_TOY_IGNORE)
                continue;
            const hl_real *row = f.logits->data + (size_t)p * V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (row[v] > row[best])
                    best = v;
            correct += best == b->scored[p];
            n++;
        }
        loss_sum += (double)f.scored->data[0] * n;
        count += n;
        if (heads)
            for (int l = 0; l < L; l++)
                hl_toy_scores_add(&sums[l], b, f.trace[l].attn);
        hl_graph_reset(h->g);
    }
    e->scored_loss = loss_sum / count;
    e->accuracy = correct / count;
    if (heads)
        for (int l = 0; l < L; l++)
            hl_toy_scores_finish(&sums[l], e->heads[l]);
    return 0;
}

/* The held-out example with the longest repeated segment. */
static void longest_example(const heldout_set *h, int *batch, int *index)
{
    int best = -1;
    for (int i = 0; i < HELDOUT_SIZE / HELDOUT_BATCH; i++)
        for (int j = 0; j < HELDOUT_BATCH; j++)
            if (h->batches[i]->len[j] > best) {
                best = h->batches[i]->len[j];
                *batch = i;
                *index = j;
            }
}

/* ---- outputs ---- */

static const char *head_role(const hl_toy_head_scores *s, int layer)
{
    if (s->previous_token >= 0.5)
        return "prev";
    if (s->two_back >= 0.5)
        return "2-back";
    if (layer > 0 && s->induction >= 0.5)
        return "induction";
    if (s->first_token >= 0.5)
        return "bos";
    return "-";
}

static int write_scores(const char *dir, const hl_gpt *m, const evaluation *e,
                        double deltas[2][8])
{
    char path[4200];
    snprintf(path, sizeof path, "%s/scores.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "toy_heads: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "layer,head,previous_token,two_back,induction,first_token,entropy,ablation_delta\n");
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < m->cfg.n_heads; h++) {
            const hl_toy_head_scores *s = &e->heads[l][h];
            fprintf(f, "%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", l, h, s->previous_token,
                    s->two_back, s->induction, s->first_token, s->entropy, deltas[l][h]);
        }
    return fclose(f) == 0 ? 0 : -1;
}

static void print_table(const hl_gpt *m, const evaluation *e, double deltas[2][8])
{
    printf("\nheld-out (%d sequences): scored loss %.4f, accuracy %.4f\n", HELDOUT_SIZE,
           e->scored_loss, e->accuracy);
    printf("head   previous  two_back  induction  first  entropy  ablation_delta  role\n");
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < m->cfg.n_heads; h++) {
            const hl_toy_head_scores *s = &e->heads[l][h];
            printf("L%dH%d   %8.3f  %8.3f  %9.3f  %5.3f  %7.3f  %+14.3f  %s\n", l, h,
                   s->previous_token, s->two_back, s->induction, s->first_token, s->entropy,
                   deltas[l][h], head_role(s, l));
        }
}

/* ---- pictures ---- */

/* Every head's attention, (L*H,T,T): for held-out example (batch, index), or
 * the mean over the whole held-out set when index < 0. NULL on error. */
static hl_tensor *collect_maps(heldout_set *h, const hl_gpt *m, int batch, int index)
{
    const int L = m->cfg.n_layers, H = m->cfg.n_heads, T = HL_TOY_T;
    hl_tensor *maps = hl_tensor_new("attention", 3, (int[]){L * H, T, T}, false);
    if (!maps)
        return NULL;
    const size_t map_size = (size_t)T * T;
    hl_graph_set_grad_enabled(h->g, false);
    for (int i = 0; i < HELDOUT_SIZE / HELDOUT_BATCH; i++) {
        if (index >= 0 && i != batch)
            continue;
        toy_forward f = forward(h->g, m, h->batches[i]);
        if (hl_graph_failed(h->g)) {
            hl_tensor_free(maps);
            return NULL;
        }
        for (int l = 0; l < L; l++)
            for (int k = 0; k < H; k++) {
                hl_real *dst = maps->data + (size_t)(l * H + k) * map_size;
                for (int j = index >= 0 ? index : 0; j < (index >= 0 ? index + 1 : HELDOUT_BATCH);
                     j++) {
                    const hl_real *src = f.trace[l].attn->data + ((size_t)j * H + k) * map_size;
                    for (size_t c = 0; c < map_size; c++)
                        dst[c] += index >= 0 ? src[c] : src[c] / HELDOUT_SIZE;
                }
            }
        hl_graph_reset(h->g);
    }
    return maps;
}

/* "L0H1 prev 0.97": the head and what it does best, with that score. */
static void head_label(char *buf, size_t size, int l, int k, const evaluation *e)
{
    if (!e) {
        snprintf(buf, size, "L%dH%d", l, k);
        return;
    }
    const hl_toy_head_scores *s = &e->heads[l][k];
    const char *role = head_role(s, l);
    double score = !strcmp(role, "prev")        ? s->previous_token
                   : !strcmp(role, "2-back")    ? s->two_back
                   : !strcmp(role, "induction") ? s->induction
                   : !strcmp(role, "bos")       ? s->first_token
                                                : fmax(s->previous_token, s->induction);
    snprintf(buf, size, "L%dH%d %s %.2f", l, k, role, score);
}

static int write_grid(const char *path, const hl_tensor *maps, const hl_gpt *m,
                      const evaluation *e, const char *title, hl_error *err)
{
    const int L = m->cfg.n_layers, H = m->cfg.n_heads;
    char text[16][40];
    const char *labels[16];
    for (int l = 0; l < L; l++)
        for (int k = 0; k < H; k++) {
            head_label(text[l * H + k], sizeof text[0], l, k, e);
            labels[l * H + k] = text[l * H + k];
        }
    hl_heatmap_opts opts = {.columns = H, .labels = labels, .title = title};
    return hl_heatmap_write(maps, path, &opts, err) == HL_OK ? 0 : -1;
}

static int toy_write_grid_step(const char *dir, heldout_set *h, const hl_gpt *m, int batch,
                               int index, int step, hl_error *err)
{
    hl_tensor *maps = collect_maps(h, m, batch, index);
    if (!maps)
        return hl_error_set(err, HL_ERR_NOMEM, "cannot compute the attention maps"), -1;
    char path[4200], title[64];
    snprintf(path, sizeof path, "%s/grid_step%d.png", dir, step);
    snprintf(title, sizeof title, "step %d, held-out example %d", step, batch * HELDOUT_BATCH + index);
    int rc = write_grid(path, maps, m, NULL, title, err);
    hl_tensor_free(maps);
    return rc;
}

/* grid.png, grid_mean.png and one attn_L<l>H<h>.png per head, with tokens. */
static int toy_write_pictures(const char *dir, heldout_set *h, const hl_gpt *m, int batch,
                              int index, const evaluation *e, hl_error *err)
{
    const int H = m->cfg.n_heads, T = HL_TOY_T;
    hl_tensor *one = collect_maps(h, m, batch, index), *mean = collect_maps(h, m, 0, -1);
    int rc = one && mean ? 0 : -1;
    char path[4200], title[96];
    const hl_toy_batch *b = h->batches[batch];
    snprintf(title, sizeof title, "held-out example %d (segment %d..%d copied to %d..%d)",
             batch * HELDOUT_BATCH + index, b->src[index], b->src[index] + b->len[index] - 1,
             b->dst[index], b->dst[index] + b->len[index] - 1);
    snprintf(path, sizeof path, "%s/grid.png", dir);
    if (!rc)
        rc = write_grid(path, one, m, e, title, err);
    snprintf(path, sizeof path, "%s/grid_mean.png", dir);
    if (!rc)
        rc = write_grid(path, mean, m, e, "mean over 1000 held-out sequences", err);

    char token_text[HL_TOY_T][8];
    const char *tokens[HL_TOY_T];
    for (int t = 0; t < T; t++) {
        int32_t x = b->tokens[(size_t)index * T + t];
        if (x == HL_TOY_BOS)
            snprintf(token_text[t], sizeof token_text[t], "BOS");
        else
            snprintf(token_text[t], sizeof token_text[t], "%d", (int)x);
        tokens[t] = token_text[t];
    }
    for (int tile = 0; !rc && tile < one->shape[0]; tile++) {
        hl_tensor map = *one;
        hl_tensor_set_shape(&map, 2, (int[]){T, T});
        map.data = one->data + (size_t)tile * T * T;
        char label[40];
        head_label(label, sizeof label, tile / H, tile % H, e);
        const char *labels[] = {label};
        hl_heatmap_opts opts = {.labels = labels, .title = title, .row_labels = tokens,
                                .col_labels = tokens};
        snprintf(path, sizeof path, "%s/attn_L%dH%d.png", dir, tile / H, tile % H);
        rc = hl_heatmap_write(&map, path, &opts, err) == HL_OK ? 0 : -1;
    }
    if (!one || !mean)
        hl_error_set(err, HL_ERR_NOMEM, "cannot compute the attention maps");
    hl_tensor_free(one);
    hl_tensor_free(mean);
    return rc;
}

/* Held-out scored loss with each head alone gated to 0, minus the baseline. */
static int ablate_heads(heldout_set *h, hl_gpt *m, double baseline, double deltas[2][8])
{
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int k = 0; k < m->cfg.n_heads; k++) {
            evaluation e;
            m->blocks[l].attn.gate->data[k] = 0;
            int rc = evaluate(h, m, false, &e);
            m->blocks[l].attn.gate->data[k] = 1;
            if (rc)
                return rc;
            deltas[l][k] = e.scored_loss - baseline;
        }
    return 0;
}

static int save_model(const char *dir, const hl_gpt *m, const char *name, const hl_optim *opt,
                      int64_t step, hl_rng *data_rng)
{
    char path[4200], config[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    hl_gpt_config_format(&m->cfg, config, sizeof config);
    hl_checkpoint_meta meta[] = {{"config", config}, {"task", "toy_heads"}};
    hl_checkpoint_rng rngs[] = {{"data", data_rng}};
    hl_error err = {0};
    if (hl_checkpoint_save(path, m->params, opt, step, rngs, opt ? 1 : 0, meta, 2, &err)) {
        fprintf(stderr, "toy_heads: %s\n", err.message);
        return -1;
    }
    return 0;
}

/* Non-finite loss or gradients: say where, keep the last good checkpoint. */
static bool check_finite(const hl_graph *g, const hl_gpt *m, double loss, int step)
{
    if (isfinite(loss)) {
        const hl_real *grad = hl_params_grads(m->params);
        size_t n = hl_params_count(m->params), i = 0;
        while (i < n && isfinite(grad[i]))
            i++;
        if (i == n)
            return true;
        fprintf(stderr, "toy_heads: step %d: a gradient is not finite\n", step);
        return false;
    }
    const hl_node *bad = hl_graph_first_nonfinite(g);
    fprintf(stderr, "toy_heads: step %d: the loss is %g; the first op whose output went "
            "non-finite is %s; the last good checkpoint is kept\n",
            step, loss, bad ? hl_op_get(bad->op)->name : "(none recorded)");
    return false;
}

static bool is_snapshot_step(int step)
{
    static const int steps[] = {0, 300, 600, 1000, 1500};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (step == steps[i])
            return true;
    return false;
}

/* Counts of scored and other targets in rows [begin, end) of a batch. */
static void count_targets(const hl_toy_batch *b, int begin, int end, double *scored,
                          double *other)
{
    *scored = *other = 0;
    for (int p = begin * HL_TOY_T; p < end * HL_TOY_T; p++) {
        *scored += b->scored[p] != HL_TOY_IGNORE;
        *other += b->other[p] != HL_TOY_IGNORE;
    }
}

/* This rank's rows of the global batch, as a batch of their own. */
static hl_toy_batch shard_of(const hl_toy_batch *b, int begin, int end)
{
    hl_toy_batch s = *b;
    s.B = end - begin;
    s.tokens += begin * HL_TOY_T;
    s.scored += begin * HL_TOY_T;
    s.other += begin * HL_TOY_T;
    s.src += begin;
    s.dst += begin;
    s.len += begin;
    return s;
}

/* One step on this rank's shard. Each loss term is the mean over the GLOBAL
 * batch's targets: the shard's mean weighted by its share of them, so that
 * summing gradients over the ranks gives exactly the one-process gradient.
 * Returns the global loss. */
static double train_step(hl_graph *g, hl_gpt *m, hl_optim *opt, const hl_toy_batch *batch,
                         double lr_scale, int step)
{
    int begin, end;
    hl_dist_shard(batch->B, &begin, &end);
    double scored_all, other_all, scored_mine, other_mine;
    count_targets(batch, 0, batch->B, &scored_all, &other_all);
    count_targets(batch, begin, end, &scored_mine, &other_mine);
    hl_toy_batch shard = shard_of(batch, begin, end);
    hl_params_zero_grad(m->params);
    toy_forward f = forward(g, m, &shard);
    hl_tensor *loss = hl_add(g, hl_scale(g, f.scored, (hl_real)(scored_mine / scored_all)),
                             hl_scale(g, f.other, (hl_real)(other_mine / other_all)));
    if (hl_graph_backward(g, loss) != HL_OK) {
        fprintf(stderr, "toy_heads: step %d: %s\n", step, hl_graph_message(g));
        hl_dist_abort(1);
    }
    double local = loss->data[0];
    if (!check_finite(g, m, local, step))
        hl_dist_abort(1);
    hl_dist_allreduce_grads(m->params);
    hl_optim_step(opt, lr_scale);
    hl_graph_reset(g);
    return hl_dist_sum(local);
}

/* Every rank must run the same configuration: checked before any training. */
static void check_ranks_agree(const options *o)
{
    char text[512];
    snprintf(text, sizeof text, "toy_heads seed=%d steps=%d eval_every=%d resume=%s batch=%d "
             "real=%s", o->seed, o->steps, o->eval_every, o->resume ? o->resume : "-", BATCH,
             HL_REAL_NAME);
    hl_error err = {0};
    if (hl_dist_check_same(text, &err) != HL_OK) {
        if (hl_dist_rank() == 0)
            fprintf(stderr, "toy_heads: the ranks were started with different options: %s\n",
                    err.message);
        hl_dist_abort(2);
    }
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
    check_ranks_agree(&o);
    if (lead && hl_make_dirs(o.out)) {
        fprintf(stderr, "toy_heads: cannot create %s: %s\n", o.out, strerror(errno));
        hl_dist_abort(2);
    }
    hl_error err = {0};
    hl_gpt_config cfg = hl_gpt_config_default();
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    hl_optim *opt = m ? hl_optim_new(m->params,
                                     &(hl_optim_config){.kind = HL_OPTIM_ADAMW, .lr = 3e-3,
                                                        .beta1 = 0.9, .beta2 = 0.98,
                                                        .eps = 1e-8, .weight_decay = 0.01},
                                     &err)
                      : NULL;
    heldout_set heldout = {0};
    hl_toy_batch *batch = hl_toy_batch_new(BATCH);
    hl_graph *g = hl_graph_new(0);
    if (!opt || !batch || !g || heldout_make(&heldout)) {
        fprintf(stderr, "toy_heads: %s\n", err.message[0] ? err.message : "out of memory");
        hl_dist_abort(1);
    }
    hl_rng init_rng, data_rng;
    hl_rng_seed(&init_rng, (uint64_t)o.seed);
    hl_rng_seed(&data_rng, (uint64_t)o.seed + 0x5eed); /* the same on every rank */
    hl_gpt_init_weights(m, &init_rng);
    int64_t start = 0;
    if (o.resume) {
        hl_checkpoint_rng rngs[] = {{"data", &data_rng}};
        if (hl_checkpoint_load(o.resume, m->params, opt, &start, rngs, 1, &err) != HL_OK) {
            fprintf(stderr, "toy_heads: %s\n", err.message);
            hl_dist_abort(2);
        }
        if (lead)
            printf("resumed from %s at step %lld\n", o.resume, (long long)start);
    }
    hl_dist_broadcast_params(m->params);

    char path[4200];
    snprintf(path, sizeof path, "%s/train.csv", o.out);
    FILE *log = lead ? fopen(path, start ? "a" : "w") : NULL;
    if (lead && !log) {
        fprintf(stderr, "toy_heads: cannot write %s: %s\n", path, strerror(errno));
        hl_dist_abort(2);
    }
    if (lead && !start)
        fprintf(log, "step,train_loss,heldout_scored_loss,heldout_accuracy,best_previous_token,"
                     "best_two_back,best_induction,seconds\n");
    int ex_batch = 0, ex_index = 0;
    longest_example(&heldout, &ex_batch, &ex_index);

    if (lead)
        printf("toy_heads: seed %d, %d steps, batch %d over %d rank(s), %zu parameters, out %s\n",
               o.seed, o.steps, BATCH, hl_dist_size(), hl_params_n_values(m->params), o.out);
    const hl_lr_schedule sched = {.warmup_steps = 100};
    hl_progress progress;
    if (lead)
        hl_progress_begin(&progress, stdout, o.steps, o.eval_every);
    double t0 = hl_seconds(), train_loss = NAN;
    for (int step = (int)start; step <= o.steps; step++) {
        bool evaluate_now = step % o.eval_every == 0 || step == o.steps || is_snapshot_step(step);
        if (lead && evaluate_now) {
            evaluation e;
            if (evaluate(&heldout, m, true, &e))
                hl_dist_abort(1);
            double best[3] = {0, 0, 0};
            for (int h = 0; h < cfg.n_heads; h++) {
                best[0] = fmax(best[0], e.heads[0][h].previous_token);
                best[1] = fmax(best[1], e.heads[0][h].two_back);
                best[2] = fmax(best[2], e.heads[1][h].induction);
            }
            fprintf(log, "%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f\n", step, train_loss,
                    e.scored_loss, e.accuracy, best[0], best[1], best[2], hl_seconds() - t0);
            fflush(log);
            if (is_snapshot_step(step) &&
                toy_write_grid_step(o.out, &heldout, m, ex_batch, ex_index, step, &err)) {
                fprintf(stderr, "toy_heads: %s\n", err.message);
                hl_dist_abort(1);
            }
            if (step > 0 && save_model(o.out, m, "checkpoint.safetensors", opt, step, &data_rng))
                hl_dist_abort(1);
        }
        if (step == o.steps)
            break;
        hl_toy_sample(batch, &data_rng);
        train_loss = train_step(g, m, opt, batch, hl_lr_scale(&sched, step), step);
        if (o.check_sync && hl_dist_check_params_equal(m->params, &err) != HL_OK) {
            if (lead)
                fprintf(stderr, "toy_heads: step %d: %s\n", step, err.message);
            hl_dist_abort(1);
        }
        if (lead)
            hl_progress_update(&progress, step + 1, train_loss, -1);
    }
    double train_seconds = hl_seconds() - t0;
    if (lead) {
        hl_progress_end(&progress);
        fclose(log);
        evaluation e;
        double deltas[2][8];
        if (evaluate(&heldout, m, true, &e) || ablate_heads(&heldout, m, e.scored_loss, deltas))
            hl_dist_abort(1);
        print_table(m, &e, deltas);
        if (write_scores(o.out, m, &e, deltas) ||
            toy_write_pictures(o.out, &heldout, m, ex_batch, ex_index, &e, &err) ||
            save_model(o.out, m, "model.safetensors", NULL, o.steps, &data_rng)) {
            if (err.message[0])
                fprintf(stderr, "toy_heads: %s\n", err.message);
            hl_dist_abort(1);
        }
        printf("trained in %.1f s (%.1f steps/s, evaluations included); wrote %s/{scores.csv,"
               "train.csv,grid.png,grid_mean.png,attn_L*H*.png,model.safetensors}\n",
               train_seconds, (o.steps - start) / train_seconds, o.out);
    }
    heldout_free(&heldout);
    hl_toy_batch_free(batch);
    hl_graph_free(g);
    hl_optim_free(opt);
    hl_gpt_free(m);
    hl_dist_finalize();
    return 0;
}
