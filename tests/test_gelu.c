/* Tests for ops/gelu.c: the exact GELU against reference values, its gradient,
 * thread independence and errors. */
#include <math.h>

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

Suite *gelu_suite(void)
{
    Suite *s = suite_create("gelu");
    TCase *tc = tcase_create("gelu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gelu_forward);
    tcase_add_test(tc, test_gelu_gradient);
    tcase_add_test(tc, test_gelu_threads);
    tcase_add_test(tc, test_gelu_errors);
    suite_add_tcase(s, tc);
    return s;
}
