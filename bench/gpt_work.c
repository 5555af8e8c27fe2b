/* headlab's side of the benchmark's gpt rows: a GPT training step (zero-grad,
 * forward, cross-entropy, backward, AdamW or Muon), an evaluation forward, the
 * first training step of a freshly built model, and the step's phases timed
 * apart (see bench/bench.h). */
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench.h"
#include "headlab.h"

/* Batches drawn once and cycled: the data is not timed. */
#define GPT_BATCHES 4

struct bench_gpt {
    bench_gpt_shape shape;
    bench_gpt_mode mode;
    hl_gpt *model;
    hl_optim *opt;
    hl_optim *muon; /* Muon on the hidden matrices, made on its first use */
    bool use_muon;
    hl_graph *g;
    hl_gpt_cache *cache; /* generation's, made on its first selection */
    int32_t *x, *y; /* GPT_BATCHES batches of (B,T) inputs and next-token targets */
    int next;
};

/* x[t+1] = (3·x[t] + 1) mod V from a random start: a sequence the model can
 * learn. */
static void draw_batches(bench_gpt *w, hl_rng *rng)
{
    const int rows = GPT_BATCHES * w->shape.batch, T = w->shape.ctx, V = w->shape.vocab;
    for (int r = 0; r < rows; r++) {
        int token = (int)(hl_rng_uniform(rng) * V) % V;
        for (int t = 0; t < T; t++) {
            w->x[(size_t)r * T + t] = token;
            token = (3 * token + 1) % V;
            w->y[(size_t)r * T + t] = token;
        }
    }
}

/* A fresh model (seed 0), optimizer and graph: what a training run starts with. */
static int build_model(bench_gpt *w)
{
    hl_graph_free(w->g);
    hl_optim_free(w->opt);
    hl_optim_free(w->muon);
    hl_gpt_free(w->model);
    w->g = NULL, w->opt = NULL, w->muon = NULL, w->model = NULL;
    const bench_gpt_shape *s = &w->shape;
    hl_gpt_config cfg = {.vocab_in = s->vocab, .vocab_out = s->vocab, .n_ctx = s->ctx,
                         .d_model = s->d_model, .n_heads = s->heads, .n_layers = s->layers,
                         .mlp = true, .norm = HL_GPT_NORM_LAYER, .emb_std = 0.02};
    if (s->modern) {
        cfg.pos = HL_GPT_POS_ROPE;
        cfg.norm = HL_GPT_NORM_RMS;
        cfg.mlp = HL_GPT_MLP_SWIGLU;
    }
    hl_error err = {0};
    w->model = hl_gpt_new(&cfg, &err);
    if (!w->model)
        return -1;
    hl_rng rng;
    hl_rng_seed(&rng, 0);
    hl_gpt_init_weights(w->model, &rng);
    w->opt = hl_optim_new(w->model->params,
                          &(hl_optim_config){.kind = HL_OPTIM_ADAMW, .lr = 3e-3, .beta1 = 0.9,
                                             .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01},
                          &err);
    w->g = hl_graph_new(0);
    return w->opt && w->g ? 0 : -1;
}

bench_gpt *bench_gpt_new(const bench_gpt_shape *shape)
{
    bench_gpt *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->shape = *shape;
    const size_t n = (size_t)GPT_BATCHES * shape->batch * shape->ctx;
    w->x = malloc(n * sizeof *w->x);
    w->y = malloc(n * sizeof *w->y);
    if (!w->x || !w->y || build_model(w)) {
        bench_gpt_free(w);
        return NULL;
    }
    hl_rng rng;
    hl_rng_seed(&rng, 1);
    draw_batches(w, &rng);
    return w;
}

void bench_gpt_free(bench_gpt *w)
{
    if (!w)
        return;
    hl_gpt_cache_free(w->cache);
    hl_graph_free(w->g);
    hl_optim_free(w->opt);
    hl_optim_free(w->muon);
    hl_gpt_free(w->model);
    free(w->x);
    free(w->y);
    free(w);
}

