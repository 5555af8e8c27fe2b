/*
 * toy_heads: train the 2-layer attention-only transformer of docs/toy-task.md and
 * watch its heads specialise (previous-token, two-back, induction), in numbers,
 * CSV and PNG attention maps.
 *
 *     build/toy_heads [--seed N] [--steps N] [--threads N] [--out DIR]
 *                     [--eval-every N] [--resume CKPT] [--check-sync]
 *     mpirun -np 2 build/mpi/toy_heads ...       (data-parallel, `make MPI=1`)
 *
 * Writes into DIR (default out/toy_heads/): scores.csv, train.csv,
 * attn_L<l>H<h>.png, grid.png, grid_mean.png, grid_step<N>.png,
 * report/report.html (which head does what), model.safetensors (weights with PyTorch-style names and the config) and
 * checkpoint.safetensors (weights, AdamW state, step and RNG, for --resume).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/roles.h"
#include "cli/cli.h"
#include "report/head_report.h"
#include "headlab.h"

#define REPORT_SEQUENCES 250 /* held-out sequences the head report evaluates on */
#define BATCH 32

typedef struct {
    int seed, steps, threads, eval_every, heldout;
    bool check_sync, no_report, seed_given;
    const char *out, *resume;
} options;

static const hl_usage usage = {
    "usage: toy_heads [options]\n"
    "Trains the model of the toy task, docs/toy-task.md (2 layers x 4 heads,\n"
    "attention only) and writes scores.csv, train.csv, attention PNGs and\n"
    "model.safetensors into DIR.\n",
    "Under mpirun (a `make MPI=1` build) each rank trains on its slice of every\n"
    "batch and the gradients are summed over the ranks; rank 0 writes the files.\n"
    "Exit status: 0 done, 1 training failed (e.g. non-finite loss), 2 bad input or a\n"
    "file that cannot be written (the previous file is kept).\n",
};

static options parse_options(int argc, char **argv)
{
    options o = {.seed = 0, .steps = 3000, .eval_every = 100, .heldout = HL_TOY_HELDOUT_SEQUENCES,
                 .out = "out/toy_heads"};
    const hl_opt opts[] = {
        HL_OPTION_INT("seed", &o.seed, 0, 1 << 30, "N",
                      "seed of the model's initialisation and of the training data",
                      .given = &o.seed_given),
        HL_OPTION_INT("steps", &o.steps, 0, 1e8, "N", "training steps; with --resume, the new total"),
        HL_OPTION_INT("threads", &o.threads, 1, HL_CLI_MAX_THREADS, "N",
                      "OpenMP threads; without it OMP_NUM_THREADS, else each step takes 1, 2, "
                      "4.. cores, whichever its timed steps ran fastest",
                      .dflt = "tuned"),
        HL_OPTION_INT("eval-every", &o.eval_every, 1, 1e8, "N",
                      "held-out evaluation interval: a row of train.csv and a checkpoint"),
        HL_OPTION_INT("heldout", &o.heldout, 1, 100000, "N",
                      "held-out sequences (from seed 1000003, the set every heads command uses)"),
        HL_OPTION_TEXT("out", &o.out, "DIR", "where every file goes"),
        HL_OPTION_TEXT("resume", &o.resume, "FILE",
                       "continue from a checkpoint.safetensors of an earlier run"),
        HL_OPTION_FLAG("no-report", &o.no_report,
                       "skip the head report (DIR/report/report.html: detectors, maps, "
                       "composition, ablation; see build/heads report)"),
        HL_OPTION_FLAG("check-sync", &o.check_sync,
                       "(MPI) check after every step that all ranks hold the same parameters "
                       "(a hash compared across ranks)"),
        {0},
    };
    hl_cli_parse_or_exit("toy_heads", &usage, opts, argc, argv);
    return o;
}

/* ---- the held-out set and what an evaluation measures ---- */

