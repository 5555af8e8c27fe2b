/* Tests for ops/cross_entropy.c: mean cross-entropy with ignored rows. */
#include <math.h>
#include <stdlib.h>

#include "ops/internal.h"
#include "tests/testutil.h"

#define IGNORE (-100)

#ifdef HL_REAL_DOUBLE
#define LOSS_TOL 1e-12
#else
#define LOSS_TOL 1e-5
#endif

typedef struct ce_case {
    const int32_t *targets;
} ce_case;

static hl_tensor *build_ce(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const ce_case *c = ctx;
    return hl_cross_entropy(g, in[0], c->targets, IGNORE);
}

/* rows targets in [0, V), every third one IGNORE when with_ignored. */
static int32_t *random_targets(size_t rows, int V, bool with_ignored, uint64_t seed)
{
    int32_t *t = malloc(rows * sizeof *t);
    ck_assert_ptr_nonnull(t);
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    for (size_t r = 0; r < rows; r++)
        t[r] = with_ignored && r % 3 == 1 ? IGNORE : (int32_t)hl_rng_below(&rng, (uint32_t)V);
    return t;
}

/* The textbook formula in double, without max subtraction (inputs are small). */
static double naive_ce(const hl_tensor *x, const int32_t *targets)
{
    int V = x->shape[x->rank - 1];
    size_t rows = x->numel / (size_t)V, counted = 0;
    double total = 0;
    for (size_t r = 0; r < rows; r++) {
        if (targets[r] == IGNORE)
            continue;
        double s = 0;
        for (int j = 0; j < V; j++)
            s += exp((double)x->data[r * V + j]);
        total += log(s) - (double)x->data[r * V + targets[r]];
        counted++;
    }
    return counted ? total / (double)counted : 0;
}

START_TEST(test_ce_hand_values)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = hl_tensor_new("x", 1, (int[]){3}, false);
    x->data[0] = 1, x->data[1] = 2, x->data[2] = 3;
    const int32_t two = 2;
    /* log(e^1 + e^2 + e^3) - 3 */
    const double expect = 0.40760596444438;
    hl_tensor *y = hl_cross_entropy(g, x, &two, IGNORE);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->rank, 1);
    ck_assert_int_eq(y->shape[0], 1);
    ck_assert_double_eq_tol(y->data[0], expect, LOSS_TOL);
    /* Shifted by 1000 the loss is the same: the row maximum is subtracted. */
    x->data[0] = 1001, x->data[1] = 1002, x->data[2] = 1003;
    y = hl_cross_entropy(g, x, &two, IGNORE);
    ck_assert_double_eq_tol(y->data[0], expect, LOSS_TOL);
    /* A -inf logit has probability 0 and leaves the rest finite. */
    x->data[0] = -INFINITY, x->data[1] = 0, x->data[2] = 0;
    y = hl_cross_entropy(g, x, &two, IGNORE);
    ck_assert_double_eq_tol(y->data[0], log(2.0), LOSS_TOL);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_ce_forward_naive)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 3, (int[]){3, 5, 7}, false, 1, -3, 3);
    int32_t *all = random_targets(15, 7, false, 2);
    int32_t *some = random_targets(15, 7, true, 3);
    hl_tensor *y = hl_cross_entropy(g, x, all, IGNORE);
    ck_assert(!hl_graph_failed(g));
    ck_assert_double_eq_tol(y->data[0], naive_ce(x, all), LOSS_TOL);
    y = hl_cross_entropy(g, x, some, IGNORE);
    ck_assert_double_eq_tol(y->data[0], naive_ce(x, some), LOSS_TOL);
    /* Ignored rows do not count: garbage there changes nothing. */
    for (int j = 0; j < 7; j++)
        x->data[1 * 7 + j] = (hl_real)1e30;
    hl_tensor *again = hl_cross_entropy(g, x, some, IGNORE);
    ck_assert(again->data[0] == y->data[0]);
    free(all);
    free(some);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

