/* headlab's side of the benchmark: GEMM calls, MHA forward/backward, the toy
 * training step, and the child of the peak-memory rows (see bench/bench.h). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "bench/bench.h"
#include "ops/gemm.h"
#include "tasks/toy_task.h"
#include "headlab.h"

int bench_run_block(bench_work_fn once, void *ctx, int calls, const bench_plan *p,
                    double *seconds, char *why, size_t why_size)
{
    const double start = bench_now();
    for (int i = 0; i < p->warmup || bench_now() - start < p->warmup_seconds; i++)
        if (once(ctx, why, why_size))
            return -1;
    for (int r = 0; r < p->reps; r++) {
        const double t0 = bench_now();
        for (int i = 0; i < calls; i++)
            if (once(ctx, why, why_size))
                return -1;
        seconds[r] = (bench_now() - t0) / calls;
    }
    return 0;
}

/* ---- GEMM ---- */

/* Enough calls per timed run that one run does about this many FLOPs, so
 * the smallest shapes are not timed at the clock's resolution. */
#define GEMM_RUN_FLOPS 5e7

static hl_real *random_matrix(size_t n, hl_rng *rng)
{
    hl_real *m = malloc(n * sizeof *m);
    for (size_t i = 0; m && i < n; i++)
        m[i] = (hl_real)(2 * hl_rng_uniform(rng) - 1);
    return m;
}

int bench_gemm_init(bench_gemm *c, bool trans_a, bool trans_b, int M, int N, int K, int batch,
                    const bench_openblas *ob)
{
    *c = (bench_gemm){.trans_a = trans_a, .trans_b = trans_b, .M = M, .N = N, .K = K,
                      .batch = batch, .ob = ob};
    const double flops = bench_gemm_flops(c);
    c->inner = flops >= GEMM_RUN_FLOPS ? 1 : (int)(GEMM_RUN_FLOPS / flops);
    hl_rng rng;
    hl_rng_seed(&rng, 1);
    c->A = random_matrix((size_t)batch * M * K, &rng);
    c->B = random_matrix((size_t)batch * K * N, &rng);
    c->C = random_matrix((size_t)batch * M * N, &rng);
    if (!c->A || !c->B || !c->C) {
        bench_gemm_release(c);
        return -1;
    }
    return 0;
}

void bench_gemm_release(bench_gemm *c)
{
    free(c->A);
    free(c->B);
    free(c->C);
    c->A = c->B = c->C = NULL;
}

double bench_gemm_flops(const bench_gemm *c) { return 2.0 * c->batch * c->M * c->N * c->K; }

/* Row strides of the stored operands: A is (M,K), or (K,M) when transposed. */
static int lda_of(const bench_gemm *c) { return c->trans_a ? c->M : c->K; }
static int ldb_of(const bench_gemm *c) { return c->trans_b ? c->K : c->N; }

static int gemm_headlab_once(void *ctx, char *why, size_t why_size)
{
    (void)why, (void)why_size;
    const bench_gemm *c = ctx;
    if (c->batch == 1)
        hl_gemm(c->trans_a, c->trans_b, c->M, c->N, c->K, 1, c->A, lda_of(c), c->B, ldb_of(c), 0,
                c->C, c->N);
    else
        hl_gemm_batched(c->trans_a, c->trans_b, c->M, c->N, c->K, 1, c->A, lda_of(c), c->B,
                        ldb_of(c), 0, c->C, c->N, c->batch, (size_t)c->M * c->K,
                        (size_t)c->K * c->N, (size_t)c->M * c->N);
    return 0;
}

/* OpenBLAS 0.3.21 has no batched GEMM: one call per matrix. */
static int gemm_openblas_once(void *ctx, char *why, size_t why_size)
{
    (void)why, (void)why_size;
    const bench_gemm *c = ctx;
    for (int b = 0; b < c->batch; b++)
        bench_openblas_gemm(c->ob, c->trans_a, c->trans_b, c->M, c->N, c->K,
                            c->A + (size_t)b * c->M * c->K, lda_of(c),
                            c->B + (size_t)b * c->K * c->N, ldb_of(c),
                            c->C + (size_t)b * c->M * c->N, c->N);
    return 0;
}

int bench_gemm_headlab(void *ctx, const bench_plan *p, double *seconds, char *why,
                       size_t why_size)
{
    const bench_gemm *c = ctx;
    return bench_run_block(gemm_headlab_once, ctx, c->inner, p, seconds, why, why_size);
}

int bench_gemm_openblas(void *ctx, const bench_plan *p, double *seconds, char *why,
                        size_t why_size)
{
    const bench_gemm *c = ctx;
    return bench_run_block(gemm_openblas_once, ctx, c->inner, p, seconds, why, why_size);
}

/* ---- multi-head attention ---- */

struct bench_mha_work {
    int B, T, E, H;
    bool causal, backward, weights;
    hl_params *params;
    hl_mha mha;
    hl_tensor *x;     /* (B,T,E), requires grad */
    hl_real *grad_out; /* (B,T,E) */
    hl_graph *g;
};

bench_mha_work *bench_mha_new(int B, int T, int E, int H)
{
    bench_mha_work *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    *w = (bench_mha_work){.B = B, .T = T, .E = E, .H = H, .params = hl_params_new(),
                          .g = hl_graph_new(0)};
    hl_error err = {0};
    hl_mha_config cfg = {.embed_dim = E, .num_heads = H, .bias = true};
    hl_rng rng;
    hl_rng_seed(&rng, 0);
    if (!w->params || !w->g || hl_mha_declare(&w->mha, w->params, "", &cfg, &err) != HL_OK ||
        hl_params_commit(w->params) != HL_OK) {
        bench_mha_free(w);
        return NULL;
    }
    hl_mha_init_weights(&w->mha, &rng);
    w->x = hl_tensor_new("x", 3, (int[]){B, T, E}, true);
    w->grad_out = random_matrix((size_t)B * T * E, &rng);
    if (!w->x || !w->grad_out) {
        bench_mha_free(w);
        return NULL;
    }
    hl_init_normal(w->x, &rng, 0, 1);
    return w;
}

