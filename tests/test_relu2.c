/* Tests for ops/relu2.c and its kernels (ops/kernels/relu2.c): ReLU² against
 * the formula in double, its gradient against the naive slope and finite
 * differences, the same bits at any thread count and on every kernel set,
 * and errors. */
#include <math.h>

#include "ops/internal.h"
#include "tests/testutil.h"

static hl_tensor *build_relu2(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_relu2(g, in[0]);
}

START_TEST(test_relu2_forward)
{
    hl_tensor *x = tu_random("x", 3, (int[]){2, 3, 37}, false, 1, -4, 4);
    x->data[0] = 0;
    x->data[1] = -0.0f;
    x->data[2] = NAN;
    x->data[3] = INFINITY;
    x->data[4] = -INFINITY;
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_relu2(g, x);
    ck_assert(!hl_graph_failed(g));
    ck_assert(hl_tensor_same_shape(x, y));
    ck_assert(isnan(y->data[2]));
    ck_assert(y->data[3] == INFINITY);
    for (size_t i = 0; i < x->numel; i++) {
        if (i == 2)
            continue;
        const double v = x->data[i], r = v > 0 ? v : 0;
        ck_assert_msg((double)y->data[i] == (hl_real)(r * r), "relu2(%g) = %g, want %g", v,
                      (double)y->data[i], r * r);
    }
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_relu2_backward_naive)
{
    /* The gradient of Σ w·relu2(x) is w·2·relu(x), exactly. */
    hl_tensor *x = tu_random("x", 2, (int[]){5, 19}, true, 2, -3, 3);
    hl_tensor *w = tu_random("w", 2, (int[]){5, 19}, false, 3, -1, 1);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *loss = hl_sum(g, hl_mul(g, hl_relu2(g, x), w));
    ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
    for (size_t i = 0; i < x->numel; i++) {
        const hl_real r = x->data[i] > 0 ? x->data[i] : 0;
        ck_assert(x->grad[i] == w->data[i] * (r + r));
    }
    hl_tensor_free(x);
    hl_tensor_free(w);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_relu2_gradient)
{
    /* Away from the kink at 0, where central differences straddle it. */
    hl_tensor *x = tu_random("x", 3, (int[]){3, 1, 17}, true, 4, 0.1, 3);
    for (size_t i = 0; i < x->numel; i += 2)
        x->data[i] = -x->data[i];
    tu_gradcheck("relu2", build_relu2, NULL, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_relu2_threads)
{
    hl_tensor *x = tu_random("x", 2, (int[]){129, 514}, true, 5, -5, 5);
    ck_assert(x->numel >= HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("relu2", build_relu2, NULL, &x, 1);
    hl_tensor_free(x);
}
END_TEST

/* relu2(x)·relu2(x): x's gradient arrives twice, stored then added, so both
 * backward paths run. */
static hl_tensor *build_relu2_squared(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_mul(g, hl_relu2(g, in[0]), hl_relu2(g, in[0]));
}

START_TEST(test_relu2_kernel_sets)
{
    /* 111 elements: a tail under every vector width; special values among them. */
    hl_tensor *x = tu_random("x", 2, (int[]){3, 37}, true, 6, -4, 4);
    const hl_real special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, (hl_real)1e-30};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        x->data[17 * i + 3] = special[i];
    tu_check_sets_bitwise("relu2", build_relu2_squared, NULL, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_relu2_errors)
{
    hl_graph *g = hl_graph_new(0);
    tu_expect_error(g, hl_relu2(g, NULL), "relu2", "NULL", NULL);
    hl_graph_free(g);
}
END_TEST

Suite *relu2_suite(void)
{
    Suite *s = suite_create("relu2");
    TCase *tc = tcase_create("relu2");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_relu2_forward);
    tcase_add_test(tc, test_relu2_backward_naive);
    tcase_add_test(tc, test_relu2_gradient);
    tcase_add_test(tc, test_relu2_threads);
    tcase_add_test(tc, test_relu2_kernel_sets);
    tcase_add_test(tc, test_relu2_errors);
    suite_add_tcase(s, tc);
    return s;
}
