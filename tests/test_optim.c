/* Tests for train/optim.c and train/muon.c: AdamW, SGD and gradient clipping
 * against torch.optim on a committed fixture (tests/make_train_fixtures.py),
 * Muon with an AdamW group against a PyTorch transcription of the published
 * algorithm (tests/make_muon_fixtures.py), and the schedules. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "train/optim.h"
#include "train/muon.h"
#include "io/safetensors.h"
#include "ops/kernels.h"
#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define OPTIM_TOL 1e-12
#else
#define OPTIM_TOL 2e-6
#endif

typedef struct {
    hl_safetensors *f;
    hl_params *params;
    hl_tensor *w, *b;
} optim_case;

static void copy(const hl_safetensors *f, const char *name, hl_real *dst, const hl_tensor *like)
{
    hl_tensor view = *like;
    view.data = dst;
    hl_error err = {0};
    ck_assert_msg(hl_safetensors_copy_to(f, name, &view, &err) == HL_OK, "%s", err.message);
}

static void case_open(optim_case *c)
{
    hl_error err = {0};
    ck_assert_msg(hl_safetensors_read("tests/fixtures/optim.safetensors", &c->f, &err) == HL_OK,
                  "%s", err.message);
    c->params = hl_params_new();
    c->w = hl_params_add(c->params, "w", 2, (int[]){3, 5});
    c->b = hl_params_add(c->params, "b", 1, (int[]){4});
    ck_assert_int_eq(hl_params_commit(c->params), HL_OK);
    copy(c->f, "w0", c->w->data, c->w);
    copy(c->f, "b0", c->b->data, c->b);
}

static void case_close(optim_case *c)
{
    hl_params_free(c->params);
    hl_safetensors_free(c->f);
}

static void expect_values(const optim_case *c, const char *w_name, const char *b_name,
                          const hl_real *w, const hl_real *b)
{
    hl_tensor *want_w = hl_tensor_new("w", 2, (int[]){3, 5}, false);
    hl_tensor *want_b = hl_tensor_new("b", 1, (int[]){4}, false);
    copy(c->f, w_name, want_w->data, want_w);
    copy(c->f, b_name, want_b->data, want_b);
    tu_assert_close(w_name, w, want_w->data, 15, OPTIM_TOL);
    tu_assert_close(b_name, b, want_b->data, 4, OPTIM_TOL);
    hl_tensor_free(want_w);
    hl_tensor_free(want_b);
}

static void run_optimizer(const hl_optim_config *cfg, const char *prefix, bool warmup)
{
    optim_case c;
    case_open(&c);
    hl_error err = {0};
    hl_optim *opt = hl_optim_new(c.params, cfg, &err);
    ck_assert_msg(opt != NULL, "%s", err.message);
    const hl_lr_schedule sched = {.warmup_steps = 3};
    for (int k = 0; k < 5; k++) {
        char w_name[32], b_name[32];
        snprintf(w_name, sizeof w_name, "grad.%d.w", k);
        snprintf(b_name, sizeof b_name, "grad.%d.b", k);
        copy(c.f, w_name, c.w->grad, c.w);
        copy(c.f, b_name, c.b->grad, c.b);
        hl_optim_step(opt, warmup ? hl_lr_scale(&sched, k) : 1.0);
        snprintf(w_name, sizeof w_name, "%s.%d.w", prefix, k);
        snprintf(b_name, sizeof b_name, "%s.%d.b", prefix, k);
        expect_values(&c, w_name, b_name, c.w->data, c.b->data);
    }
    hl_optim_free(opt);
    case_close(&c);
}

START_TEST(test_adamw_matches_torch)
{
    run_optimizer(&(hl_optim_config){.kind = HL_OPTIM_ADAMW, .lr = 3e-3, .beta1 = 0.9,
                                     .beta2 = 0.98, .eps = 1e-8, .weight_decay = 0.01},
                  "adamw", true);
}
END_TEST

START_TEST(test_sgd_matches_torch)
{
    run_optimizer(&(hl_optim_config){.kind = HL_OPTIM_SGD, .lr = 0.1, .momentum = 0.9,
                                     .weight_decay = 0.01},
                  "sgd", false);
}
END_TEST

START_TEST(test_clip_matches_torch)
{
    optim_case c;
    case_open(&c);
    copy(c.f, "grad.0.w", c.w->grad, c.w);
    copy(c.f, "grad.0.b", c.b->grad, c.b);
    double norm = hl_clip_grad_norm(c.params, 0.5);
    hl_tensor *want = hl_tensor_new("norm", 1, (int[]){1}, false);
    copy(c.f, "clip.norm", want->data, want);
    ck_assert(fabs(norm - want->data[0]) < 1e-5);
    expect_values(&c, "clip.w", "clip.b", c.w->grad, c.b->grad);
    hl_tensor_free(want);
    case_close(&c);
}
END_TEST

/* Clips a 100,003-value block (run in parallel) with 1 and 2 threads: the
 * same norm and gradients bit for bit, the norm as a double reference gives. */
