/* Tests for ops/rmsnorm.c: RMSNorm against the formula in double, its
 * gradient (with and without gamma, and x as its own gamma), thread
 * independence and errors. */
#include <math.h>

#include "ops/internal.h"
#include "tests/testutil.h"

#define EPS 1e-5

static hl_tensor *build_rmsnorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_rmsnorm(g, in[0], in[1], (hl_real)EPS);
}

static hl_tensor *build_rmsnorm_plain(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_rmsnorm(g, in[0], NULL, (hl_real)EPS);
}

/* x normalised with itself as gamma: both gradients reach one tensor. */
static hl_tensor *build_rmsnorm_self(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_rmsnorm(g, in[0], in[0], (hl_real)EPS);
}

START_TEST(test_rmsnorm_forward)
{
    const int rows = 5, cols = 17;
    hl_tensor *x = tu_random("x", 2, (int[]){rows, cols}, false, 1, -3, 3);
    hl_tensor *w = tu_random("w", 1, &cols, false, 2, 0.5, 1.5);
    x->data[3 * cols + 4] = 1000; /* one large element */
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_rmsnorm(g, x, w, (hl_real)EPS);
    ck_assert(!hl_graph_failed(g));
    for (int r = 0; r < rows; r++) {
        double sq = 0;
        for (int j = 0; j < cols; j++)
            sq += (double)x->data[r * cols + j] * x->data[r * cols + j];
        const double rstd = 1 / sqrt(sq / cols + EPS);
        for (int j = 0; j < cols; j++) {
            const double want = x->data[r * cols + j] * rstd * w->data[j];
            ck_assert_msg(fabs(y->data[r * cols + j] - want) <= 1e-6 * (1 + fabs(want)),
                          "(%d,%d): %.9g, want %.9g", r, j, (double)y->data[r * cols + j], want);
        }
    }
    /* A zero row stays zero (eps keeps the scale finite). */
    hl_tensor *z = hl_tensor_new("z", 2, (int[]){1, 4}, false);
    hl_tensor *yz = hl_rmsnorm(g, z, NULL, (hl_real)EPS);
    for (int j = 0; j < 4; j++)
        ck_assert(yz->data[j] == 0);
    hl_tensor_free(x);
    hl_tensor_free(w);
    hl_tensor_free(z);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_rmsnorm_gradient)
{
    hl_tensor *in[2] = {tu_random("x", 3, (int[]){2, 3, 17}, true, 3, -2, 2),
                        tu_random("gamma", 1, (int[]){17}, true, 4, 0.5, 1.5)};
    tu_gradcheck("rmsnorm", build_rmsnorm, NULL, in, 2);
    tu_gradcheck("rmsnorm without gamma", build_rmsnorm_plain, NULL, in, 1);
    hl_tensor *sq = tu_random("x", 1, (int[]){5}, true, 5, 0.5, 1.5);
    tu_gradcheck("rmsnorm (x as gamma)", build_rmsnorm_self, NULL, &sq, 1);
    hl_tensor_free(in[0]);
    hl_tensor_free(in[1]);
    hl_tensor_free(sq);
}
END_TEST

START_TEST(test_rmsnorm_threads)
{
    hl_tensor *in[2] = {tu_random("x", 2, (int[]){300, 130}, true, 6, -2, 2),
                        tu_random("gamma", 1, (int[]){130}, true, 7, 0.5, 1.5)};
    ck_assert(in[0]->numel >= HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("rmsnorm", build_rmsnorm, NULL, in, 2);
    hl_tensor_free(in[0]);
    hl_tensor_free(in[1]);
}
END_TEST

START_TEST(test_rmsnorm_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 4}, false, 8, -1, 1);
    hl_tensor *v5 = tu_random("v", 1, (int[]){5}, false, 9, -1, 1);
    tu_expect_error(g, hl_rmsnorm(g, x, v5, (hl_real)EPS), "rmsnorm", "gamma", "(5)", "(3,4)",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_rmsnorm(g, x, NULL, 0), "rmsnorm", "eps", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_rmsnorm(g, x, NULL, (hl_real)NAN), "rmsnorm", "eps", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_rmsnorm(g, NULL, NULL, (hl_real)EPS), "rmsnorm", "NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_rmsnorm(g, x, &g->poison, (hl_real)EPS), "rmsnorm", "gamma", "poison",
                    NULL);
    hl_tensor_free(x);
    hl_tensor_free(v5);
    hl_graph_free(g);
}
END_TEST

Suite *rmsnorm_suite(void)
{
    Suite *s = suite_create("rmsnorm");
    TCase *tc = tcase_create("rmsnorm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_rmsnorm_forward);
    tcase_add_test(tc, test_rmsnorm_gradient);
    tcase_add_test(tc, test_rmsnorm_threads);
    tcase_add_test(tc, test_rmsnorm_errors);
    suite_add_tcase(s, tc);
    return s;
}