void bench_mha_free(bench_mha_work *w)
{
    if (!w)
        return;
    hl_params_free(w->params);
    hl_tensor_free(w->x);
    free(w->grad_out);
    hl_graph_free(w->g);
    free(w);
}

void bench_mha_select(bench_mha_work *w, bool causal, bool backward, bool weights)
{
    w->causal = causal;
    w->backward = backward;
    w->weights = weights;
}

/* One call: forward (recording the tape, as in training; with a trace, so
 * the composed path keeps the weights, when selected) and, when selected,
 * backward into x and every weight; then the step arena is reset. */
static int mha_once(void *ctx, char *why, size_t why_size)
{
    bench_mha_work *w = ctx;
    hl_mha_masks masks = {.causal = w->causal};
    if (w->backward) {
        hl_params_zero_grad(w->params);
        hl_tensor_zero_grad(w->x);
    }
    hl_mha_trace trace;
    hl_tensor *y = hl_mha_forward(w->g, &w->mha, w->x, w->x, w->x, &masks,
                                  &(hl_mha_run){.trace = w->weights ? &trace : NULL});
    if (w->backward)
        hl_graph_backward_from(w->g, y, w->grad_out);
    if (hl_graph_failed(w->g)) {
        snprintf(why, why_size, "%s", hl_graph_message(w->g));
        return -1;
    }
    hl_graph_reset(w->g);
    return 0;
}

int bench_mha_block(void *ctx, const bench_plan *p, double *seconds, char *why,
                    size_t why_size)
{
    return bench_run_block(mha_once, ctx, 1, p, seconds, why, why_size);
}

int bench_mha_rss_child(int B, int T, int E, int H, bool causal)
{
    bench_mha_work *w = bench_mha_new(B, T, E, H);
    if (!w) {
        fprintf(stderr, "bench: cannot build MHA (%d,%d,%d,%d)\n", B, T, E, H);
        return 1;
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("base %ld\n", usage.ru_maxrss);
    fflush(stdout);
    bench_mha_select(w, causal, true, false);
    double seconds[3];
    char why[HL_ERROR_MESSAGE_MAX];
    const bench_plan three_calls = {.reps = 3};
    int rc = bench_mha_block(w, &three_calls, seconds, why, sizeof why);
    if (rc)
        fprintf(stderr, "bench: %s\n", why);
    bench_mha_free(w);
    return rc ? 1 : 0;
}

/* ---- the toy training step ---- */

#define TOY_BATCH 32
#define TOY_BATCHES 8 /* drawn once, cycled: the data generator is not timed */

struct bench_toy {
    hl_gpt *model;
    hl_optim *opt;
    hl_toy_batch *batches[TOY_BATCHES];
    hl_graph *g;
    int next;
};

bench_toy *bench_toy_new(void)
{
    bench_toy *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    hl_error err = {0};
    hl_gpt_config cfg = hl_toy_gpt_config();
    w->model = hl_gpt_new(&cfg, &err);
    w->opt = w->model ? hl_optim_new(w->model->params,
                                     &(hl_optim_config){.kind = HL_OPTIM_ADAMW, .lr = 3e-3,
                                                        .beta1 = 0.9, .beta2 = 0.98,
                                                        .eps = 1e-8, .weight_decay = 0.01},
                                     &err)
                      : NULL;
    w->g = hl_graph_new(0);
    hl_rng rng;
    hl_rng_seed(&rng, 0);
    bool ok = w->opt && w->g;
    for (int i = 0; ok && i < TOY_BATCHES; i++) {
        w->batches[i] = hl_toy_batch_new(TOY_BATCH);
        ok = w->batches[i] != NULL;
        if (ok)
            hl_toy_sample(w->batches[i], &rng);
    }
    if (!ok) {
        bench_toy_free(w);
        return NULL;
    }
    hl_gpt_init_weights(w->model, &rng);
    return w;
}

void bench_toy_free(bench_toy *w)
{
    if (!w)
        return;
    for (int i = 0; i < TOY_BATCHES; i++)
        hl_toy_batch_free(w->batches[i]);
    hl_graph_free(w->g);
    hl_optim_free(w->opt);
    hl_gpt_free(w->model);
    free(w);
}

/* As examples/toy_heads.c: loss = CE(scored targets) + CE(other targets). */
static int toy_step(void *ctx, char *why, size_t why_size)
{
    bench_toy *w = ctx;
    const hl_toy_batch *b = w->batches[w->next++ % TOY_BATCHES];
    hl_params_zero_grad(w->model->params);
    hl_tensor *logits = hl_gpt_forward(w->g, w->model, b->tokens, b->B, HL_TOY_T, NULL);
    hl_tensor *loss = hl_add(w->g, hl_cross_entropy(w->g, logits, b->scored, HL_TOY_IGNORE),
                             hl_cross_entropy(w->g, logits, b->other, HL_TOY_IGNORE));
    if (hl_graph_backward(w->g, loss) != HL_OK) {
        snprintf(why, why_size, "%s", hl_graph_message(w->g));
        return -1;
    }
    hl_optim_step(w->opt, 1.0);
    hl_graph_reset(w->g);
    return 0;
}

int bench_toy_block(void *ctx, const bench_plan *p, double *seconds, char *why,
                    size_t why_size)
{
    return bench_run_block(toy_step, ctx, 1, p, seconds, why, why_size);
}