START_TEST(test_clip_threads)
{
    hl_params *p = hl_params_new();
    hl_params_add(p, "w", 1, (int[]){100003});
    hl_params_commit(p);
    hl_real *grad = hl_params_grads(p);
    const size_t n = hl_params_count(p);
    double reference = 0;
    for (size_t i = 0; i < n; i++) {
        grad[i] = (hl_real)sin(0.001 * (double)i);
        reference += (double)grad[i] * grad[i];
    }
    hl_real *first = malloc(n * sizeof *first);
    ck_assert_ptr_nonnull(first);
    double norms[2];
#ifdef _OPENMP
    const int saved_threads = omp_get_max_threads();
#endif
    for (int threads = 1; threads <= 2; threads++) {
        for (size_t i = 0; i < n; i++)
            grad[i] = (hl_real)sin(0.001 * (double)i);
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        norms[threads - 1] = hl_clip_grad_norm(p, 1.0);
        if (threads == 1)
            memcpy(first, grad, n * sizeof *grad);
    }
#ifdef _OPENMP
    omp_set_num_threads(saved_threads);
#endif
    ck_assert(norms[0] == norms[1]);
    ck_assert(memcmp(first, grad, n * sizeof *grad) == 0);
    ck_assert_double_eq_tol(norms[0], sqrt(reference), 1e-9 * sqrt(reference));
    /* clipped to norm 1 */
    double clipped = 0;
    for (size_t i = 0; i < n; i++)
        clipped += (double)grad[i] * grad[i];
    ck_assert_double_eq_tol(sqrt(clipped), 1.0, 1e-5);
    free(first);
    hl_params_free(p);
}
END_TEST

/* The norm in its stated order, bit for bit: 256 chunks of n/256 + 1 values
 * (the last ones short or empty), each summed in element order, the chunks'
 * sums added in order; counts below, at and past the chunk count, and ones
 * that run in parallel. */
START_TEST(test_grad_norm_order)
{
    const int counts[] = {1, 7, 255, 256, 257, 2049, 40001, 100003};
    for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
        hl_params *p = hl_params_new();
        hl_params_add(p, "w", 1, &counts[t]);
        hl_params_commit(p);
        hl_real *grad = hl_params_grads(p);
        const size_t n = hl_params_count(p), chunk = n / 256 + 1;
        for (size_t i = 0; i < n; i++)
            grad[i] = (hl_real)(sin(0.37 * (double)i) * (1 + (double)(i % 13)));
        double total = 0;
        for (size_t c = 0; c < 256; c++) {
            double s = 0;
            for (size_t i = c * chunk; i < (c + 1) * chunk && i < n; i++)
                s += (double)grad[i] * grad[i];
            total += s;
        }
        ck_assert_msg(hl_grad_norm(p) == sqrt(total), "n = %zu: %.17g, want %.17g", n,
                      hl_grad_norm(p), sqrt(total));
        hl_params_free(p);
    }
}
END_TEST

/* The vectorised AdamW kernel of every kernel set against the formula written
 * out here one element at a time, bit for bit, over a count that leaves a
 * partial vector and spans several parallel chunks, clipped or not. */
