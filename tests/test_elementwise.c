/* Tests for ops/elementwise.c: scale, add and mul with broadcasting. */
#include "tests/testutil.h"

static hl_tensor *build_scale(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_scale(g, in[0], (hl_real)-0.37);
}

static hl_tensor *build_add(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_add(g, in[0], in[1]);
}

static hl_tensor *build_mul(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_mul(g, in[0], in[1]);
}

/* a used twice: the gradient must be the sum of both uses. */
static hl_tensor *build_square_plus(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_add(g, hl_mul(g, in[0], in[0]), in[0]);
}

START_TEST(test_broadcast_forward)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *a = tu_random("a", 3, (int[]){2, 3, 4}, false, 1, -1, 1);
    hl_tensor *bias = tu_random("bias", 1, (int[]){4}, false, 2, -1, 1);
    hl_tensor *gate = tu_random("gate", 3, (int[]){3, 1, 1}, false, 3, -1, 1);
    hl_tensor *sum = hl_add(g, a, bias);
    hl_tensor *prod = hl_mul(g, a, hl_reshape(g, gate, 2, (int[]){3, 1}));
    ck_assert(!hl_graph_failed(g));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                int o = (i * 3 + j) * 4 + k;
                ck_assert(sum->data[o] == a->data[o] + bias->data[k]);
                ck_assert(prod->data[o] == a->data[o] * gate->data[j]);
            }
    hl_tensor *s = hl_scale(g, a, 2);
    ck_assert(s->data[5] == 2 * a->data[5]);
    hl_tensor_free(a);
    hl_tensor_free(bias);
    hl_tensor_free(gate);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_elementwise_gradients)
{
    hl_tensor *x = tu_random("x", 3, (int[]){3, 1, 17}, true, 4, -1, 1);
    tu_gradcheck("scale", build_scale, NULL, &x, 1);
    tu_gradcheck("add+mul (x used three times)", build_square_plus, NULL, &x, 1);

    hl_tensor *a = tu_random("a", 4, (int[]){2, 3, 5, 4}, true, 5, -1, 1);
    hl_tensor *same = tu_random("b", 4, (int[]){2, 3, 5, 4}, true, 6, -1, 1);
    hl_tensor *bias = tu_random("bias", 1, (int[]){4}, true, 7, -1, 1);
    hl_tensor *gate = tu_random("gate", 3, (int[]){3, 1, 1}, true, 8, 0.5, 1.5);
    hl_tensor *col = tu_random("col", 2, (int[]){5, 1}, true, 9, -1, 1);
    hl_tensor *pairs[][2] = {{a, same}, {a, bias}, {a, gate}, {a, col}};
    for (int i = 0; i < 4; i++) {
        tu_gradcheck("add", build_add, NULL, pairs[i], 2);
        tu_gradcheck("mul", build_mul, NULL, pairs[i], 2);
    }
    hl_tensor_free(x);
    hl_tensor_free(a);
    hl_tensor_free(same);
    hl_tensor_free(bias);
    hl_tensor_free(gate);
    hl_tensor_free(col);
}
END_TEST

START_TEST(test_elementwise_threads)
{
    hl_tensor *a = tu_random("a", 4, (int[]){4, 8, 64, 32}, true, 10, -1, 1);
    hl_tensor *b = tu_random("b", 4, (int[]){4, 8, 64, 32}, true, 11, -1, 1);
    hl_tensor *gate = tu_random("gate", 3, (int[]){8, 1, 1}, true, 12, -1, 1);
    /* a position embedding's shape: each of its elements sums 32 outputs */
    hl_tensor *pos = tu_random("pos", 2, (int[]){64, 32}, true, 13, -1, 1);
    hl_tensor *same[] = {a, b}, *gated[] = {a, gate}, *positioned[] = {a, pos};
    tu_check_threads_bitwise("scale", build_scale, NULL, &a, 1);
    tu_check_threads_bitwise("add", build_add, NULL, same, 2);
    tu_check_threads_bitwise("mul", build_mul, NULL, gated, 2);
    tu_check_threads_bitwise("add, broadcast over two dims", build_add, NULL, positioned, 2);
    tu_check_threads_bitwise("mul, broadcast over two dims", build_mul, NULL, positioned, 2);
    hl_tensor_free(a);
    hl_tensor_free(b);
    hl_tensor_free(gate);
    hl_tensor_free(pos);
}
END_TEST

START_TEST(test_elementwise_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *a = tu_random("a", 2, (int[]){3, 4}, false, 1, -1, 1);
    hl_tensor *b = tu_random("b", 1, (int[]){3}, false, 1, -1, 1);
    tu_expect_error(g, hl_add(g, a, b), "add", "(3)", "(3,4)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_mul(g, b, a), "mul", "(3,4)", "(3)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_scale(g, NULL, 2), "scale", "NULL", NULL);
    /* Sticky: after an error every op returns the poisoned tensor. */
    tu_expect_error(g, hl_add(g, a, a), "scale", NULL);
    hl_tensor_free(a);
    hl_tensor_free(b);
    hl_graph_free(g);
}
END_TEST

Suite *elementwise_suite(void)
{
    Suite *s = suite_create("elementwise");
    TCase *tc = tcase_create("elementwise");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_broadcast_forward);
    tcase_add_test(tc, test_elementwise_gradients);
    tcase_add_test(tc, test_elementwise_threads);
    tcase_add_test(tc, test_elementwise_errors);
    suite_add_tcase(s, tc);
    return s;
}
