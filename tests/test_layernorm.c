/* Tests for ops/layernorm.c: forward against a naive long-double reference,
 * gradients of x, gamma and beta, thread independence and errors. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define FORWARD_TOL 1e-12
#else
#define FORWARD_TOL 2e-6
#endif

/* Which of gamma and beta a build function passes; the inputs array holds x,
 * then gamma when used, then beta when used. */
typedef struct {
    bool gamma, beta;
} ln_params;

static hl_tensor *build_layernorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const ln_params *p = ctx;
    hl_tensor *gamma = p->gamma ? in[1] : NULL;
    hl_tensor *beta = p->beta ? in[p->gamma ? 2 : 1] : NULL;
    return hl_layernorm(g, in[0], gamma, beta, (hl_real)1e-5);
}

/* The textbook formula, per row, two-pass in long double (close to exact
 * beside double); cond[r] = |mean| / std of row r, how much a row's offset
 * amplifies the rounding of any summation order. */
static void naive_layernorm(const hl_tensor *x, const hl_tensor *gamma, const hl_tensor *beta,
                            double eps, double *y, double *cond)
{
    int n = x->shape[x->rank - 1];
    size_t rows = x->numel / (size_t)n;
    for (size_t r = 0; r < rows; r++) {
        const hl_real *xr = x->data + r * n;
        long double mean = 0, var = 0;
        for (int j = 0; j < n; j++)
            mean += xr[j];
        mean /= n;
        for (int j = 0; j < n; j++)
            var += (xr[j] - mean) * (xr[j] - mean);
        var /= n;
        cond[r] = (double)(fabsl(mean) / sqrtl(var + eps));
        for (int j = 0; j < n; j++) {
            long double v = (xr[j] - mean) / sqrtl(var + eps);
            y[r * n + j] =
                (double)(v * (gamma ? gamma->data[j] : 1) + (beta ? beta->data[j] : 0));
        }
    }
}

static void check_forward(int rank, const int *shape, double lo, double hi, bool with_params)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", rank, shape, false, 11, lo, hi);
    int n = shape[rank - 1];
    hl_tensor *gamma = with_params ? tu_random("gamma", 1, &n, false, 12, 0.5, 1.5) : NULL;
    hl_tensor *beta = with_params ? tu_random("beta", 1, &n, false, 13, -1, 1) : NULL;
    hl_tensor *y = hl_layernorm(g, x, gamma, beta, (hl_real)1e-5);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    ck_assert_int_eq(y->rank, rank);
    ck_assert_uint_eq(y->numel, x->numel);
    double *ref = malloc(x->numel * sizeof *ref), *cond = malloc(x->numel / n * sizeof *cond);
    naive_layernorm(x, gamma, beta, (double)(hl_real)1e-5, ref, cond);
    /* The op's double statistics may round differently from the reference's
     * order by a few ulps of the mean, which the row's offset amplifies. */
    for (size_t i = 0; i < x->numel; i++) {
        const double tol = (FORWARD_TOL + 4 * DBL_EPSILON * cond[i / n]) * (1 + fabs(ref[i]));
        ck_assert_msg(fabs((double)y->data[i] - ref[i]) <= tol,
                      "layernorm element %zu: %.17g vs %.17g", i, (double)y->data[i], ref[i]);
    }
    free(ref);
    free(cond);
    hl_tensor_free(x);
    hl_tensor_free(gamma);
    hl_tensor_free(beta);
    hl_graph_free(g);
}

START_TEST(test_layernorm_forward)
{
    check_forward(2, (int[]){3, 17}, -2, 2, true);
    check_forward(3, (int[]){2, 3, 5}, -1, 3, false);
    /* A large offset with small noise: a single-pass E[x²] - E[x]² in float
     * would lose every digit of the variance. */
    check_forward(2, (int[]){4, 17}, 999.9, 1000.1, true);
    check_forward(2, (int[]){4, 17}, 1000, 1000.01, false);
    /* N = 1: the variance is 0, x̂ = 0, the output is beta. */
    check_forward(2, (int[]){5, 1}, -3, 3, true);
}
END_TEST

