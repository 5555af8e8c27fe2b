/* Tests for ops/reduce.c: sum and mean. */
#include <math.h>

#include "tests/testutil.h"

static hl_tensor *build_sum(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_sum(g, in[0]);
}

static hl_tensor *build_mean(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_mean(g, in[0]);
}

START_TEST(test_reduce_forward)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){101, 97}, false, 1, -1, 1);
    double expect = 0;
    for (size_t i = 0; i < x->numel; i++)
        expect += x->data[i];
    hl_tensor *s = hl_sum(g, x), *m = hl_mean(g, x);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(s->rank, 1);
    ck_assert_int_eq(s->shape[0], 1);
    ck_assert(fabs(s->data[0] - expect) <= 1e-4 * fabs(expect) + 1e-4);
    ck_assert(fabs(m->data[0] - expect / (double)x->numel) <= 1e-6);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_reduce_gradients)
{
    hl_tensor *x = tu_random("x", 3, (int[]){3, 1, 17}, true, 2, -1, 1);
    tu_gradcheck("sum", build_sum, NULL, &x, 1);
    tu_gradcheck("mean", build_mean, NULL, &x, 1);
    hl_tensor *big = tu_random("x", 2, (int[]){512, 300}, true, 3, -1, 1);
    tu_check_threads_bitwise("sum", build_sum, NULL, &big, 1);
    tu_check_threads_bitwise("mean", build_mean, NULL, &big, 1);
    hl_tensor_free(x);
    hl_tensor_free(big);
}
END_TEST

START_TEST(test_reduce_errors)
{
    hl_graph *g = hl_graph_new(0);
    tu_expect_error(g, hl_sum(g, NULL), "sum", "NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_mean(g, &g->poison), "mean", "poisoned", NULL);
    hl_graph_free(g);
}
END_TEST

Suite *reduce_suite(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("reduce");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reduce_forward);
    tcase_add_test(tc, test_reduce_gradients);
    tcase_add_test(tc, test_reduce_errors);
    suite_add_tcase(s, tc);
    return s;
}