typedef struct {
    hl_toy_batch *seqs; /* the sequences, with their repeated segments */
    hl_eval_set *set;   /* the same, as an evaluation set ("scored", "other") */
    int example;        /* the sequence with the longest segment: the maps' example */
} heldout_set;

static void heldout_free(heldout_set *h)
{
    hl_toy_batch_free(h->seqs);
    hl_eval_set_free(h->set);
}

static hl_status heldout_make(heldout_set *h, int n, hl_error *err)
{
    *h = (heldout_set){hl_toy_batch_new(n), NULL, 0};
    if (!h->seqs)
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    hl_rng rng;
    hl_rng_seed(&rng, HL_TOY_HELDOUT_SEED);
    hl_toy_sample(h->seqs, &rng);
    for (int i = 1; i < h->seqs->B; i++)
        if (h->seqs->len[i] > h->seqs->len[h->example])
            h->example = i;
    h->set = hl_toy_eval_set(h->seqs, HL_TOY_HELDOUT_BATCH, err);
    return h->set ? HL_OK : err->status;
}

/* One evaluation: losses, and when asked, every head's scores and maps. */
typedef struct {
    hl_eval_result result;             /* group 0: scored, 1: other */
    int L, H;
    hl_head_scores *scores;            /* (L*H), or NULL when not asked for */
    hl_tensor *example_maps, *mean_maps; /* (L*H,T,T) each, or NULL */
} evaluation;

static void evaluation_free(evaluation *e)
{
    free(e->scores);
    hl_tensor_free(e->example_maps);
    hl_tensor_free(e->mean_maps);
    memset(e, 0, sizeof *e);
}

typedef struct {
    const heldout_set *h;
    evaluation *e;
    hl_detector_sums *sums; /* per layer */
} eval_ctx;

/* Adds one batch's attention to the scores and maps (an hl_eval_hook). */
static hl_status add_heads(void *ctx, const hl_eval_batch *b, const hl_tensor *logits,
                           const hl_gpt_run *run, hl_error *err)
{
    (void)logits;
    eval_ctx *c = ctx;
    evaluation *e = c->e;
    const size_t map = (size_t)HL_TOY_T * HL_TOY_T;
    const int example = c->h->example - b->first;
    for (int l = 0; l < e->L; l++) {
        const hl_real *attn = run->trace[l].attn->data; /* (B,H,T,T) */
        if (hl_detector_sums_add(&c->sums[l], b->tokens, run->trace[l].attn, b->repeats,
                                 err) != HL_OK)
            return err->status;
        for (int k = 0; k < e->H; k++) {
            hl_real *mean = e->mean_maps->data + (size_t)(l * e->H + k) * map;
            for (int i = 0; i < b->B; i++)
                for (size_t j = 0; j < map; j++)
                    mean[j] += attn[((size_t)i * e->H + k) * map + j] / c->h->seqs->B;
            if (example >= 0 && example < b->B)
                memcpy(e->example_maps->data + (size_t)(l * e->H + k) * map,
                       attn + ((size_t)example * e->H + k) * map, map * sizeof(hl_real));
        }
    }
    return HL_OK;
}

/* Evaluates m on the held-out set; with_heads adds the scores and maps. */
static hl_status evaluate(const heldout_set *h, const hl_gpt *m, bool with_heads, evaluation *e,
                          hl_error *err)
{
    *e = (evaluation){.L = m->cfg.n_layers, .H = m->cfg.n_heads};
    if (!with_heads)
        return hl_eval_loss(m, h->set, NULL, NULL, NULL, &e->result, err);
    const int shape[3] = {e->L * e->H, HL_TOY_T, HL_TOY_T};
    e->scores = calloc((size_t)e->L * e->H, sizeof *e->scores);
    e->example_maps = hl_tensor_new("attention", 3, shape, false);
    e->mean_maps = hl_tensor_new("mean attention", 3, shape, false);
    hl_detector_sums *sums = calloc((size_t)e->L, sizeof *sums);
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    hl_status s = e->scores && e->example_maps && e->mean_maps && sums
                      ? HL_OK
                      : hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    for (int l = 0; s == HL_OK && l < e->L; l++)
        hl_detector_sums_begin(&sums[l], e->H);
    eval_ctx ctx = {h, e, sums};
    if (s == HL_OK)
        s = hl_eval_loss(m, h->set, &(hl_gpt_run){.trace = trace}, add_heads, &ctx, &e->result,
                         err);
    for (int l = 0; s == HL_OK && l < e->L; l++)
        hl_detector_sums_finish(&sums[l], e->scores + l * e->H);
    free(sums);
    if (s != HL_OK)
        evaluation_free(e);
    return s;
}

