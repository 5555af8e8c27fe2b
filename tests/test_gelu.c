/* Tests for ops/gelu.c: the exact GELU and its tanh form against reference
 * values, their gradients, thread independence and errors. */
#include <math.h>
#include <stdlib.h>

#include "ops/internal.h"
#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define FORWARD_TOL 1e-14
#else
#define FORWARD_TOL 1e-6
#endif

static hl_tensor *build_gelu(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_gelu(g, in[0]);
}

static hl_tensor *build_gelu_tanh(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_gelu_tanh(g, in[0]);
}

/* PyTorch's formula for gelu(x, approximate='tanh'), in double. */
static double gelu_tanh_ref(double x)
{
    const double beta = 0.79788456080286535588, kappa = 0.044715; /* √(2/π) */
    return 0.5 * x * (1 + tanh(beta * (x + kappa * x * x * x)));
}

/* The same as x·σ(2u) in double, accurate also where 1 + tanh(u) cancels
 * (x below about -5). */
static double gelu_tanh_sigmoid_ref(double x)
{
    const double beta = 0.79788456080286535588, kappa = 0.044715; /* √(2/π) */
    return x / (1 + exp(-2 * beta * (x + kappa * x * x * x)));
}

/* Its derivative, PyTorch's backward formula, in double. */
static double gelu_tanh_slope_ref(double x)
{
    const double beta = 0.79788456080286535588, kappa = 0.044715; /* √(2/π) */
    const double th = tanh(beta * (x + kappa * x * x * x));
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * beta * (1 + 3 * kappa * x * x);
}

START_TEST(test_gelu_forward)
{
    /* 0.5·x·(1 + erf(x/√2)) evaluated in double (Python's math.erf). */
    static const double xs[] = {1, -1, 0, 2, -3, 0.5, -0.25, 4};
    static const double want[] = {0.8413447460685429,   -0.15865525393145707,
                                  0.0,                  1.9544997361036416,
                                  -0.00404969409489031, 0.34573123063700656,
                                  -0.10032341857926907, 3.9998733150326675};
    const int n = (int)(sizeof xs / sizeof xs[0]);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = hl_tensor_new("x", 1, &n, false);
    for (int i = 0; i < n; i++)
        x->data[i] = (hl_real)xs[i];
    hl_tensor *y = hl_gelu(g, x);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->rank, 1);
    ck_assert_int_eq(y->shape[0], n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs((double)y->data[i] - want[i]) <= FORWARD_TOL * (1 + fabs(want[i])),
                      "gelu(%g) = %.17g, want %.17g", xs[i], (double)y->data[i], want[i]);
    ck_assert(y->data[2] == 0);

    /* A random rank-3 tensor against the formula in double, element by element. */
    hl_tensor *r = tu_random("x", 3, (int[]){2, 3, 17}, false, 1, -5, 5);
    hl_tensor *ry = hl_gelu(g, r);
    ck_assert(!hl_graph_failed(g));
    for (size_t i = 0; i < r->numel; i++) {
        double v = r->data[i], ref = 0.5 * v * (1 + erf(v / sqrt(2.0)));
        ck_assert_msg(fabs((double)ry->data[i] - ref) <= FORWARD_TOL * (1 + fabs(ref)),
                      "gelu(%g) = %.9g, want %.9g", v, (double)ry->data[i], ref);
    }
    hl_tensor_free(x);
    hl_tensor_free(r);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_gelu_gradient)
{
    /* The derivative at 0 is 0.5 and at 1 is Φ(1) + φ(1). */
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = hl_tensor_new("x", 1, (int[]){2}, true);
    x->data[1] = 1;
    hl_tensor *y = hl_gelu(g, x);
    ck_assert_int_eq(hl_graph_backward_from(g, y, (hl_real[]){1, 2}), HL_OK);
    const hl_real want[2] = {0.5, (hl_real)(2 * (0.8413447460685429 + 0.24197072451914337))};
    tu_assert_close("gelu'", x->grad, want, 2, FORWARD_TOL * 4);
    hl_tensor_free(x);
    hl_graph_free(g);

    hl_tensor *a = tu_random("x", 3, (int[]){3, 1, 17}, true, 2, -3, 3);
    tu_gradcheck("gelu", build_gelu, NULL, &a, 1);
    hl_tensor *b = tu_random("x", 1, (int[]){1}, true, 3, 0.2, 0.8);
    tu_gradcheck("gelu (1)", build_gelu, NULL, &b, 1);
    hl_tensor_free(a);
    hl_tensor_free(b);
}
END_TEST