/* Ignored rows get zero gradient; counted rows (softmax - onehot) / counted. */
START_TEST(test_ce_backward_ignored)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 4}, true, 4, -1, 1);
    const int32_t targets[] = {2, IGNORE, 0};
    hl_tensor *y = hl_cross_entropy(g, x, targets, IGNORE);
    ck_assert_int_eq(hl_graph_backward(g, y), HL_OK);
    for (int r = 0; r < 3; r++) {
        double s = 0;
        for (int j = 0; j < 4; j++)
            s += exp((double)x->data[r * 4 + j]);
        for (int j = 0; j < 4; j++) {
            double p = exp((double)x->data[r * 4 + j]) / s;
            double expect = r == 1 ? 0 : (p - (j == targets[r])) / 2;
            ck_assert_double_eq_tol(x->grad[r * 4 + j], expect, LOSS_TOL);
        }
    }
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

/* One row (target 0) as PyTorch computes it, in double: m = max,
 * log_softmax = (x - m) - log Σ exp(x - m), loss = -log_softmax[0], gradient
 * exp(log_softmax) - onehot. */
static double pytorch_ce_row(const hl_real *x, int V, double *grad)
{
    double m = -INFINITY, s = 0;
    for (int j = 0; j < V; j++)
        m = fmax(m, (double)x[j]);
    for (int j = 0; j < V; j++)
        s += exp((double)x[j] - m);
    for (int j = 0; j < V; j++)
        grad[j] = exp(((double)x[j] - m) - log(s)) - (j == 0);
    return -(((double)x[0] - m) - log(s));
}

/* Logits so large that max + log Σ rounds to max: the log-softmax must stay
 * (x - max) - log Σ. [1e7, 1e7] gave gradient [-0.632, 0.368], [1e30, 1e30]
 * a loss of 0, and at 1e4 the gradient no longer summed to zero. */
START_TEST(test_ce_large_logits)
{
    static const double rows[][4] = {
        {1e7, 1e7, 0, 0},        {1e8, 1e8, 1e8, 0},          {1e30, 1e30, 0, 0},
        {1e4, 1e4 + 1, 1e4 - 2, 1e4 + 0.5}, {-1e30, -1e30, 0, 0}, {3e4, 1e4, -1e4, 2e4},
    };
    static const int widths[] = {2, 3, 2, 4, 2, 4};
    for (int c = 0; c < 6; c++) {
        const int V = widths[c];
        hl_graph *g = hl_graph_new(0);
        hl_tensor *x = hl_tensor_new("x", 2, (int[]){1, V}, true);
        for (int j = 0; j < V; j++)
            x->data[j] = (hl_real)rows[c][j];
        const int32_t target = 0;
        hl_tensor *y = hl_cross_entropy(g, x, &target, IGNORE);
        ck_assert_int_eq(hl_graph_backward(g, y), HL_OK);
        double want[4], sum = 0;
        const double loss = pytorch_ce_row(x->data, V, want);
        ck_assert_msg(fabs((double)y->data[0] - loss) <= LOSS_TOL * (1 + loss),
                      "case %d: loss %.9g, want %.9g", c, (double)y->data[0], loss);
        for (int j = 0; j < V; j++) {
            ck_assert_msg(fabs((double)x->grad[j] - want[j]) <= LOSS_TOL,
                          "case %d: grad[%d] = %.9g, want %.9g", c, j, (double)x->grad[j],
                          want[j]);
            sum += (double)x->grad[j];
        }
        ck_assert_msg(fabs(sum) <= LOSS_TOL, "case %d: gradient sums to %.3g", c, sum);
        hl_tensor_free(x);
        hl_graph_free(g);
    }
}
END_TEST

