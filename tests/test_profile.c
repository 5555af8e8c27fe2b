/* Tests for core/profile.c and its hooks in the graph: per-op forward and
 * backward times and counts, and a profiled step's numbers unchanged. */
#include <string.h>

#include "tests/testutil.h"

/* loss = sum(gelu(linear(x, w, b)) * 2): one node each of linear, gelu,
 * scale and sum. Leaves x, w and b hold their gradients. */
static hl_tensor *small_step(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b)
{
    return hl_sum(g, hl_scale(g, hl_gelu(g, hl_linear(g, x, w, b)), 2));
}

START_TEST(test_profile_counts_and_times_each_op)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){32, 48}, false, 1, -1, 1);
    hl_tensor *w = tu_random("w", 2, (int[]){40, 48}, true, 2, -1, 1);
    hl_tensor *b = tu_random("b", 1, (int[]){40}, true, 3, -1, 1);
    hl_profile prof;
    hl_profile_clear(&prof);
    hl_graph_set_profile(g, &prof);
    for (int step = 0; step < 2; step++) {
        hl_profile_start(&prof);
        ck_assert_int_eq(hl_graph_backward(g, small_step(g, x, w, b)), HL_OK);
        hl_graph_reset(g);
    }
    const hl_op ran[] = {HL_OP_LINEAR, HL_OP_GELU, HL_OP_SCALE, HL_OP_SUM};
    for (int op = 0; op < HL_OP_COUNT; op++) {
        bool used = false;
        for (size_t i = 0; i < sizeof ran / sizeof ran[0]; i++)
            used |= (int)ran[i] == op;
        ck_assert_msg(prof.forward_calls[op] == (used ? 2 : 0) &&
                          prof.backward_calls[op] == (used ? 2 : 0),
                      "%s: %ld forward and %ld backward calls, expected %d", hl_op_name((hl_op)op),
                      prof.forward_calls[op], prof.backward_calls[op], used ? 2 : 0);
        ck_assert_msg(used ? prof.forward_seconds[op] > 0 && prof.backward_seconds[op] > 0
                           : prof.forward_seconds[op] == 0 && prof.backward_seconds[op] == 0,
                      "%s: %g s forward, %g s backward", hl_op_name((hl_op)op),
                      prof.forward_seconds[op], prof.backward_seconds[op]);
    }
    /* Gradients off: the ops are timed, not counted; the stop ends the last. */
    hl_profile_clear(&prof);
    hl_graph_set_grad_enabled(g, false);
    hl_profile_start(&prof);
    small_step(g, x, w, b);
    const double sum_before_stop = prof.forward_seconds[HL_OP_SUM];
    hl_profile_stop(&prof);
    ck_assert(prof.forward_seconds[HL_OP_LINEAR] > 0 && prof.forward_calls[HL_OP_LINEAR] == 0);
    ck_assert(sum_before_stop == 0 && prof.forward_seconds[HL_OP_SUM] > 0);
    hl_graph_set_profile(g, NULL);
    hl_tensor_free(x);
    hl_tensor_free(w);
    hl_tensor_free(b);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_profiled_step_has_the_same_bits)
{
    hl_tensor *x = tu_random("x", 2, (int[]){17, 33}, false, 4, -1, 1);
    hl_tensor *w = tu_random("w", 2, (int[]){29, 33}, true, 5, -1, 1);
    hl_tensor *b = tu_random("b", 1, (int[]){29}, true, 6, -1, 1);
    hl_real plain_loss, plain_grad[29 * 33];
    hl_profile prof;
    hl_profile_clear(&prof);
    for (int profiled = 0; profiled < 2; profiled++) {
        hl_graph *g = hl_graph_new(0);
        hl_graph_set_profile(g, profiled ? &prof : NULL);
        hl_tensor_zero_grad(w);
        hl_tensor *loss = small_step(g, x, w, b);
        ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
        if (!profiled) {
            plain_loss = loss->data[0];
            memcpy(plain_grad, w->grad, sizeof plain_grad);
        } else {
            ck_assert(memcmp(&plain_loss, loss->data, sizeof plain_loss) == 0);
            ck_assert(memcmp(plain_grad, w->grad, sizeof plain_grad) == 0);
        }
        hl_graph_free(g);
    }
    ck_assert(prof.backward_calls[HL_OP_LINEAR] == 1);
    hl_tensor_free(x);
    hl_tensor_free(w);
    hl_tensor_free(b);
}
END_TEST

START_TEST(test_op_names_follow_the_list)
{
    ck_assert_str_eq(hl_op_name(HL_OP_LINEAR), "linear");
    ck_assert_str_eq(hl_op_name(HL_OP_CROSS_ENTROPY_SOFTCAP), "cross_entropy_softcap");
    ck_assert_str_eq(hl_op_name(HL_OP_COUNT), "?");
}
END_TEST

Suite *profile_suite(void)
{
    Suite *s = suite_create("profile");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_profile_counts_and_times_each_op);
    tcase_add_test(tc, test_profiled_step_has_the_same_bits);
    tcase_add_test(tc, test_op_names_follow_the_list);
    suite_add_tcase(s, tc);
    return s;
}