START_TEST(test_gelu_threads)
{
    hl_tensor *x = tu_random("x", 2, (int[]){129, 257}, true, 4, -4, 4);
    ck_assert(x->numel >= HL_PARALLEL_MIN_WORK); /* really parallel */
    tu_check_threads_bitwise("gelu", build_gelu, NULL, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_gelu_errors)
{
    hl_graph *g = hl_graph_new(0);
    tu_expect_error(g, hl_gelu(g, NULL), "gelu", "NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_gelu(g, &g->poison), "gelu", "poisoned", NULL);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_gelu_tanh_forward)
{
    /* Random values, then the edges: tails where e^(-2u) overflows or
     * vanishes, x³ overflowing, zeros, infinities and NaN. */
    hl_tensor *x = tu_random("x", 3, (int[]){2, 3, 17}, false, 5, -8, 8);
    static const double edges[] = {0,  -0.0, 1e-3,  -1e-3, -9,    -9.7, -12,
                                   11, 30,   -30,   -1e13, 1e13, -1e30, 1e30};
    const int n_edges = (int)(sizeof edges / sizeof edges[0]);
    for (int i = 0; i < n_edges; i++)
        x->data[i] = (hl_real)edges[i];
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_gelu_tanh(g, x);
    ck_assert(!hl_graph_failed(g));
    ck_assert(hl_tensor_same_shape(x, y));
    for (size_t i = 0; i < x->numel; i++) {
        /* e^(-2u) turns 2u's rounding, relative, into |2u| times as much. */
        const double v = x->data[i], ref = gelu_tanh_sigmoid_ref(v);
        const double two_u = 1.6 * fabs(v + 0.044715 * v * v * v);
        ck_assert_msg(fabs((double)y->data[i] - ref) <=
                          FORWARD_TOL * (2 + fmin(two_u, 1e3)) * fabs(ref) + 1e-37,
                      "gelu_tanh(%g) = %.9g, want %.9g", v, (double)y->data[i], ref);
        if (fabs(v) <= 1e6) /* PyTorch's formula, to its own rounding */
            ck_assert_msg(fabs((double)y->data[i] - gelu_tanh_ref(v)) <=
                              FORWARD_TOL * (1 + fabs(v)),
                          "gelu_tanh(%g) = %.9g, PyTorch's formula %.9g", v,
                          (double)y->data[i], gelu_tanh_ref(v));
    }
    ck_assert(y->data[0] == 0 && y->data[1] == 0);
    /* NaN in, NaN out; inf gives inf and -inf NaN, as PyTorch's -inf·0. */
    hl_tensor *special = hl_tensor_new("x", 1, (int[]){3}, false);
    special->data[0] = (hl_real)NAN;
    special->data[1] = (hl_real)INFINITY;
    special->data[2] = -(hl_real)INFINITY;
    hl_tensor *sy = hl_gelu_tanh(g, special);
    ck_assert(isnan(sy->data[0]) && sy->data[1] == INFINITY && isnan(sy->data[2]));
    hl_tensor_free(special);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_gelu_tanh_gradient)
{
    /* The slope against PyTorch's backward formula, tails included: the
     * second term stays 0 where x·x overflows. */
    hl_tensor *x = tu_random("x", 2, (int[]){3, 17}, true, 6, -6, 6);
    static const double edges[] = {0, -9.7, -12, 11, 30, -30, -1e13, 1e13, -1e30, 1e30};
    const int n_edges = (int)(sizeof edges / sizeof edges[0]);
    for (int i = 0; i < n_edges; i++)
        x->data[i] = (hl_real)edges[i];
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_gelu_tanh(g, x);
    hl_real *dy = malloc(x->numel * sizeof *dy);
    for (size_t i = 0; i < x->numel; i++)
        dy[i] = (hl_real)(0.5 + 0.01 * (double)i);
    ck_assert_int_eq(hl_graph_backward_from(g, y, dy), HL_OK);
    for (size_t i = 0; i < x->numel; i++) {
        const double v = x->data[i];
        /* PyTorch's formula in double overflows past 1e100 or so; its limit
         * is 0 below and 1 above. */
        const double want = dy[i] * (fabs(v) > 1e100 ? (v > 0) : gelu_tanh_slope_ref(v));
        ck_assert_msg(fabs((double)x->grad[i] - want) <= FORWARD_TOL * 4 * (1 + fabs(want)),
                      "gelu_tanh'(%g)·%g = %.9g, want %.9g", v, (double)dy[i],
                      (double)x->grad[i], want);
    }
    free(dy);
    hl_tensor_free(x);
    hl_graph_free(g);

    hl_tensor *a = tu_random("x", 3, (int[]){3, 1, 17}, true, 7, -3, 3);
    tu_gradcheck("gelu_tanh", build_gelu_tanh, NULL, &a, 1);
    hl_tensor *b = tu_random("x", 1, (int[]){1}, true, 8, 0.2, 0.8);
    tu_gradcheck("gelu_tanh (1)", build_gelu_tanh, NULL, &b, 1);
    hl_tensor_free(a);
    hl_tensor_free(b);
}
END_TEST

START_TEST(test_gelu_tanh_threads)
{
    hl_tensor *x = tu_random("x", 2, (int[]){129, 257}, true, 9, -4, 4);
    ck_assert(x->numel >= HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("gelu_tanh", build_gelu_tanh, NULL, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_gelu_tanh_errors)
{
    hl_graph *g = hl_graph_new(0);
    tu_expect_error(g, hl_gelu_tanh(g, NULL), "gelu_tanh", "NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_gelu_tanh(g, &g->poison), "gelu_tanh", "poisoned", NULL);
    hl_graph_free(g);
}
END_TEST

Suite *gelu_suite(void)
{
    Suite *s = suite_create("gelu");
    TCase *tc = tcase_create("gelu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gelu_forward);
    tcase_add_test(tc, test_gelu_gradient);
    tcase_add_test(tc, test_gelu_threads);
    tcase_add_test(tc, test_gelu_errors);
    tcase_add_test(tc, test_gelu_tanh_forward);
    tcase_add_test(tc, test_gelu_tanh_gradient);
    tcase_add_test(tc, test_gelu_tanh_threads);
    tcase_add_test(tc, test_gelu_tanh_errors);
    suite_add_tcase(s, tc);
    return s;
}
