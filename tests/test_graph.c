/* Tests for core/graph.c: the tape, backward, grad modes, errors, memory reuse. */
#include <math.h>
#include <string.h>

#include "tests/testutil.h"

START_TEST(test_backward_accumulates_over_uses)
{
    /* loss = sum(x*x + 3x): dloss/dx = 2x + 3, with x used three times. */
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 1, (int[]){5}, true, 1, -1, 1);
    hl_tensor *loss = hl_sum(g, hl_add(g, hl_mul(g, x, x), hl_scale(g, x, 3)));
    ck_assert_uint_eq(g->n_nodes, 4);
    ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
    for (int i = 0; i < 5; i++)
        ck_assert(fabs(x->grad[i] - (2 * x->data[i] + 3)) < 1e-6);
    /* A second backward on a new graph adds to the leaf's gradient. */
    hl_graph_reset(g);
    loss = hl_sum(g, x);
    ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
    ck_assert(fabs(x->grad[0] - (2 * x->data[0] + 4)) < 1e-6);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_second_backward_adds_only_its_own_gradient)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 1, (int[]){3}, true, 1, -1, 1);
    /* The same tape twice: L = sum(2*3x), dL/dx = 6 each time. */
    hl_tensor *loss = hl_sum(g, hl_scale(g, hl_scale(g, x, 3), 2));
    ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
    ck_assert(x->grad[0] == 6);
    ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
    ck_assert_msg(x->grad[0] == 12, "second backward left %g, not 6 + 6", (double)x->grad[0]);
    /* A new loss recorded on the same tape: only its gradient is added. */
    hl_tensor_zero_grad(x);
    ck_assert_int_eq(hl_graph_backward(g, hl_sum(g, hl_scale(g, x, 2))), HL_OK);
    ck_assert_int_eq(hl_graph_backward(g, hl_sum(g, hl_scale(g, x, 5))), HL_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(x->grad[i] == 7, "x->grad[%d] = %g, not 2 + 5", i, (double)x->grad[i]);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_no_grad_records_nothing)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 1, (int[]){5}, true, 1, -1, 1);
    ck_assert(hl_graph_set_grad_enabled(g, false));
    hl_tensor *y = hl_sum(g, hl_scale(g, x, 2));
    ck_assert_uint_eq(g->n_nodes, 0);
    ck_assert(!y->requires_grad);
    ck_assert_int_ne(hl_graph_backward(g, y), HL_OK);
    ck_assert_ptr_nonnull(strstr(hl_graph_message(g), "does not require grad"));
    ck_assert(!hl_graph_set_grad_enabled(g, true));
    /* Inputs without requires_grad record nothing either. */
    hl_graph_reset(g);
    hl_tensor *c = tu_random("c", 1, (int[]){5}, false, 2, -1, 1);
    hl_scale(g, c, 2);
    ck_assert_uint_eq(g->n_nodes, 0);
    hl_tensor_free(x);
    hl_tensor_free(c);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_backward_needs_one_element)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){2, 3}, true, 1, -1, 1);
    ck_assert_int_eq(hl_graph_backward(g, hl_scale(g, x, 2)), HL_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(hl_graph_message(g), "(2,3)"));
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

/* A tensor recorded on one graph is refused by another's ops and backward:
 * its backward would never run there, and the gradient stopped without a
 * word (hl_graph_backward returned HL_OK with the leaf's gradient 0). */
START_TEST(test_other_graphs_tensors_refused)
{
    hl_graph *g1 = hl_graph_new(0), *g2 = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 1, (int[]){3}, true, 1, -1, 1);
    hl_tensor *y = hl_scale(g1, x, 2);
    hl_tensor *loss = hl_sum(g1, y);
    ck_assert_int_eq(hl_graph_backward(g2, loss), HL_ERR_ARG);
    ck_assert_msg(strstr(hl_graph_message(g2), "was recorded on another graph"), "%s",
                  hl_graph_message(g2));
    hl_graph_reset(g2);
    ck_assert(hl_tensor_is_poison(hl_sum(g2, y)));
    ck_assert_msg(strstr(hl_graph_message(g2), "sum: input 0") &&
                      strstr(hl_graph_message(g2), "was recorded on another graph"),
                  "%s", hl_graph_message(g2));
    /* Leaves and values of a graph without grad belong to no graph. */
    hl_graph_reset(g2);
    ck_assert_int_eq(hl_graph_backward(g2, hl_sum(g2, x)), HL_OK);
    ck_assert_int_eq(hl_graph_backward(g1, loss), HL_OK);
    ck_assert(x->grad[0] == 3);
    hl_tensor_free(x);
    hl_graph_free(g1);
    hl_graph_free(g2);
}
END_TEST