START_TEST(test_adamw_kernel_equals_the_formula)
{
    const hl_optim_config cfg = {.kind = HL_OPTIM_ADAMW, .lr = 3e-3, .beta1 = 0.9,
                                 .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
    const hl_isa before = hl_isa_active();
    enum { N = 40001 };
    hl_real *w = malloc(N * sizeof *w), *m = calloc(N, sizeof *m), *v = calloc(N, sizeof *v);
    for (int i = 0; i < HL_ISA_COUNT; i++) {
        if (!hl_isa_supported((hl_isa)i))
            continue;
        ck_assert_int_eq(hl_isa_use((hl_isa)i, NULL), HL_OK);
        hl_params *p = hl_params_new();
        hl_params_add(p, "w", 1, (int[]){N});
        hl_params_commit(p);
        hl_optim *opt = hl_optim_new(p, &cfg, NULL);
        ck_assert_ptr_nonnull(opt);
        hl_real *pw = hl_params_values(p), *pg = hl_params_grads(p);
        for (int j = 0; j < N; j++) {
            w[j] = pw[j] = (hl_real)cos(0.003 * j);
            m[j] = v[j] = 0;
        }
        for (int step = 1; step <= 3; step++) {
            const hl_real scale = step == 2 ? (hl_real)0.25 : 1;
            for (int j = 0; j < N; j++)
                pg[j] = (hl_real)(sin(0.001 * j + step) * (j % 7 == 0 ? 1e-3 : 1));
            hl_optim_step_scaled(opt, 0.5, scale);
            const double lr = 0.5 * cfg.lr;
            const hl_real decay = (hl_real)(1 - lr * cfg.weight_decay);
            const hl_real b1 = (hl_real)cfg.beta1, b2 = (hl_real)cfg.beta2;
            const hl_real step_size = (hl_real)(lr / (1 - pow(cfg.beta1, step)));
            const hl_real sqrt_bc2 = (hl_real)sqrt(1 - pow(cfg.beta2, step));
            const hl_real eps = (hl_real)cfg.eps;
            for (int j = 0; j < N; j++) {
                const hl_real g = pg[j] * scale;
                w[j] *= decay;
                m[j] = b1 * m[j] + (1 - b1) * g;
                v[j] = b2 * v[j] + (1 - b2) * g * g;
                w[j] -= step_size * m[j] / (HL_SQRT(v[j]) / sqrt_bc2 + eps);
            }
            ck_assert_msg(memcmp(w, pw, N * sizeof *w) == 0 &&
                              memcmp(m, opt->m, N * sizeof *m) == 0 &&
                              memcmp(v, opt->v, N * sizeof *v) == 0,
                          "%s, step %d: the kernel differs from the formula",
                          hl_isa_name((hl_isa)i), step);
        }
        hl_optim_free(opt);
        hl_params_free(p);
    }
    ck_assert_int_eq(hl_isa_use(before, NULL), HL_OK);
    free(w);
    free(m);
    free(v);
}
END_TEST

/* Clipping inside the update (hl_optim_step_scaled with hl_clip_scale) gives
 * the weights and moments of hl_clip_grad_norm then hl_optim_step, bit for
 * bit, for AdamW and SGD, clipped or not, and leaves the gradients alone. */
START_TEST(test_clip_fused_into_step)
{
    const hl_optim_config configs[] = {
        {.kind = HL_OPTIM_ADAMW, .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8,
         .weight_decay = 0.01},
        {.kind = HL_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}};
    for (int k = 0; k < 2; k++)
        for (int clipped = 0; clipped < 2; clipped++) {
            hl_params *p[2];
            hl_optim *opt[2];
            for (int i = 0; i < 2; i++) {
                p[i] = hl_params_new();
                hl_params_add(p[i], "w", 1, (int[]){40001});
                hl_params_commit(p[i]);
                hl_real *w = hl_params_values(p[i]);
                for (size_t j = 0; j < hl_params_count(p[i]); j++)
                    w[j] = (hl_real)cos(0.003 * (double)j);
                opt[i] = hl_optim_new(p[i], &configs[k], NULL);
                ck_assert_ptr_nonnull(opt[i]);
            }
            const size_t n = hl_params_count(p[0]);
            const double max_norm = clipped ? 1.0 : 1e9;
            for (int step = 0; step < 3; step++) {
                for (int i = 0; i < 2; i++) {
                    hl_real *g = hl_params_grads(p[i]);
                    for (size_t j = 0; j < n; j++)
                        g[j] = (hl_real)sin(0.001 * (double)j + step);
                }
                const double norm = hl_clip_grad_norm(p[0], max_norm);
                hl_optim_step(opt[0], 0.5);
                ck_assert(hl_grad_norm(p[1]) == norm);
                ck_assert((hl_clip_scale(norm, max_norm) < 1) == clipped); /* ~110 vs 1 */
                hl_optim_step_scaled(opt[1], 0.5, hl_clip_scale(norm, max_norm));
                ck_assert(hl_params_grads(p[1])[1] == (hl_real)sin(0.001 + step));
            }
            ck_assert(memcmp(hl_params_values(p[0]), hl_params_values(p[1]),
                             n * sizeof(hl_real)) == 0);
            ck_assert(memcmp(opt[0]->m, opt[1]->m, n * sizeof(hl_real)) == 0);
            for (int i = 0; i < 2; i++) {
                hl_optim_free(opt[i]);
                hl_params_free(p[i]);
            }
        }
}
END_TEST

START_TEST(test_schedule)
{
    hl_lr_schedule s = {.warmup_steps = 100, .total_steps = 1100, .cosine = true, .min_scale = 0.1};
    ck_assert(fabs(hl_lr_scale(&s, 0) - 0.01) < 1e-12);
    ck_assert(fabs(hl_lr_scale(&s, 99) - 1) < 1e-12);
    ck_assert(fabs(hl_lr_scale(&s, 100) - 1) < 1e-12);
    ck_assert(fabs(hl_lr_scale(&s, 600) - 0.55) < 1e-12);
    ck_assert(fabs(hl_lr_scale(&s, 5000) - 0.1) < 1e-12);
    s.cosine = false;
    ck_assert(fabs(hl_lr_scale(&s, 600) - 1) < 1e-12);
    /* Every step of both schedules, and without warm-up, against the lambdas
     * one would give PyTorch's LambdaLR:
     *   warm-up then constant: min(1, (k + 1) / W)
     *   then cosine: m + (1 - m) (1 + cos(pi min(1, (k - W) / (N - W)))) / 2 */
    for (int warmup = 0; warmup <= 100; warmup += 100)
        for (int cosine = 0; cosine < 2; cosine++) {
            s = (hl_lr_schedule){.warmup_steps = warmup, .total_steps = 1100, .cosine = cosine,
                                 .min_scale = 0.1};
            for (int k = 0; k < 1300; k++) {
                double want;
                if (k < warmup)
                    want = (k + 1.0) / warmup;
                else if (!cosine)
                    want = 1;
                else
                    want = 0.1 + 0.9 * 0.5 *
                                     (1 + cos(acos(-1.0) * fmin(1, (k - warmup) / (1100.0 - warmup))));
                ck_assert_msg(fabs(hl_lr_scale(&s, k) - want) < 1e-12,
                              "warm-up %d, cosine %d, step %d: %g, wanted %g", warmup, cosine, k,
                              hl_lr_scale(&s, k), want);
            }
        }
}
END_TEST

START_TEST(test_optim_errors)
{
    hl_error err = {0};
    hl_params *p = hl_params_new();
    hl_params_add(p, "w", 1, (int[]){3});
    ck_assert_ptr_null(hl_optim_new(p, &(hl_optim_config){.kind = HL_OPTIM_ADAMW}, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "committed"));
    hl_params_commit(p);
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_optim_new(p, &(hl_optim_config){.kind = HL_OPTIM_ADAMW, .lr = 1e-3,
                                                          .beta1 = 1.0, .beta2 = 0.9, .eps = 1e-8},
                                    &err));
    ck_assert_ptr_nonnull(strstr(err.message, "betas"));
    /* Infinities: the weights were -inf after one step. */
    const double infinite[][3] = {{INFINITY, 0, 1e-8}, {1e-3, INFINITY, 1e-8},
                                  {1e-3, 0, INFINITY}};
    for (int i = 0; i < 3; i++) {
        hl_error_clear(&err);
        ck_assert_ptr_null(hl_optim_new(p, &(hl_optim_config){.kind = HL_OPTIM_ADAMW,
                                                              .lr = infinite[i][0],
                                                              .weight_decay = infinite[i][1],
                                                              .eps = infinite[i][2],
                                                              .beta1 = 0.9, .beta2 = 0.99},
                                        &err));
        ck_assert_msg(strstr(err.message, "bad hyper-parameters"), "%s", err.message);
    }
    hl_params_free(p);
}
END_TEST