/* Held-out scored loss with each head alone gated to 0, minus the baseline:
 * deltas (L*H). */
static hl_status ablate_heads(const heldout_set *h, const hl_gpt *m, double baseline,
                              double *deltas, hl_error *err)
{
    const int H = m->cfg.n_heads;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int k = 0; k < H; k++) {
            hl_head_set one = {0};
            one.on[l][k] = true;
            hl_eval_result r;
            if (hl_heads_evaluate(m, h->set, &one, NULL, &r, err) != HL_OK)
                return err->status;
            deltas[l * H + k] = r.loss[0] - baseline;
        }
    return HL_OK;
}

/* ---- reports ---- */

/* The head's label role (analysis/roles.h), or NULL. In layer 0 of this
 * attention-only model no head can compose with an earlier one, so its
 * induction score is not a role there. roles: room for HL_LABEL_ROLES. */
static const hl_role *head_role(const hl_head_scores *s, int layer, hl_role *roles)
{
    hl_head_scores scores = *s;
    if (layer == 0)
        scores.v[HL_DETECT_INDUCTION] = NAN;
    return hl_head_label_role(&scores, roles);
}

static hl_status write_scores(const char *dir, const evaluation *e, const double *deltas,
                              hl_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/scores.csv", dir);
    hl_atomic_file f;
    if (hl_atomic_begin(&f, path, err) != HL_OK)
        return err->status;
    fprintf(f.f, "layer,head,previous_token,two_back,induction,first_token,entropy,"
                 "ablation_delta\n");
    for (int l = 0; l < e->L; l++)
        for (int h = 0; h < e->H; h++) {
            const double *v = e->scores[l * e->H + h].v;
            fprintf(f.f, "%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", l, h, v[HL_DETECT_PREVIOUS],
                    v[HL_DETECT_TWO_BACK], v[HL_DETECT_INDUCTION], v[HL_DETECT_FIRST],
                    v[HL_DETECT_ENTROPY], deltas[l * e->H + h]);
        }
    return hl_atomic_commit(&f, err);
}

static void print_table(const evaluation *e, const double *deltas, int sequences)
{
    printf("\nheld-out (%d sequences): scored loss %.4f, accuracy %.4f\n", sequences,
           e->result.loss[0], e->result.accuracy[0]);
    printf("head   previous  two_back  induction  first  entropy  ablation_delta  role\n");
    for (int l = 0; l < e->L; l++)
        for (int h = 0; h < e->H; h++) {
            const hl_head_scores *s = &e->scores[l * e->H + h];
            const double *v = s->v;
            hl_role roles[HL_LABEL_ROLES];
            const hl_role *role = head_role(s, l, roles);
            printf("L%dH%d   %8.3f  %8.3f  %9.3f  %5.3f  %7.3f  %+14.3f  %s\n", l, h,
                   v[HL_DETECT_PREVIOUS], v[HL_DETECT_TWO_BACK], v[HL_DETECT_INDUCTION],
                   v[HL_DETECT_FIRST], v[HL_DETECT_ENTROPY], deltas[l * e->H + h],
                   role ? role->name : "-");
        }
}

/* "L0H1 previous-token 0.97": the head and what it does best, with that score; just the
 * head's name when there are no scores. */