START_TEST(test_errors_are_sticky_and_reset_clears)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *a = tu_random("a", 2, (int[]){2, 3}, true, 1, -1, 1);
    hl_tensor *b = tu_random("b", 1, (int[]){4}, true, 2, -1, 1);
    hl_tensor *bad = hl_add(g, a, b);
    hl_tensor *later = hl_sum(g, hl_scale(g, bad, 2));
    tu_expect_error(g, later, "add", "(4)", "(2,3)", NULL);
    ck_assert_int_eq(hl_graph_backward(g, later), HL_ERR_SHAPE);
    hl_graph_reset(g);
    ck_assert(!hl_graph_failed(g));
    ck_assert(!hl_tensor_is_poison(hl_sum(g, a)));
    hl_tensor_free(a);
    hl_tensor_free(b);
    hl_graph_free(g);
}
END_TEST

/* An intermediate's gradient is handed on once its op's backward has run:
 * NULL afterwards unless retained, and its buffer serves a later gradient of
 * the same size, so a chain of n ops holds a few gradients, not n. */
START_TEST(test_backward_recycles_intermediate_gradients)
{
    enum { N = 64, OPS = 12 };
    const size_t bytes = (size_t)N * N * sizeof(hl_real);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){N, N}, true, 1, -1, 1);
    hl_tensor *kept = NULL, *dropped = NULL, *h = x;
    for (int i = 0; i < OPS; i++) {
        h = hl_scale(g, h, 0.5);
        if (i == OPS / 2)
            kept = h;
        if (i == OPS / 2 + 1)
            dropped = h;
    }
    hl_tensor_retain_grad(kept);
    hl_tensor *loss = hl_sum(g, h);
    const size_t forward = g->arena.used;
    ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
    /* Without reuse backward would add OPS gradients of `bytes` each. */
    ck_assert_uint_lt(g->arena.used - forward, 3 * bytes + 4096);
    ck_assert_ptr_null(dropped->grad);
    ck_assert_ptr_null(h->grad);
    ck_assert_ptr_nonnull(kept->grad);
    /* d loss / d kept = 0.5^(ops after it) */
    const hl_real expect = (hl_real)ldexp(1, -(OPS - 1 - OPS / 2));
    for (int i = 0; i < N * N; i++) {
        ck_assert(kept->grad[i] == expect);
        ck_assert(x->grad[i] == (hl_real)ldexp(1, -OPS));
    }
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_steps_allocate_nothing_after_the_first)
{
    hl_graph *g = hl_graph_new(4096); /* small, so the first step must grow it */
    hl_tensor *x = tu_random("x", 2, (int[]){64, 64}, true, 1, -1, 1);
    size_t mallocs_after_first = 0;
    for (int step = 0; step < 4; step++) {
        hl_tensor *h = x;
        for (int i = 0; i < 10; i++)
            h = hl_add(g, hl_scale(g, h, 0.5), x);
        ck_assert_int_eq(hl_graph_backward(g, hl_mean(g, h)), HL_OK);
        hl_graph_reset(g);
        if (step == 0)
            mallocs_after_first = g->arena.n_mallocs;
    }
    ck_assert_uint_gt(mallocs_after_first, 1);
    ck_assert_uint_eq(g->arena.n_mallocs, mallocs_after_first);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_first_nonfinite_names_the_op)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 3, (int[]){1, 3, 3}, true, 1, -1, 1);
    /* Masks write -inf on purpose and are not blamed; the softmax after them
     * is finite. */
    hl_tensor *masked = hl_mask_causal(g, hl_scale(g, x, 2));
    hl_tensor *p = hl_softmax(g, masked);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    ck_assert_uint_eq(g->n_nodes, 3);
    ck_assert(isinf(masked->data[1]) && masked->data[1] < 0);
    ck_assert(isfinite(p->data[1]));
    ck_assert_ptr_null(hl_graph_first_nonfinite(g));
    /* A NaN entering through the data: the first op computing with it is named. */
    x->data[4] = NAN;
    hl_graph_reset(g);
    p = hl_sum(g, hl_gelu(g, hl_scale(g, x, 2)));
    const hl_node *bad = hl_graph_first_nonfinite(g);
    ck_assert_ptr_nonnull(bad);
    ck_assert_str_eq(hl_node_name(bad), "scale");
    ck_assert(isnan(p->data[0]));
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

Suite *graph_suite(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("graph");
    tcase_add_test(tc, test_backward_accumulates_over_uses);
    tcase_add_test(tc, test_second_backward_adds_only_its_own_gradient);
    tcase_add_test(tc, test_no_grad_records_nothing);
    tcase_add_test(tc, test_backward_needs_one_element);
    tcase_add_test(tc, test_errors_are_sticky_and_reset_clears);
    tcase_add_test(tc, test_other_graphs_tensors_refused);
    tcase_add_test(tc, test_backward_recycles_intermediate_gradients);
    tcase_add_test(tc, test_steps_allocate_nothing_after_the_first);
    tcase_add_test(tc, test_first_nonfinite_names_the_op);
    suite_add_tcase(s, tc);
    return s;
}
