/* Tests for ops/op_common.c: the input checks every op shares. */
#include "tests/testutil.h"

START_TEST(test_uncommitted_parameter_is_an_error)
{
    /* A parameter has no data until hl_params_commit: using it is an error on
     * the graph, not a crash. */
    hl_graph *g = hl_graph_new(0);
    hl_params *p = hl_params_new();
    hl_tensor *w = hl_params_add(p, "fc.weight", 2, (int[]){4, 4});
    hl_tensor *x = tu_random("x", 2, (int[]){3, 4}, false, 1, -1, 1);
    ck_assert_ptr_null(w->data);
    tu_expect_error(g, hl_linear(g, x, w, NULL), "linear: input 1 (fc.weight) has no data",
                    "hl_params_commit", NULL);
    ck_assert_int_eq(hl_graph_status(g), HL_ERR_STATE);
    hl_graph_reset(g);
    const int32_t ids[2] = {0, 1};
    tu_expect_error(g, hl_embedding(g, w, ids, 1, (int[]){2}), "embedding", "fc.weight",
                    "no data", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_add(g, x, w), "add: input 1 (fc.weight) has no data", NULL);
    /* Committed, the same call works. */
    ck_assert_int_eq(hl_params_commit(p), HL_OK);
    hl_graph_reset(g);
    ck_assert(!hl_tensor_is_poison(hl_linear(g, x, w, NULL)));
    hl_tensor_free(x);
    hl_params_free(p);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_null_and_poisoned_inputs)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 1, (int[]){3}, false, 1, -1, 1);
    tu_expect_error(g, hl_add(g, x, NULL), "add: input 1 is NULL", NULL);
    hl_tensor *poison = &g->poison;
    hl_graph_reset(g);
    tu_expect_error(g, hl_scale(g, poison, 2), "scale: input 0 is a poisoned tensor", NULL);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

Suite *op_common_suite(void)
{
    Suite *s = suite_create("op_common");
    TCase *tc = tcase_create("op_common");
    tcase_add_test(tc, test_uncommitted_parameter_is_an_error);
    tcase_add_test(tc, test_null_and_poisoned_inputs);
    suite_add_tcase(s, tc);
    return s;
}