static void head_label(char *buf, size_t size, int l, int k, const evaluation *e)
{
    if (!e || !e->scores) {
        snprintf(buf, size, "L%dH%d", l, k);
        return;
    }
    const hl_head_scores *s = &e->scores[l * e->H + k];
    hl_role roles[HL_LABEL_ROLES];
    const hl_role *role = head_role(s, l, roles);
    snprintf(buf, size, "L%dH%d %s %.2f", l, k, role ? role->name : "-",
             role ? role->score : fmax(s->v[HL_DETECT_PREVIOUS], s->v[HL_DETECT_INDUCTION]));
}

/* maps (L*H,T,T) as one labelled grid; `labelled` adds each head's role. */
static hl_status write_grid(const char *path, const hl_tensor *maps, const evaluation *e,
                            bool labelled, const char *title, hl_error *err)
{
    const int n = e->L * e->H;
    char (*text)[40] = calloc((size_t)n, sizeof *text);
    const char **labels = calloc((size_t)n, sizeof *labels);
    hl_status s = text && labels ? HL_OK : hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    for (int i = 0; s == HL_OK && i < n; i++) {
        head_label(text[i], sizeof text[i], i / e->H, i % e->H, labelled ? e : NULL);
        labels[i] = text[i];
    }
    hl_heatmap_opts opts = {.columns = e->H, .labels = labels, .title = title};
    if (s == HL_OK)
        s = hl_heatmap_write(maps, path, &opts, err);
    free(text);
    free(labels);
    return s;
}

static hl_status write_grid_step(const char *dir, const heldout_set *h, const evaluation *e,
                                 int step, hl_error *err)
{
    char path[4200], title[64];
    snprintf(path, sizeof path, "%s/grid_step%d.png", dir, step);
    snprintf(title, sizeof title, "step %d, held-out example %d", step, h->example);
    return write_grid(path, e->example_maps, e, false, title, err);
}

/* One attn_L<l>H<h>.png per head, the example's tokens on both axes. */
static hl_status write_head_maps(const char *dir, const heldout_set *h, const evaluation *e,
                                 const char *title, hl_error *err)
{
    const int T = HL_TOY_T;
    char token_text[HL_TOY_T][8];
    const char *tokens[HL_TOY_T];
    for (int t = 0; t < T; t++) {
        int32_t x = h->seqs->tokens[(size_t)h->example * T + t];
        snprintf(token_text[t], sizeof token_text[t], x == HL_TOY_BOS ? "BOS" : "%d", (int)x);
        tokens[t] = token_text[t];
    }
    hl_status s = HL_OK;
    for (int tile = 0; s == HL_OK && tile < e->L * e->H; tile++) {
        hl_tensor map = *e->example_maps;
        hl_tensor_set_shape(&map, 2, (int[]){T, T});
        map.data = e->example_maps->data + (size_t)tile * T * T;
        char label[40], path[4200];
        head_label(label, sizeof label, tile / e->H, tile % e->H, e);
        const char *labels[] = {label};
        hl_heatmap_opts opts = {.labels = labels, .title = title, .row_labels = tokens,
                                .col_labels = tokens};
        snprintf(path, sizeof path, "%s/attn_L%dH%d.png", dir, tile / e->H, tile % e->H);
        s = hl_heatmap_write(&map, path, &opts, err);
    }
    return s;
}

/* grid.png, grid_mean.png and one attn_L<l>H<h>.png per head. */
static hl_status write_pictures(const char *dir, const heldout_set *h, const evaluation *e,
                                hl_error *err)
{
    const int i = h->example;
    const hl_toy_batch *b = h->seqs;
    char path[4200], title[96], mean_title[64];
    snprintf(title, sizeof title, "held-out example %d (segment %d..%d copied to %d..%d)", i,
             b->src[i], b->src[i] + b->len[i] - 1, b->dst[i], b->dst[i] + b->len[i] - 1);
    snprintf(mean_title, sizeof mean_title, "mean over %d held-out sequences", b->B);
    snprintf(path, sizeof path, "%s/grid.png", dir);
    if (write_grid(path, e->example_maps, e, true, title, err) != HL_OK)
        return err->status;
    snprintf(path, sizeof path, "%s/grid_mean.png", dir);
    if (write_grid(path, e->mean_maps, e, true, mean_title, err) != HL_OK)
        return err->status;
    return write_head_maps(dir, h, e, title, err);
}

