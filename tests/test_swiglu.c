/* Tests for ops/swiglu.c: SwiGLU's gate against the formula in double, its
 * gradient, thread independence and errors. */
#include <math.h>

#include "ops/internal.h"
#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define FORWARD_TOL 1e-14
#else
#define FORWARD_TOL 2e-6
#endif

static hl_tensor *build_swiglu(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_swiglu(g, in[0]);
}

START_TEST(test_swiglu_forward)
{
    const int F = 19;
    hl_tensor *x = tu_random("x", 3, (int[]){2, 3, 2 * F}, false, 1, -6, 6);
    x->data[0] = -120; /* e^120 overflows: silu is -0 there, not NaN */
    x->data[1] = 120;
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_swiglu(g, x);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->shape[2], F);
    ck_assert_int_eq(y->shape[0] * y->shape[1], 6);
    for (size_t r = 0; r < 6; r++)
        for (int j = 0; j < F; j++) {
            const double a = x->data[r * 2 * F + j], b = x->data[r * 2 * F + F + j];
            const double want = a / (1 + exp(-a)) * b;
            const double got = y->data[r * F + j];
            ck_assert_msg(fabs(got - want) <= FORWARD_TOL * (1 + fabs(want)),
                          "swiglu(%g, %g) = %.9g, want %.9g", a, b, got, want);
        }
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_swiglu_gradient)
{
    hl_tensor *x = tu_random("x", 3, (int[]){3, 1, 34}, true, 2, -4, 4);
    tu_gradcheck("swiglu", build_swiglu, NULL, &x, 1);
    hl_tensor *two = tu_random("x", 1, (int[]){2}, true, 3, 0.2, 0.8);
    tu_gradcheck("swiglu (2)", build_swiglu, NULL, &two, 1);
    hl_tensor_free(x);
    hl_tensor_free(two);
}
END_TEST

START_TEST(test_swiglu_threads)
{
    hl_tensor *x = tu_random("x", 2, (int[]){129, 514}, true, 4, -5, 5);
    ck_assert(x->numel >= HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("swiglu", build_swiglu, NULL, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_swiglu_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *odd = hl_tensor_new("x", 2, (int[]){3, 5}, false);
    tu_expect_error(g, hl_swiglu(g, odd), "swiglu", "(3,5)", "even", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_swiglu(g, NULL), "swiglu", "NULL", NULL);
    hl_tensor_free(odd);
    hl_graph_free(g);
}
END_TEST

Suite *swiglu_suite(void)
{
    Suite *s = suite_create("swiglu");
    TCase *tc = tcase_create("swiglu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_swiglu_forward);
    tcase_add_test(tc, test_swiglu_gradient);
    tcase_add_test(tc, test_swiglu_threads);
    tcase_add_test(tc, test_swiglu_errors);
    suite_add_tcase(s, tc);
    return s;
}