/* ---- Muon */

/* The fixture's Newton–Schulz output has singular values in 0.68 … 1.13 and
 * entries below 1. Five steps of a quintic with slope up to a = 3.4 at 0
 * amplify a rounding difference at most ~3.4^5 ≈ 450 times, on top of the
 * products' own rounding (19 terms): in double that stays below 1e-12; in
 * float (ε 6e-8) below 450 · 19 · 6e-8 ≈ 5e-4; observed below 1e-5 on every
 * kernel set, portable (no FMA) included. */
#ifdef HL_REAL_DOUBLE
#define NS_TOL 1e-11
#else
#define NS_TOL 1e-4
#endif
/* Weights move by lr · (update ~1) per step; the update's error is NS_TOL's
 * and Muon's lr is 0.02, so after 5 steps the weights are within
 * 5 · 0.02 · NS_TOL plus AdamW's own float error (OPTIM_TOL). */
#ifdef HL_REAL_DOUBLE
#define MUON_TOL 1e-12
#else
#define MUON_TOL 2e-5
#endif

/* A set without FMA rounds every product-sum twice: weights of 0.05 and
 * updates of 0.02 · ~0.1 after two steps differ by well under 1e-5. */
#define MUON_NO_FMA_TOL 1e-5

static hl_tensor *fixture_tensor(const hl_safetensors *f, const char *name, int rank,
                                 const int *shape)
{
    hl_tensor *t = hl_tensor_new(name, rank, shape, false);
    copy(f, name, t->data, t);
    return t;
}