/* ---- training ---- */

typedef struct {
    options o;
    bool lead;             /* rank 0 alone prints and writes */
    hl_gpt *m;
    hl_optim *opt;
    hl_graph *g;
    hl_toy_batch *batch;   /* the global batch of the step */
    hl_rng data_rng;       /* the same on every rank */
    heldout_set heldout;
    int64_t start;         /* the step training starts from */
    int64_t saved_step;    /* the last checkpoint this run wrote; 0: none yet */
    FILE *log;             /* train.csv (rank 0) */
    double t0;             /* train.csv's seconds count from it: when training started,
                              less a resumed run's seconds before */
    double seconds_before; /* a resumed run's seconds at its checkpoint, read back */
    hl_thread_tuner tuner;  /* each step's thread count, unless the user fixed it */
} run;

static hl_status save_model(run *r, const char *name, bool with_optimizer, int64_t step,
                            hl_error *err)
{
    char path[4200], config[512];
    snprintf(path, sizeof path, "%s/%s", r->o.out, name);
    hl_gpt_config_format(&r->m->cfg, config, sizeof config);
    hl_checkpoint_meta meta[] = {{"config", config}, {"task", "toy_heads"}};
    hl_checkpoint_rng rngs[] = {{"data", &r->data_rng, NULL}};
    return hl_checkpoint_save(path, r->m->params, with_optimizer ? r->opt : NULL, step, rngs,
                              with_optimizer ? 1 : 0, meta, 2, err);
}

/* Target counts of rows [begin, end) of a batch. */
static void count_targets(const hl_toy_batch *b, int begin, int end, double *scored,
                          double *other)
{
    *scored = *other = 0;
    for (int p = begin * HL_TOY_T; p < end * HL_TOY_T; p++) {
        *scored += b->scored[p] != HL_TOY_IGNORE;
        *other += b->other[p] != HL_TOY_IGNORE;
    }
}

/* This rank's loss (an hl_loss_fn): each term is the mean over the GLOBAL
 * batch's targets, the shard's mean weighted by its share of them, so that
 * summing gradients over the ranks gives exactly the one-process gradient. */
static hl_tensor *shard_loss(hl_graph *g, void *ctx)
{
    const run *r = ctx;
    int begin, end;
    hl_dist_shard(r->batch->B, &begin, &end);
    double scored_all, other_all, scored_mine, other_mine;
    count_targets(r->batch, 0, r->batch->B, &scored_all, &other_all);
    count_targets(r->batch, begin, end, &scored_mine, &other_mine);
    const hl_toy_batch shard = hl_toy_batch_rows(r->batch, begin, end);
    hl_tensor *logits = hl_gpt_forward(g, r->m, shard.tokens, shard.B, HL_TOY_T, NULL);
    hl_tensor *scored = hl_cross_entropy(g, logits, shard.scored, HL_TOY_IGNORE);
    hl_tensor *other = hl_cross_entropy(g, logits, shard.other, HL_TOY_IGNORE);
    return hl_add(g, hl_scale(g, scored, (hl_real)(scored_mine / scored_all)),
                  hl_scale(g, other, (hl_real)(other_mine / other_all)));
}

static bool is_snapshot_step(int64_t step)
{
    static const int steps[] = {0, 300, 600, 1000, 1500};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (step == steps[i])
            return true;
    return false;
}

/* A row of train.csv, a grid snapshot at the chosen steps, a checkpoint (an
 * hl_run_hooks record). */