void bench_gpt_select(bench_gpt *w, bench_gpt_mode mode) { w->mode = mode; }

int bench_gpt_use_muon(bench_gpt *w, bool muon)
{
    hl_error err = {0};
    /* charlm --optim muon's groups (examples/charlm.c) */
    const hl_optim_groups groups = {
        .n = 2, .group_of = hl_gpt_param_group, .ctx = w->model,
        .cfg = {[HL_GPT_GROUP_OTHER] = {.kind = HL_OPTIM_ADAMW, .lr = 3e-3, .beta1 = 0.9,
                                        .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01},
                [HL_GPT_GROUP_HIDDEN] = {.kind = HL_OPTIM_MUON, .lr = 0.02, .momentum = 0.95}}};
    if (muon && !w->muon && !(w->muon = hl_optim_new_groups(w->model->params, &groups, &err)))
        return -1;
    w->use_muon = muon;
    return 0;
}

/* One generation: the cache emptied, a token fed, then each argmax fed back
 * until BENCH_GENERATE_TOKENS more are made. */
static int generate(void *ctx, char *why, size_t why_size)
{
    bench_gpt *w = ctx;
    hl_error err = {0};
    if (!w->cache && !(w->cache = hl_gpt_cache_new(w->model, BENCH_GENERATE_TOKENS + 1, &err))) {
        snprintf(why, why_size, "%s", err.message);
        return -1;
    }
    hl_gpt_cache_reset(w->cache);
    int32_t token = w->x[0];
    const hl_real *logits;
    for (int i = 0; i <= BENCH_GENERATE_TOKENS; i++) {
        if (hl_gpt_cache_feed(w->cache, &token, 1, &logits, &err) != HL_OK) {
            snprintf(why, why_size, "%s", err.message);
            return -1;
        }
        token = hl_gpt_sample(logits, w->shape.vocab, 0, 0, NULL);
    }
    return 0;
}

static int fail(const bench_gpt *w, char *why, size_t why_size)
{
    snprintf(why, why_size, "%s", hl_graph_message(w->g));
    return -1;
}

/* Writes the clock into at[i] when at is given: the step's phase boundaries. */
static void mark(double *at, int i)
{
    if (at)
        at[i] = bench_now();
}

/* One call: a training step (or, in eval mode, the forward and the loss);
 * with at, the clock before each phase of bench_gpt_phase and after the last. */
static int timed_step(bench_gpt *w, double *at, char *why, size_t why_size)
{
    const int B = w->shape.batch, T = w->shape.ctx;
    const size_t from = (size_t)(w->next++ % GPT_BATCHES) * B * T;
    const bool train = w->mode != BENCH_GPT_EVAL;
    hl_graph_set_grad_enabled(w->g, train);
    hl_graph_set_training(w->g, train);
    mark(at, BENCH_PHASE_ZERO_GRAD);
    if (train)
        hl_params_zero_grad(w->model->params);
    mark(at, BENCH_PHASE_FORWARD);
    if (w->g->profile)
        hl_profile_start(w->g->profile);
    hl_tensor *logits = hl_gpt_forward(w->g, w->model, w->x + from, B, T, NULL);
    mark(at, BENCH_PHASE_LOSS);
    hl_tensor *loss = hl_cross_entropy(w->g, logits, w->y + from, -1);
    if (w->g->profile)
        hl_profile_stop(w->g->profile); /* the loss is the forward's last op */
    if (hl_graph_failed(w->g))
        return fail(w, why, why_size);
    mark(at, BENCH_PHASE_BACKWARD);
    if (train && hl_graph_backward(w->g, loss) != HL_OK)
        return fail(w, why, why_size);
    mark(at, BENCH_PHASE_OPTIMIZER);
    if (train)
        hl_optim_step(w->use_muon ? w->muon : w->opt, 1.0);
    mark(at, BENCH_PHASE_RESET);
    hl_graph_reset(w->g);
    mark(at, BENCH_PHASES);
    return 0;
}