/* Every row ignored: the loss is 0 and the gradient zero (not 0/0). */
START_TEST(test_ce_all_ignored)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){2, 3}, true, 5, -1, 1);
    const int32_t targets[] = {IGNORE, IGNORE};
    hl_tensor *y = hl_cross_entropy(g, x, targets, IGNORE);
    ck_assert(!hl_graph_failed(g));
    ck_assert(y->data[0] == 0);
    ck_assert_int_eq(hl_graph_backward(g, y), HL_OK);
    for (int i = 0; i < 6; i++)
        ck_assert(x->grad[i] == 0);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_ce_gradients)
{
    static const int shapes[][3] = {{1, 1, 5}, {1, 3, 4}, {1, 17, 3}, {3, 1, 1}, {2, 17, 5}};
    for (int k = 0; k < 5; k++) {
        hl_tensor *x = tu_random("logits", 3, shapes[k], true, 10 + k, -2, 2);
        size_t rows = (size_t)shapes[k][0] * shapes[k][1];
        int32_t *t = random_targets(rows, shapes[k][2], k >= 2, 20 + k);
        ce_case c = {t};
        tu_gradcheck("cross_entropy", build_ce, &c, &x, 1);
        free(t);
        hl_tensor_free(x);
    }
    hl_tensor *big = tu_random("logits", 3, (int[]){4, 64, 257}, true, 30, -3, 3);
    int32_t *bt = random_targets(4 * 64, 257, true, 31);
    ck_assert(big->numel >= HL_PARALLEL_MIN_WORK); /* really parallel */
    ce_case cb = {bt};
    tu_check_threads_bitwise("cross_entropy (large)", build_ce, &cb, &big, 1);
    free(bt);
    hl_tensor_free(big);
}
END_TEST

/* ---- soft-capped ---- */

typedef struct softcap_case {
    const int32_t *targets;
    hl_real cap;
} softcap_case;

static hl_tensor *build_softcap(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const softcap_case *c = ctx;
    return hl_cross_entropy_softcap(g, in[0], c->targets, IGNORE, c->cap);
}

/* The naive loss of the capped logits, cap·tanh(x/cap), in double; and its
 * gradient: (softmax - onehot)·(1 - tanh²) / counted. */
static double naive_softcap(const hl_tensor *x, const int32_t *targets, double cap,
                            double *grad)
{
    int V = x->shape[x->rank - 1];
    size_t rows = x->numel / (size_t)V, counted = 0;
    for (size_t r = 0; r < rows; r++)
        counted += targets[r] != IGNORE;
    double total = 0;
    for (size_t r = 0; r < rows; r++) {
        for (int j = 0; grad && j < V; j++)
            grad[r * V + j] = 0;
        if (targets[r] == IGNORE)
            continue;
        double s = 0;
        for (int j = 0; j < V; j++)
            s += exp(cap * tanh(x->data[r * V + j] / cap));
        total += log(s) - cap * tanh(x->data[r * V + targets[r]] / cap);
        for (int j = 0; grad && j < V; j++) {
            const double t = tanh(x->data[r * V + j] / cap);
            grad[r * V + j] = (exp(cap * t) / s - (j == targets[r])) * (1 - t * t) /
                              (double)counted;
        }
    }
    return counted ? total / (double)counted : 0;
}