START_TEST(test_newton_schulz_matches_torch)
{
    hl_safetensors *f;
    hl_error err = {0};
    ck_assert_msg(hl_safetensors_read("tests/fixtures/muon.safetensors", &f, &err) == HL_OK,
                  "%s", err.message);
    const char *names[2][2] = {{"ns.in", "ns.out"}, {"ns.tall.in", "ns.tall.out"}};
    const int shapes[2][2] = {{7, 19}, {19, 7}};
    for (int k = 0; k < 2; k++) {
        hl_tensor *x = fixture_tensor(f, names[k][0], 2, shapes[k]);
        hl_tensor *want = fixture_tensor(f, names[k][1], 2, shapes[k]);
        hl_real *work = malloc(hl_muon_work_size(shapes[k][0], shapes[k][1]) * sizeof *work);
        hl_muon_orthogonalize(x->data, shapes[k][0], shapes[k][1], 5, work);
        tu_assert_close(names[k][1], x->data, want->data, x->numel, NS_TOL);
        free(work);
        hl_tensor_free(x);
        hl_tensor_free(want);
    }
    hl_safetensors_free(f);
}
END_TEST

/* X ← G/‖G‖, then X ← aX + (bA + cA²)X, A = XXᵀ, in double with plain loops:
 * the reference for products too large for the fixture (g (r,c), r ≤ c). */
static void newton_schulz_naive(const hl_real *g, int r, int c, int steps, double *x)
{
    double *a = malloc((size_t)r * r * sizeof *a), *b = malloc((size_t)r * r * sizeof *b),
           *y = malloc((size_t)r * c * sizeof *y), norm = 0;
    ck_assert(a && b && y);
    for (size_t i = 0; i < (size_t)r * c; i++)
        norm += (double)g[i] * g[i];
    for (size_t i = 0; i < (size_t)r * c; i++)
        x[i] = g[i] / (sqrt(norm) + 1e-7);
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < r; i++)
            for (int j = 0; j < r; j++) {
                double t = 0;
                for (int k = 0; k < c; k++)
                    t += x[(size_t)i * c + k] * x[(size_t)j * c + k];
                a[(size_t)i * r + j] = t;
            }
        for (int i = 0; i < r; i++)
            for (int j = 0; j < r; j++) {
                double t = 0;
                for (int k = 0; k < r; k++)
                    t += a[(size_t)i * r + k] * a[(size_t)k * r + j];
                b[(size_t)i * r + j] = HL_MUON_B * a[(size_t)i * r + j] + HL_MUON_C * t;
            }
        for (int i = 0; i < r; i++)
            for (int j = 0; j < c; j++) {
                double t = 0;
                for (int k = 0; k < r; k++)
                    t += b[(size_t)i * r + k] * x[(size_t)k * c + j];
                y[(size_t)i * c + j] = HL_MUON_A * x[(size_t)i * c + j] + t;
            }
        memcpy(x, y, (size_t)r * c * sizeof *x);
    }
    free(a);
    free(b);
    free(y);
}

/* The largest |x - want| over n values. */
static double max_difference(const hl_real *x, const double *want, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(x[i] - want[i]));
    return worst;
}

/* The iteration's symmetric products computed as upper triangles
 * (hl_gemm_upper, split by area between threads) and, from twice as many
 * columns as rows, the iteration on the Gram matrix: at 258 rows, each
 * checked against plain loops in double on every kernel set at 1 and 2
 * threads, the FMA sets bitwise equal to each other, and tall. */
static void check_newton_schulz(int R, int C)
{
    const size_t n = (size_t)R * C;
    hl_rng rng;
    hl_rng_seed(&rng, 11);
    hl_real *g = malloc(n * sizeof *g), *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref),
            *work = malloc(hl_muon_work_size(R, C) * sizeof *work);
    double *want = malloc(n * sizeof *want);
    ck_assert(g && x && ref && work && want);
    for (size_t i = 0; i < n; i++)
        g[i] = (hl_real)(hl_rng_uniform(&rng) - 0.5);
    newton_schulz_naive(g, R, C, 5, want);
    const hl_isa before = hl_isa_active();
#ifdef _OPENMP
    const int saved_threads = omp_get_max_threads();