static int gpt_step(void *ctx, char *why, size_t why_size)
{
    return timed_step(ctx, NULL, why, why_size);
}

/* Selects BENCH_GPT_STEP and runs p's warm-up steps. */
static int warm_up(bench_gpt *w, const bench_plan *p, char *why, size_t why_size)
{
    w->mode = BENCH_GPT_STEP;
    const double start = bench_now();
    for (int i = 0; i < p->warmup || bench_now() - start < p->warmup_seconds; i++)
        if (gpt_step(w, why, why_size))
            return -1;
    return 0;
}

int bench_gpt_phases(bench_gpt *w, const bench_plan *p, double *seconds, char *why,
                     size_t why_size)
{
    if (warm_up(w, p, why, why_size))
        return -1;
    for (int r = 0; r < p->reps; r++) {
        double at[BENCH_PHASES + 1];
        if (timed_step(w, at, why, why_size))
            return -1;
        for (int ph = 0; ph < BENCH_PHASES; ph++)
            seconds[ph * p->reps + r] = at[ph + 1] - at[ph];
        seconds[BENCH_PHASES * p->reps + r] = at[BENCH_PHASES] - at[0];
    }
    return 0;
}

int bench_gpt_profile(bench_gpt *w, const bench_plan *p, hl_profile *steps, char *why,
                      size_t why_size)
{
    if (warm_up(w, p, why, why_size))
        return -1;
    int status = 0;
    for (int r = 0; r < p->reps && !status; r++) {
        hl_profile_clear(&steps[r]);
        hl_graph_set_profile(w->g, &steps[r]);
        status = gpt_step(w, why, why_size);
    }
    hl_graph_set_profile(w->g, NULL);
    return status;
}

/* The first step: each timed call builds a new model, optimizer and graph
 * (not timed) and times its first training step, arena growth and all. */
static int first_steps(bench_gpt *w, const bench_plan *p, double *seconds, char *why,
                       size_t why_size)
{
    for (int r = 0; r < p->reps; r++) {
        if (build_model(w)) {
            snprintf(why, why_size, "out of memory building the model");
            return -1;
        }
        const double t0 = bench_now();
        if (gpt_step(w, why, why_size))
            return -1;
        seconds[r] = bench_now() - t0;
    }
    return 0;
}

int bench_gpt_block(void *ctx, const bench_plan *p, double *seconds, char *why,
                    size_t why_size)
{
    bench_gpt *w = ctx;
    if (w->mode == BENCH_GPT_FIRST)
        return first_steps(w, p, seconds, why, why_size);
    if (w->mode == BENCH_GPT_GENERATE)
        return bench_run_block(generate, ctx, 1, p, seconds, why, why_size);
    return bench_run_block(gpt_step, ctx, 1, p, seconds, why, why_size);
}

double bench_gpt_flops(const bench_gpt_shape *s, bench_gpt_mode mode)
{
    /* matmul FLOPs of the forward pass, as tiny_gpt_train.py counts them: per
     * layer 24·B·T·d² + 4·B·T²·d, and 2·B·T·d·V for the head; ×3 with the
     * backward pass (the embedding's gather and scatter-add are not counted) */
    const double B = s->batch, T = s->ctx, d = s->d_model;
    /* SwiGLU's three matrices of d·F against GELU's two of d·4d */
    const hl_gpt_config swiglu = {.d_model = s->d_model, .mlp = HL_GPT_MLP_SWIGLU};
    const double mlp = s->modern ? 6 * B * T * d * hl_gpt_mlp_width(&swiglu) : 16 * B * T * d * d;
    const double forward = s->layers * (8 * B * T * d * d + mlp + 4 * B * T * T * d) +
                           2 * B * T * d * s->vocab;
    if (mode == BENCH_GPT_GENERATE) /* each token: its products with every weight */
        return (BENCH_GENERATE_TOKENS + 1) * 2 * d * (s->layers * (12 * d) + s->vocab);
    return mode == BENCH_GPT_EVAL ? forward : 3 * forward;
}