static hl_status record(void *ctx, int64_t step, const hl_step_result *last, hl_error *err)
{
    run *r = ctx;
    evaluation e;
    if (evaluate(&r->heldout, r->m, true, &e, err) != HL_OK)
        return err->status;
    double best[3] = {0, 0, 0};
    for (int h = 0; h < e.H; h++) {
        best[0] = fmax(best[0], e.scores[h].v[HL_DETECT_PREVIOUS]);
        best[1] = fmax(best[1], e.scores[h].v[HL_DETECT_TWO_BACK]);
        if (e.L > 1)
            best[2] = fmax(best[2], e.scores[e.H + h].v[HL_DETECT_INDUCTION]);
    }
    fprintf(r->log, "%lld,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f\n", (long long)step, last->loss,
            e.result.loss[0], e.result.accuracy[0], best[0], best[1], best[2],
            hl_seconds() - r->t0);
    hl_status s = HL_OK;
    if (fflush(r->log) != 0 || ferror(r->log))
        s = hl_error_set(err, HL_ERR_IO, "cannot write %s/train.csv: %s", r->o.out,
                         strerror(errno));
    if (s == HL_OK && is_snapshot_step(step))
        s = write_grid_step(r->o.out, &r->heldout, &e, (int)step, err);
    if (s == HL_OK && step > r->start &&
        (s = save_model(r, "checkpoint.safetensors", true, step, err)) == HL_OK)
        r->saved_step = step;
    evaluation_free(&e);
    return s;
}

/* The step's batch (an hl_run_hooks batch): the same on every rank. */
static hl_status next_batch(void *ctx, int64_t step, hl_error *err)
{
    (void)step, (void)err;
    run *r = ctx;
    hl_toy_sample(r->batch, &r->data_rng);
    return HL_OK;
}

/* Steps start..steps (train/run.h), evaluating on rank 0 every eval_every
 * steps and at the snapshot steps. */
static void train(run *r)
{
    const hl_run_hooks hooks = {.ctx = r, .batch = next_batch, .loss = shard_loss,
                                .record = record, .evaluate_at = is_snapshot_step};
    const hl_run_opts opts = {.start = r->start, .steps = r->o.steps,
                              .eval_every = r->o.eval_every,
                              .schedule = {.warmup_steps = 100}, .lead = r->lead,
                              .check_sync = r->o.check_sync, .progress = stdout,
                              .tuner = &r->tuner};
    r->t0 = hl_seconds() - r->seconds_before;
    hl_error err = {0};
    if (hl_run_train(r->g, r->m->params, r->opt, &opts, &hooks, &err) != HL_OK) {
        if (r->lead)
            hl_cli_report_failed_run("toy_heads", err.message, r->o.out, r->saved_step,
                                     r->start, r->o.resume != NULL);
        hl_dist_abort(err.status == HL_ERR_IO ? 2 : 1);
    }
}

/* ---- set-up and the end of the run ---- */

/* Every rank must run the same configuration: checked before any training. */
static void check_ranks_agree(const options *o)
{
    char text[512];
    snprintf(text, sizeof text, "toy_heads seed=%d steps=%d eval_every=%d heldout=%d resume=%s "
             "batch=%d real=%s", o->seed, o->steps, o->eval_every, o->heldout,
             o->resume ? o->resume : "-", BATCH, HL_REAL_NAME);
    hl_error err = {0};
    if (hl_dist_check_same(text, &err) != HL_OK) {
        if (hl_dist_rank() == 0)
            fprintf(stderr, "toy_heads: the ranks were started with different options: %s\n",
                    err.message);
        hl_dist_abort(2);
    }
}

/* The model at its starting point: fresh, or from --resume (exit 2 when the
 * checkpoint does not fit or has nothing left to train). */