#endif
    bool have_ref = false;
    for (int i = 0; i < HL_ISA_COUNT; i++) {
        if (!hl_isa_supported((hl_isa)i))
            continue;
        ck_assert_int_eq(hl_isa_use((hl_isa)i, NULL), HL_OK);
        for (int threads = 1; threads <= 2; threads++) {
#ifdef _OPENMP
            omp_set_num_threads(threads);
#endif
            memcpy(x, g, n * sizeof *x);
            hl_muon_orthogonalize(x, R, C, 5, work);
            const double worst = max_difference(x, want, n);
            ck_assert_msg(worst <= NS_TOL, "%s, %d threads: max |difference| %g",
                          hl_isa_name((hl_isa)i), threads, worst);
            if (!hl_kernels()->fma)
                continue;
            if (!have_ref)
                memcpy(ref, x, n * sizeof *x);
            have_ref = true;
            ck_assert_msg(memcmp(ref, x, n * sizeof *x) == 0, "%s with %d threads differs",
                          hl_isa_name((hl_isa)i), threads);
        }
    }
#ifdef _OPENMP
    omp_set_num_threads(saved_threads);
#endif
    ck_assert_int_eq(hl_isa_use(before, NULL), HL_OK);
    /* The tall matrix (C,R) = gᵀ is iterated as g: its result is the transpose
     * (up to the norm's rounding, summed in another order). */
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            x[(size_t)j * R + i] = g[(size_t)i * C + j];
    hl_muon_orthogonalize(x, C, R, 5, work);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            ref[(size_t)i * C + j] = x[(size_t)j * R + i];
    const double worst = max_difference(ref, want, n);
    ck_assert_msg(worst <= NS_TOL, "tall: max |difference| %g", worst);
    free(g);
    free(x);
    free(ref);
    free(work);
    free(want);
}

START_TEST(test_newton_schulz_direct) { check_newton_schulz(258, 270); }
END_TEST

START_TEST(test_newton_schulz_gram) { check_newton_schulz(258, 530); }
END_TEST

/* The fixture's tensors, in an order that puts AdamW tensors between Muon ones. */
static const struct {
    const char *name;
    int rank, shape[2];
} muon_tensors[] = {{"emb", 2, {4, 3}},  {"sq", 2, {6, 6}},   {"tall", 2, {10, 4}},
                    {"bias", 1, {5, 0}}, {"wide", 2, {3, 7}}, {"qkv", 2, {12, 3}}};
#define MUON_TENSORS (int)(sizeof muon_tensors / sizeof muon_tensors[0])

/* emb and bias to AdamW (group 0), the rest to Muon, qkv in blocks of 6, 3, 3. */
static int fixture_group(void *ctx, const hl_tensor *t, int *n_blocks, int *rows)
{
    (void)ctx;
    if (!strcmp(t->name, "emb") || !strcmp(t->name, "bias"))
        return 0;
    if (!strcmp(t->name, "qkv")) {
        *n_blocks = 3;
        rows[0] = 6;
        rows[1] = rows[2] = 3;
    }
    return 1;
}

static const hl_optim_groups fixture_groups = {
    .n = 2, .group_of = fixture_group,
    .cfg = {{.kind = HL_OPTIM_ADAMW, .lr = 3e-3, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8,
             .weight_decay = 0.01},
            {.kind = HL_OPTIM_MUON, .lr = 0.02, .momentum = 0.95, .weight_decay = 0.1}}};

START_TEST(test_muon_matches_torch)
{
    hl_safetensors *f;
    hl_error err = {0};
    ck_assert_msg(hl_safetensors_read("tests/fixtures/muon.safetensors", &f, &err) == HL_OK,
                  "%s", err.message);
    hl_params *p = hl_params_new();
    hl_tensor *t[MUON_TENSORS];
    for (int i = 0; i < MUON_TENSORS; i++)
        t[i] = hl_params_add(p, muon_tensors[i].name, muon_tensors[i].rank,
                             muon_tensors[i].shape);
    ck_assert_int_eq(hl_params_commit(p), HL_OK);
    char name[HL_NAME_MAX + 32];
    for (int i = 0; i < MUON_TENSORS; i++) {
        snprintf(name, sizeof name, "w0.%s", t[i]->name);
        copy(f, name, t[i]->data, t[i]);
    }
    hl_optim *opt = hl_optim_new_groups(p, &fixture_groups, &err);
    ck_assert_msg(opt, "%s", err.message);
    ck_assert_int_eq(hl_optim_tensor_kind(opt, 0), HL_OPTIM_ADAMW);
    ck_assert_int_eq(hl_optim_tensor_kind(opt, 5), HL_OPTIM_MUON);
    const hl_lr_schedule sched = {.warmup_steps = 3};
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < MUON_TENSORS; i++) {
            snprintf(name, sizeof name, "grad.%d.%s", k, t[i]->name);
            copy(f, name, t[i]->grad, t[i]);
        }
        hl_optim_step_scaled(opt, hl_lr_scale(&sched, k), k == 3 ? 0.5 : 1);
        for (int i = 0; i < MUON_TENSORS; i++) {
            snprintf(name, sizeof name, "after.%d.%s", k, t[i]->name);
            hl_tensor *want = fixture_tensor(f, name, t[i]->rank, t[i]->shape);
            tu_assert_close(name, t[i]->data, want->data, t[i]->numel,
                            i == 0 || i == 3 ? OPTIM_TOL : MUON_TOL);
            hl_tensor_free(want);
        }
    }
    hl_optim_free(opt);
    hl_params_free(p);
    hl_safetensors_free(f);
}
END_TEST