START_TEST(test_softcap_naive)
{
    hl_tensor *x = tu_random("logits", 3, (int[]){2, 7, 37}, true, 40, -30, 30);
    x->data[3] = 1e4f; /* saturates: tanh = 1, slope 0 */
    int32_t *t = random_targets(14, 37, true, 41);
    double *want = malloc(x->numel * sizeof *want);
    hl_graph *g = hl_graph_new(0);
    for (int k = 0; k < 2; k++) {
        const double cap = k ? 3 : 15;
        hl_tensor_zero_grad(x);
        hl_tensor *loss = hl_cross_entropy_softcap(g, x, t, IGNORE, (hl_real)cap);
        ck_assert(!hl_graph_failed(g));
        const double ref = naive_softcap(x, t, cap, want);
        ck_assert_msg(fabs((double)loss->data[0] - ref) <= LOSS_TOL * (1 + fabs(ref)),
                      "cap %g: loss %.9g, want %.9g", cap, (double)loss->data[0], ref);
        ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
        for (size_t i = 0; i < x->numel; i++)
            ck_assert_msg(fabs((double)x->grad[i] - want[i]) <= 20 * LOSS_TOL,
                          "cap %g: grad[%zu] %.9g, want %.9g", cap, i, (double)x->grad[i],
                          want[i]);
        ck_assert(x->grad[3] == 0);
        hl_graph_reset(g);
    }
    free(want);
    free(t);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_softcap_large_cap_is_plain)
{
    /* cap·tanh(x/cap) → x as cap grows: at 1e6 the two losses agree to rounding. */
    hl_tensor *x = tu_random("logits", 2, (int[]){9, 11}, false, 42, -2, 2);
    int32_t *t = random_targets(9, 11, true, 43);
    hl_graph *g = hl_graph_new(0);
    const double plain = hl_cross_entropy(g, x, t, IGNORE)->data[0];
    const double capped = hl_cross_entropy_softcap(g, x, t, IGNORE, 1e6f)->data[0];
    ck_assert_msg(fabs(plain - capped) <= 10 * LOSS_TOL, "%.9g vs %.9g", plain, capped);
    free(t);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_softcap_gradients)
{
    hl_tensor *x = tu_random("logits", 3, (int[]){2, 17, 5}, true, 44, -4, 4);
    int32_t *t = random_targets(34, 5, true, 45);
    softcap_case c = {t, 3};
    tu_gradcheck("cross_entropy_softcap", build_softcap, &c, &x, 1);
    free(t);
    hl_tensor_free(x);
    hl_tensor *big = tu_random("logits", 3, (int[]){4, 64, 257}, true, 46, -30, 30);
    int32_t *bt = random_targets(4 * 64, 257, true, 47);
    ck_assert(big->numel >= HL_PARALLEL_MIN_WORK);
    softcap_case cb = {bt, 15};
    tu_check_threads_bitwise("cross_entropy_softcap (large)", build_softcap, &cb, &big, 1);
    free(bt);
    hl_tensor_free(big);
}
END_TEST

START_TEST(test_softcap_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 5}, true, 1, -1, 1);
    const int32_t ok[] = {0, IGNORE, 4}, high[] = {0, IGNORE, 7};
    tu_expect_error(g, hl_cross_entropy_softcap(g, x, ok, IGNORE, 0), "cross_entropy_softcap",
                    "cap 0", "(3,5)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_cross_entropy_softcap(g, x, ok, IGNORE, -2),
                    "cross_entropy_softcap", "cap -2", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_cross_entropy_softcap(g, x, ok, IGNORE, INFINITY),
                    "cross_entropy_softcap", "finite", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_cross_entropy_softcap(g, x, high, IGNORE, 15),
                    "cross_entropy_softcap", "target 7", "row 2", "(3,5)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_cross_entropy_softcap(g, NULL, ok, IGNORE, 15),
                    "cross_entropy_softcap", "NULL", NULL);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_ce_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 5}, true, 1, -1, 1);
    const int32_t high[] = {0, IGNORE, 7};
    tu_expect_error(g, hl_cross_entropy(g, x, high, IGNORE), "cross_entropy", "target 7",
                    "row 2", "V = 5", "(3,5)", NULL);
    hl_graph_reset(g);
    const int32_t negative[] = {-1, 0, 0};
    tu_expect_error(g, hl_cross_entropy(g, x, negative, IGNORE), "cross_entropy", "target -1",
                    "row 0", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_cross_entropy(g, x, NULL, IGNORE), "cross_entropy", "NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_cross_entropy(g, NULL, high, IGNORE), "cross_entropy", "NULL", NULL);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

Suite *cross_entropy_suite(void)
{
    Suite *s = suite_create("cross_entropy");
    TCase *tc = tcase_create("cross_entropy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ce_hand_values);
    tcase_add_test(tc, test_ce_forward_naive);
    tcase_add_test(tc, test_ce_backward_ignored);
    tcase_add_test(tc, test_ce_large_logits);
    tcase_add_test(tc, test_ce_all_ignored);
    tcase_add_test(tc, test_ce_gradients);
    tcase_add_test(tc, test_ce_errors);
    tcase_add_test(tc, test_softcap_naive);
    tcase_add_test(tc, test_softcap_large_cap_is_plain);
    tcase_add_test(tc, test_softcap_gradients);
    tcase_add_test(tc, test_softcap_errors);
    suite_add_tcase(s, tc);
    return s;
}