START_TEST(test_layernorm_normalises)
{
    /* Hand-computed: the row (1,3) has mean 2 and biased variance 1. */
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = hl_tensor_new("x", 2, (int[]){1, 2}, false);
    x->data[0] = 1;
    x->data[1] = 3;
    hl_tensor *y = hl_layernorm(g, x, NULL, NULL, (hl_real)0.25);
    ck_assert(!hl_graph_failed(g));
    /* (x - 2) / sqrt(1 + 0.25) */
    const hl_real want[2] = {(hl_real)(-1 / sqrt(1.25)), (hl_real)(1 / sqrt(1.25))};
    tu_assert_close("layernorm (1,3)", y->data, want, 2, FORWARD_TOL);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_layernorm_gradients)
{
    hl_tensor *x = tu_random("x", 2, (int[]){3, 17}, true, 21, -2, 2);
    hl_tensor *gamma = tu_random("gamma", 1, (int[]){17}, true, 22, 0.5, 1.5);
    hl_tensor *beta = tu_random("beta", 1, (int[]){17}, true, 23, -1, 1);
    tu_gradcheck("layernorm", build_layernorm, &(ln_params){true, true},
                 (hl_tensor *[]){x, gamma, beta}, 3);
    tu_gradcheck("layernorm (no params)", build_layernorm, &(ln_params){false, false}, &x, 1);
    tu_gradcheck("layernorm (gamma)", build_layernorm, &(ln_params){true, false},
                 (hl_tensor *[]){x, gamma}, 2);
    tu_gradcheck("layernorm (beta)", build_layernorm, &(ln_params){false, true},
                 (hl_tensor *[]){x, beta}, 2);

    /* Odd shapes: rank 3 with N = 3, and N = 1 (x gets zero gradient). */
    hl_tensor *x3 = tu_random("x", 3, (int[]){1, 5, 3}, true, 24, -1, 1);
    hl_tensor *g3 = tu_random("gamma", 1, (int[]){3}, true, 25, 0.5, 1.5);
    hl_tensor *b3 = tu_random("beta", 1, (int[]){3}, true, 26, -1, 1);
    tu_gradcheck("layernorm (1,5,3)", build_layernorm, &(ln_params){true, true},
                 (hl_tensor *[]){x3, g3, b3}, 3);
    hl_tensor *x1 = tu_random("x", 2, (int[]){7, 1}, true, 27, -1, 1);
    hl_tensor *g1 = tu_random("gamma", 1, (int[]){1}, true, 28, 0.5, 1.5);
    hl_tensor *b1 = tu_random("beta", 1, (int[]){1}, true, 29, -1, 1);
    tu_gradcheck("layernorm (7,1)", build_layernorm, &(ln_params){true, true},
                 (hl_tensor *[]){x1, g1, b1}, 3);

    /* Only the parameters require grad (a frozen input). */
    hl_tensor *xc = tu_random("x", 2, (int[]){3, 17}, false, 30, -2, 2);
    tu_gradcheck("layernorm (constant x)", build_layernorm, &(ln_params){true, true},
                 (hl_tensor *[]){xc, gamma, beta}, 3);

    hl_tensor *all[] = {x, gamma, beta, x3, g3, b3, x1, g1, b1, xc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        hl_tensor_free(all[i]);
}
END_TEST

START_TEST(test_layernorm_threads)
{
    /* 300 rows of 257: both the row-parallel dx and the column-parallel
     * dgamma/dbeta (5 blocks of up to 64 columns) go parallel. */
    hl_tensor *x = tu_random("x", 3, (int[]){3, 100, 257}, true, 31, -2, 2);
    hl_tensor *gamma = tu_random("gamma", 1, (int[]){257}, true, 32, 0.5, 1.5);
    hl_tensor *beta = tu_random("beta", 1, (int[]){257}, true, 33, -1, 1);
    tu_check_threads_bitwise("layernorm", build_layernorm, &(ln_params){true, true},
                             (hl_tensor *[]){x, gamma, beta}, 3);
    tu_check_threads_bitwise("layernorm (no params)", build_layernorm,
                             &(ln_params){false, false}, &x, 1);
    hl_tensor_free(x);
    hl_tensor_free(gamma);
    hl_tensor_free(beta);
}
END_TEST

START_TEST(test_layernorm_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 4}, false, 41, -1, 1);
    hl_tensor *v4 = tu_random("v", 1, (int[]){4}, false, 42, -1, 1);
    hl_tensor *v5 = tu_random("v", 1, (int[]){5}, false, 43, -1, 1);
    hl_tensor *m14 = tu_random("v", 2, (int[]){1, 4}, false, 44, -1, 1);
    const hl_real eps = (hl_real)1e-5;
    tu_expect_error(g, hl_layernorm(g, x, v5, v4, eps), "layernorm", "gamma", "(5)", "(3,4)",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_layernorm(g, x, v4, v5, eps), "layernorm", "beta", "(5)", "(3,4)",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_layernorm(g, x, m14, NULL, eps), "layernorm", "gamma", "(1,4)", "(3,4)",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_layernorm(g, x, NULL, NULL, 0), "layernorm", "eps", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_layernorm(g, x, NULL, NULL, -1), "layernorm", "eps", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_layernorm(g, x, v4, v4, (hl_real)NAN), "layernorm", "eps", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_layernorm(g, NULL, v4, v4, eps), "layernorm", "NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_layernorm(g, x, &g->poison, NULL, eps), "layernorm", "gamma",
                    "poisoned", NULL);
    hl_graph_reset(g);
    /* Sticky: after an error, a valid call returns the poisoned tensor too. */
    hl_layernorm(g, x, v5, NULL, eps);
    tu_expect_error(g, hl_layernorm(g, x, v4, v4, eps), "layernorm", "(5)", NULL);
    hl_tensor_free(x);
    hl_tensor_free(v4);
    hl_tensor_free(v5);
    hl_tensor_free(m14);
    hl_graph_free(g);
}
END_TEST

Suite *layernorm_suite(void)
{
    Suite *s = suite_create("layernorm");
    TCase *tc = tcase_create("layernorm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_layernorm_forward);
    tcase_add_test(tc, test_layernorm_normalises);
    tcase_add_test(tc, test_layernorm_gradients);
    tcase_add_test(tc, test_layernorm_threads);
    tcase_add_test(tc, test_layernorm_errors);
    suite_add_tcase(s, tc);
    return s;
}