/* Shapes of a small block, where the larger GEMMs and the elementwise passes
 * run in parallel: in_proj (288,96) as three blocks, a tall fc (384,96), a
 * wide proj (96,384) and an AdamW bias. */
static int block_group(void *ctx, const hl_tensor *t, int *n_blocks, int *rows)
{
    (void)ctx;
    if (!strcmp(t->name, "in_proj")) {
        *n_blocks = 3;
        rows[0] = rows[1] = rows[2] = 96;
    }
    return strcmp(t->name, "bias") != 0;
}

/* Two Muon steps at the current thread count, the optimizer made at
 * made_threads (0: the same); the weights and momentum after them (caller
 * frees). */
static hl_real *muon_block_steps(size_t *n, int made_threads)
{
    hl_params *p = hl_params_new();
    hl_params_add(p, "in_proj", 2, (int[]){288, 96});
    hl_params_add(p, "bias", 1, (int[]){288});
    hl_params_add(p, "fc", 2, (int[]){384, 96});
    hl_params_add(p, "proj", 2, (int[]){96, 384});
    ck_assert_int_eq(hl_params_commit(p), HL_OK);
    *n = hl_params_count(p);
    hl_real *w = hl_params_values(p), *g = hl_params_grads(p);
    hl_optim_groups groups = fixture_groups;
    groups.group_of = block_group;
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
    if (made_threads)
        omp_set_num_threads(made_threads);
#endif
    (void)made_threads;
    hl_optim *opt = hl_optim_new_groups(p, &groups, NULL);
    ck_assert_ptr_nonnull(opt);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    for (size_t i = 0; i < *n; i++)
        w[i] = (hl_real)(0.05 * sin(0.7 * (double)i));
    for (int step = 0; step < 2; step++) {
        for (size_t i = 0; i < *n; i++)
            g[i] = (hl_real)(cos(0.013 * (double)i * (step + 1)) + 0.1 * sin((double)i));
        hl_optim_step_scaled(opt, 1, step == 1 ? 0.5 : 1);
    }
    hl_real *out = malloc(2 * *n * sizeof *out);
    memcpy(out, w, *n * sizeof *out);
    memcpy(out + *n, opt->m, *n * sizeof *out);
    hl_optim_free(opt);
    hl_params_free(p);
    return out;
}

/* The same bits for 1, 2 and 3 threads (from 2 on, the team shares out the
 * five matrices, unevenly at 3; the optimizer made at that count or at 1, its
 * team's work then grown at the first step), and on every kernel set with FMA
 * (the portable set of an x86-64 build has none: within float rounding
 * there). */
START_TEST(test_muon_threads_and_kernel_sets)
{
    const hl_isa before = hl_isa_active();
#ifdef _OPENMP
    const int saved_threads = omp_get_max_threads();
#endif
    size_t n = 0;
    ck_assert_int_eq(hl_isa_use(hl_isa_best(), NULL), HL_OK);
    ck_assert(hl_kernels()->fma);
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    hl_real *ref = muon_block_steps(&n, 0);
    for (int i = 0; i < HL_ISA_COUNT; i++) {
        if (!hl_isa_supported((hl_isa)i))
            continue;
        ck_assert_int_eq(hl_isa_use((hl_isa)i, NULL), HL_OK);
        for (int threads = 1; threads <= 3; threads++) {
#ifdef _OPENMP
            omp_set_num_threads(threads);
#endif
            for (int made = 0; made <= 1; made++) {
                hl_real *got = muon_block_steps(&n, made);
                if (hl_kernels()->fma)
                    ck_assert_msg(memcmp(ref, got, 2 * n * sizeof *ref) == 0,
                                  "%s with %d threads (made at %d) differs from %s with 1",
                                  hl_isa_name((hl_isa)i), threads, made ? 1 : threads,
                                  hl_isa_name(hl_isa_best()));
                else
                    tu_assert_close(hl_isa_name((hl_isa)i), ref, got, 2 * n, MUON_NO_FMA_TOL);
                free(got);
            }
        }
    }
#ifdef _OPENMP
    omp_set_num_threads(saved_threads);
#endif
    ck_assert_int_eq(hl_isa_use(before, NULL), HL_OK);
    free(ref);
}
END_TEST

