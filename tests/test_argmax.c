/* Tests for ops/argmax.c: indices of row maxima, ties, NaN, the no-grad rule. */
#include <math.h>

#include "tests/testutil.h"

static hl_tensor *build_argmax(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_argmax(g, in[0]);
}

/* Argmax of each row of x (rows of N values) by a plain scan. */
static void naive_argmax(const hl_tensor *x, int N, hl_real *out)
{
    for (size_t r = 0; r < x->numel / (size_t)N; r++) {
        int best = 0;
        for (int j = 1; j < N; j++)
            if (x->data[r * N + j] > x->data[r * N + best])
                best = j;
        out[r] = (hl_real)best;
    }
}

START_TEST(test_argmax_values)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 3, (int[]){2, 3, 17}, false, 1, -1, 1);
    hl_tensor *y = hl_argmax(g, x);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->rank, 2);
    ck_assert_int_eq(y->shape[0], 2);
    ck_assert_int_eq(y->shape[1], 3);
    hl_real expect[6];
    naive_argmax(x, 17, expect);
    tu_assert_close("argmax", y->data, expect, 6, 0);
    hl_tensor *v = hl_tensor_new("v", 1, (int[]){4}, false);
    v->data[0] = -1, v->data[1] = 5, v->data[2] = 2, v->data[3] = 4;
    hl_tensor *one = hl_argmax(g, v);
    ck_assert_int_eq(one->rank, 1);
    ck_assert_int_eq(one->shape[0], 1);
    ck_assert(one->data[0] == 1);
    hl_tensor *big = tu_random("x", 2, (int[]){128, 257}, false, 2, -1, 1);
    tu_check_threads_bitwise("argmax (large)", build_argmax, NULL, &big, 1);
    hl_tensor_free(x);
    hl_tensor_free(v);
    hl_tensor_free(big);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_argmax_ties_and_nan)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = hl_tensor_new("x", 2, (int[]){5, 4}, false);
    const hl_real rows[5][4] = {
        {1, 3, 3, 2},                         /* tie: the first wins */
        {NAN, 1, NAN, 5},                     /* NaN is never chosen */
        {NAN, NAN, NAN, NAN},                 /* all NaN: 0 */
        {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, /* all equal: 0 */
        {-INFINITY, -7, INFINITY, INFINITY},  /* +inf is the largest */
    };
    for (int i = 0; i < 20; i++)
        x->data[i] = rows[i / 4][i % 4];
    hl_tensor *y = hl_argmax(g, x);
    ck_assert(!hl_graph_failed(g));
    const hl_real expect[5] = {1, 3, 0, 0, 2};
    tu_assert_close("argmax", y->data, expect, 5, 0);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_argmax_no_grad_rule)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 5}, true, 3, -1, 1);
    tu_expect_error(g, hl_argmax(g, x), "argmax", "no backward", "requires grad", NULL);
    hl_graph_reset(g);
    hl_graph_set_grad_enabled(g, false);
    hl_tensor *y = hl_argmax(g, x);
    ck_assert(!hl_graph_failed(g));
    ck_assert(!y->requires_grad);
    hl_real expect[3];
    naive_argmax(x, 5, expect);
    tu_assert_close("argmax (no grad)", y->data, expect, 3, 0);
    hl_graph_set_grad_enabled(g, true);
    hl_tensor *c = tu_random("c", 1, (int[]){7}, false, 4, -1, 1);
    hl_argmax(g, c);
    ck_assert(!hl_graph_failed(g));
    ck_assert_uint_eq(g->n_nodes, 0);
    hl_graph_reset(g);
    tu_expect_error(g, hl_argmax(g, NULL), "argmax", "NULL", NULL);
    hl_tensor_free(x);
    hl_tensor_free(c);
    hl_graph_free(g);
}
END_TEST

Suite *argmax_suite(void)
{
    Suite *s = suite_create("argmax");
    TCase *tc = tcase_create("argmax");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_argmax_values);
    tcase_add_test(tc, test_argmax_ties_and_nan);
    tcase_add_test(tc, test_argmax_no_grad_rule);
    suite_add_tcase(s, tc);
    return s;
}