static void start_model(run *r)
{
    hl_rng init_rng;
    hl_rng_seed(&init_rng, (uint64_t)r->o.seed);
    hl_rng_seed(&r->data_rng, (uint64_t)r->o.seed + 0x5eed); /* the same on every rank */
    hl_gpt_init_weights(r->m, &init_rng);
    if (r->o.resume) {
        hl_error err = {0};
        hl_checkpoint_rng rngs[] = {{"data", &r->data_rng, NULL}};
        if (hl_checkpoint_resume(r->o.resume, r->m->params, r->opt, r->o.steps, &r->start,
                                 rngs, 1, &err) != HL_OK) {
            if (r->lead)
                fprintf(stderr, "toy_heads: %s\n", err.message);
            hl_dist_abort(2);
        }
        if (r->lead)
            printf("resumed from %s at step %lld%s\n", r->o.resume, (long long)r->start,
                   r->o.seed_given ? " (--seed unused: the weights and the training data go "
                                     "on from the checkpoint)"
                                   : "");
    }
    hl_dist_broadcast_params(r->m->params);
}

/* A resumed run's train.csv seconds go on from its last row kept, the
 * checkpoint's (0 without rows). */
static double seconds_at_checkpoint(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/train.csv", dir);
    hl_error err = {0};
    hl_csv_table t;
    if (hl_csv_read(path, &t, &err) != HL_OK) {
        fprintf(stderr, "toy_heads: %s\n", err.message);
        hl_dist_abort(2);
    }
    const int col = hl_csv_column(&t, "seconds");
    const double seconds = t.n_rows && col >= 0 ? hl_csv_value(&t, t.n_rows - 1, col) : 0;
    hl_csv_table_free(&t);
    return isfinite(seconds) && seconds > 0 ? seconds : 0;
}

/* train.csv: new, or when resuming its rows up to the checkpoint's step
 * (io/csv_log.h). */
static FILE *open_log(const char *dir, int64_t resume_step)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/train.csv", dir);
    hl_error err = {0};
    FILE *log = hl_csv_log_open(path, resume_step,
                                "step,train_loss,heldout_scored_loss,heldout_accuracy,"
                                "best_previous_token,best_two_back,best_induction,seconds",
                                &err);
    if (!log) {
        fprintf(stderr, "toy_heads: %s\n", err.message);
        hl_dist_abort(2);
    }
    return log;
}

static void setup(run *r, const options *o)
{
    *r = (run){.o = *o, .lead = hl_dist_rank() == 0};
    check_ranks_agree(o);
    if (r->lead && hl_fs_make_dirs(o->out)) {
        fprintf(stderr, "toy_heads: cannot create %s: %s\n", o->out, strerror(errno));
        hl_dist_abort(2);
    }
    hl_error err = {0};
    hl_gpt_config cfg = hl_toy_gpt_config();
    const hl_optim_config adamw = {.kind = HL_OPTIM_ADAMW, .lr = 3e-3, .beta1 = 0.9,
                                   .beta2 = 0.98, .eps = 1e-8, .weight_decay = 0.01};
    r->m = hl_gpt_new(&cfg, &err);
    r->opt = r->m ? hl_optim_new(r->m->params, &adamw, &err) : NULL;
    r->batch = hl_toy_batch_new(BATCH);
    r->g = hl_graph_new(0);
    if (!r->opt || !r->batch || !r->g || heldout_make(&r->heldout, o->heldout, &err) != HL_OK) {
        fprintf(stderr, "toy_heads: %s\n", err.message[0] ? err.message : "out of memory");
        hl_dist_abort(1);
    }
    start_model(r);
    r->log = r->lead ? open_log(o->out, r->start > 0 ? r->start : -1) : NULL;
    if (r->log && r->start > 0)
        r->seconds_before = seconds_at_checkpoint(o->out);
    if (r->lead)
        printf("toy_heads: seed %d, %d steps, batch %d over %d rank(s), %zu parameters, out %s\n",
               o->seed, o->steps, BATCH, hl_dist_size(), hl_params_n_values(r->m->params),
               o->out);
}

