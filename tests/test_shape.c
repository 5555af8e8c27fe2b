/* Tests for ops/shape.c: reshape (a view), permute, transpose and narrow. */
#include <limits.h>

#include "tests/testutil.h"

static hl_tensor *build_permute(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_permute(g, in[0], (const int *)ctx);
}

static hl_tensor *build_reshape_permute(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    /* (B,T,E) -> (B,T,H,D) -> (B,H,T,D): the head split of attention. */
    hl_tensor *split = hl_reshape(g, in[0], 4, (int[]){2, 5, 3, -1});
    return hl_permute(g, split, (int[]){0, 2, 1, 3});
}

START_TEST(test_reshape_is_a_view)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 4}, true, 1, -1, 1);
    hl_tensor *y = hl_reshape(g, x, 3, (int[]){2, -1, 3});
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->rank, 3);
    ck_assert_int_eq(y->shape[1], 2);
    ck_assert_ptr_eq(y->data, x->data);
    ck_assert(y->requires_grad);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_permute_forward)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 3, (int[]){2, 3, 4}, false, 2, -1, 1);
    hl_tensor *y = hl_permute(g, x, (int[]){2, 0, 1});
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->shape[0], 4);
    ck_assert_int_eq(y->shape[1], 2);
    ck_assert_int_eq(y->shape[2], 3);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++)
                ck_assert(y->data[(c * 2 + a) * 3 + b] == x->data[(a * 3 + b) * 4 + c]);
    hl_tensor *t = hl_transpose(g, x, 0, 2);
    ck_assert_int_eq(t->shape[0], 4);
    ck_assert_int_eq(t->shape[2], 2);
    ck_assert(t->data[(3 * 3 + 1) * 2 + 1] == x->data[(1 * 3 + 1) * 4 + 3]);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_shape_gradients)
{
    static int perm[] = {1, 3, 0, 2};
    hl_tensor *x = tu_random("x", 4, (int[]){3, 1, 17, 2}, true, 3, -1, 1);
    tu_gradcheck("permute", build_permute, perm, &x, 1);
    tu_check_threads_bitwise("permute", build_permute, perm, &x, 1);
    hl_tensor *e = tu_random("x", 3, (int[]){2, 5, 6}, true, 4, -1, 1);
    tu_gradcheck("reshape", build_reshape_permute, NULL, &e, 1);
    hl_tensor *big = tu_random("x", 4, (int[]){4, 64, 8, 32}, true, 5, -1, 1);
    tu_check_threads_bitwise("permute (large)", build_permute, perm, &big, 1);
    hl_tensor_free(x);
    hl_tensor_free(e);
    hl_tensor_free(big);
}
END_TEST

static hl_tensor *build_narrow(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    /* Split a packed (B,T,3E) projection and recombine the parts unequally, so
     * each part's gradient is distinct. */
    hl_tensor *q = hl_narrow(g, in[0], -1, 0, 4);
    hl_tensor *k = hl_narrow(g, in[0], 2, 4, 4);
    hl_tensor *v = hl_narrow(g, in[0], 2, 8, 4);
    return hl_add(g, hl_mul(g, q, k), hl_scale(g, v, 3));
}

START_TEST(test_narrow)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 3, (int[]){2, 3, 12}, true, 6, -1, 1);
    hl_tensor *rows = hl_narrow(g, x, 1, 1, 2);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(rows->shape[1], 2);
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 2; t++)
            for (int e = 0; e < 12; e++)
                ck_assert(rows->data[(b * 2 + t) * 12 + e] == x->data[(b * 3 + t + 1) * 12 + e]);
    tu_gradcheck("narrow", build_narrow, NULL, &x, 1);
    hl_tensor *big = tu_random("x", 3, (int[]){8, 64, 96}, true, 7, -1, 1);
    tu_check_threads_bitwise("narrow", build_narrow, NULL, &big, 1);
    tu_expect_error(g, hl_narrow(g, x, 2, 10, 3), "narrow", "10..12", "(2,3,12)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_narrow(g, x, 3, 0, 1), "narrow", "dim 3", NULL);
    /* start + length - 1 does not fit an int: the message must not overflow. */
    hl_graph_reset(g);
    tu_expect_error(g, hl_narrow(g, x, 2, 1, INT_MAX), "narrow", "1..2147483647", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_narrow(g, x, 2, -1, INT_MIN), "narrow", "length -2147483648", NULL);
    hl_tensor_free(x);
    hl_tensor_free(big);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_shape_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 4}, false, 1, -1, 1);
    tu_expect_error(g, hl_reshape(g, x, 2, (int[]){5, 3}), "reshape", "(3,4)", "(5,3)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_permute(g, x, (int[]){0, 0}), "permute", "(3,4)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_transpose(g, x, 0, 2), "transpose: dims 0,2 out of range", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_transpose(g, NULL, 0, 1), "transpose: input 0 is NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_reshape(g, NULL, 1, (int[]){12}), "reshape", "NULL", NULL);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

Suite *shape_suite(void)
{
    Suite *s = suite_create("shape");
    TCase *tc = tcase_create("shape");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_reshape_is_a_view);
    tcase_add_test(tc, test_permute_forward);
    tcase_add_test(tc, test_shape_gradients);
    tcase_add_test(tc, test_narrow);
    tcase_add_test(tc, test_shape_errors);
    suite_add_tcase(s, tc);
    return s;
}
