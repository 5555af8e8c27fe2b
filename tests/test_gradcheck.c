/* Tests for core/gradcheck.c: it must pass right gradients and catch wrong ones. */
#include <string.h>

#include "tests/testutil.h"

static hl_tensor *build_product(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_mul(g, in[0], in[1]);
}

/* Forward computes x², but the recorded backward is scale's (gradient 1): wrong. */
static hl_tensor *build_lying(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_tensor *y = hl_scale(g, in[0], 1);
    for (size_t i = 0; i < y->numel; i++)
        y->data[i] = in[0]->data[i] * in[0]->data[i];
    return y;
}

START_TEST(test_gradcheck_passes_right_gradients)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *a = tu_random("a", 2, (int[]){3, 4}, true, 1, -1, 1);
    hl_tensor *b = tu_random("b", 1, (int[]){4}, false, 2, -1, 1);
    hl_tensor *in[] = {a, b};
    hl_gradcheck_report r;
    ck_assert_int_eq(hl_gradcheck(g, build_product, NULL, in, 2, NULL, &r), HL_OK);
    ck_assert(r.passed);
    ck_assert(r.inputs[0].checked);
    ck_assert(!r.inputs[1].checked); /* b does not require grad */
    ck_assert_str_eq(r.inputs[0].shape, "(3,4)");
    /* The analytic gradient is left in the input. */
    ck_assert(a->grad[0] != 0);
    hl_tensor_free(a);
    hl_tensor_free(b);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_gradcheck_catches_wrong_gradients)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 1, (int[]){6}, true, 3, 0.5, 1.5);
    hl_gradcheck_report r;
    ck_assert_int_eq(hl_gradcheck(g, build_lying, NULL, &x, 1, NULL, &r), HL_OK);
    ck_assert(!r.passed);
    ck_assert(!r.inputs[0].passed);
    ck_assert(r.inputs[0].max_abs_err > 0.1);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_gradcheck_bad_arguments)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 1, (int[]){6}, false, 3, 0.5, 1.5);
    hl_gradcheck_report r;
    ck_assert_int_eq(hl_gradcheck(g, build_lying, NULL, &x, 0, NULL, &r), HL_ERR_ARG);
    hl_graph_reset(g);
    /* Nothing requires grad: the check cannot run and says why. */
    ck_assert_int_eq(hl_gradcheck(g, build_lying, NULL, &x, 1, NULL, &r), HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(hl_graph_message(g), "does not depend"));
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

Suite *gradcheck_suite(void)
{
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("gradcheck");
    tcase_add_test(tc, test_gradcheck_passes_right_gradients);
    tcase_add_test(tc, test_gradcheck_catches_wrong_gradients);
    tcase_add_test(tc, test_gradcheck_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}