/* The final evaluation: the table, scores.csv, the pictures and the model. */
static void report(run *r)
{
    hl_error err = {0};
    evaluation e;
    double *deltas = calloc((size_t)r->m->cfg.n_layers * r->m->cfg.n_heads, sizeof *deltas);
    if (!deltas || evaluate(&r->heldout, r->m, true, &e, &err) != HL_OK ||
        ablate_heads(&r->heldout, r->m, e.result.loss[0], deltas, &err) != HL_OK) {
        fprintf(stderr, "toy_heads: %s\n", err.message[0] ? err.message : "out of memory");
        hl_dist_abort(1);
    }
    print_table(&e, deltas, r->heldout.seqs->B);
    if (write_scores(r->o.out, &e, deltas, &err) != HL_OK ||
        write_pictures(r->o.out, &r->heldout, &e, &err) != HL_OK ||
        save_model(r, "model.safetensors", false, r->o.steps, &err) != HL_OK) {
        fprintf(stderr, "toy_heads: %s\n", err.message);
        hl_dist_abort(err.status == HL_ERR_IO ? 2 : 1);
    }
    evaluation_free(&e);
    free(deltas);
}

/* DIR/report/report.html: which head does what (report/head_report.h), on
 * the held-out set and the maps' example. */
static void head_report(run *r)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/report", r->o.out);
    hl_error err = {0};
    hl_gpt_meta meta = {.task = "toy_heads", .step = r->o.steps};
    const hl_eval_set *set = r->heldout.set;
    /* The report's ablation and importance tables on the first REPORT_SEQUENCES
     * held-out sequences (a set's rows are contiguous, so a shorter n is a
     * prefix of it); the table above has all of them. */
    hl_eval_set first = *set;
    first.n = first.n < REPORT_SEQUENCES ? first.n : REPORT_SEQUENCES;
    hl_head_report_opts ro = {.model_path = "model.safetensors", .meta = &meta,
                              .probe = {.bos = HL_TOY_BOS, .seed = 12345},
                              .map_tokens = set->tokens + (size_t)r->heldout.example * set->T,
                              .map_T = set->T, .eval = &first};
    if (hl_fs_make_dirs(dir)) {
        fprintf(stderr, "toy_heads: report: cannot create %s: %s\n", dir, strerror(errno));
        hl_dist_abort(2);
    }
    if (hl_head_report_write(r->m, &ro, dir, &err) != HL_OK) {
        fprintf(stderr, "toy_heads: report: %s\n", err.message);
        hl_dist_abort(err.status == HL_ERR_IO ? 2 : 1);
    }
}

static void teardown(run *r)
{
    if (r->log)
        fclose(r->log);
    heldout_free(&r->heldout);
    hl_toy_batch_free(r->batch);
    hl_graph_free(r->g);
    hl_optim_free(r->opt);
    hl_gpt_free(r->m);
}

int main(int argc, char **argv)
{
    hl_dist_init(&argc, &argv);
    hl_cli_init();
    options o = parse_options(argc, argv);
    const int tuner_threads = hl_cli_set_threads(o.threads);
    run r;
    setup(&r, &o);
    hl_thread_tuner_init(&r.tuner, tuner_threads);
    double t0 = hl_seconds();
    train(&r);
    double seconds = hl_seconds() - t0;
    if (r.lead) {
        fclose(r.log);
        r.log = NULL;
        report(&r);
        if (!o.no_report)
            head_report(&r);
        printf("trained in %.1f s (%.1f steps/s, evaluations included); wrote %s/{scores.csv,"
               "train.csv,grid.png,grid_mean.png,attn_L*H*.png,model.safetensors%s}\n",
               seconds, (double)(o.steps - r.start) / seconds, o.out,
               o.no_report ? "" : ",report/report.html");
    }
    teardown(&r);
    hl_dist_finalize();
    return 0;
}