static int group_of_bad(void *ctx, const hl_tensor *t, int *n_blocks, int *rows)
{
    const int mode = *(const int *)ctx;
    if (mode == 0)
        return 2; /* no such group */
    if (mode == 1 && t->rank == 2) {
        *n_blocks = 2;
        rows[0] = 2;
        rows[1] = 2; /* of 3 rows */
    }
    return 1; /* mode 2: the bias (rank 1) to Muon */
}

START_TEST(test_muon_errors)
{
    hl_params *p = hl_params_new();
    hl_params_add(p, "w", 2, (int[]){3, 4});
    hl_params_add(p, "b", 1, (int[]){3});
    hl_params_commit(p);
    const char *want[] = {"w is in group 2 of 2", "w: row blocks", "b (rank 1) in Muon group 1"};
    for (int mode = 0; mode < 3; mode++) {
        hl_error err = {0};
        hl_optim_groups groups = fixture_groups;
        groups.group_of = group_of_bad;
        groups.ctx = &mode;
        ck_assert_ptr_null(hl_optim_new_groups(p, &groups, &err));
        ck_assert_msg(strstr(err.message, want[mode]), "%s", err.message);
    }
    hl_error err = {0};
    hl_optim_groups groups = fixture_groups;
    groups.cfg[1].momentum = 1;
    ck_assert_ptr_null(hl_optim_new_groups(p, &groups, &err));
    ck_assert_msg(strstr(err.message, "group 1 (muon): bad hyper-parameters"), "%s", err.message);
    hl_params_free(p);
}
END_TEST

/* WSD: warm-up, then 1 until the last decay_frac of the steps, then linear to
 * 0 at total_steps, against the lambda one would give LambdaLR. */
START_TEST(test_schedule_wsd)
{
    const hl_lr_schedule s = {.warmup_steps = 10, .total_steps = 200, .decay_frac = 0.2,
                              .cosine = true};
    ck_assert(fabs(hl_lr_scale(&s, 0) - 0.1) < 1e-12);
    ck_assert(hl_lr_scale(&s, 10) == 1);
    ck_assert(hl_lr_scale(&s, 160) == 1);
    ck_assert(fabs(hl_lr_scale(&s, 180) - 0.5) < 1e-12);
    ck_assert(fabs(hl_lr_scale(&s, 199) - 1 / 40.0) < 1e-12);
    ck_assert(hl_lr_scale(&s, 200) == 0 && hl_lr_scale(&s, 500) == 0);
    for (int k = 10; k < 300; k++)
        ck_assert(fabs(hl_lr_scale(&s, k) - fmax(0, fmin(1, (200.0 - k) / 40))) < 1e-12);
    /* A run so short that the decay starts inside the warm-up: the ramp caps
     * the decay, min((k + 1) / 20, (30 - k) / 15), and the last step's rate
     * is 1/15 of the peak, not the ramp's. */
    const hl_lr_schedule short_run = {.warmup_steps = 20, .total_steps = 30, .decay_frac = 0.5};
    for (int k = 0; k < 30; k++)
        ck_assert_msg(fabs(hl_lr_scale(&short_run, k) -
                           fmin((k + 1) / 20.0, fmin(1, (30.0 - k) / 15))) < 1e-12,
                      "step %d: %g", k, hl_lr_scale(&short_run, k));
    ck_assert(fabs(hl_lr_scale(&short_run, 19) - 11 / 15.0) < 1e-12);
}
END_TEST

Suite *optim_suite(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_adamw_matches_torch);
    tcase_add_test(tc, test_sgd_matches_torch);
    tcase_add_test(tc, test_clip_matches_torch);
    tcase_add_test(tc, test_clip_threads);
    tcase_add_test(tc, test_grad_norm_order);
    tcase_add_test(tc, test_clip_fused_into_step);
    tcase_add_test(tc, test_adamw_kernel_equals_the_formula);
    tcase_add_test(tc, test_schedule);
    tcase_add_test(tc, test_optim_errors);
    tcase_add_test(tc, test_newton_schulz_matches_torch);
    tcase_add_test(tc, test_newton_schulz_direct);
    tcase_add_test(tc, test_newton_schulz_gram);
    tcase_add_test(tc, test_muon_matches_torch);
    tcase_add_test(tc, test_muon_threads_and_kernel_sets);
    tcase_add_test(tc, test_muon_errors);
    tcase_add_test(tc, test_schedule_wsd);
    suite_add_tcase(s, tc);
    return s;
}
