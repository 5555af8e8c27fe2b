/* Tests for ops/op_table.c: the table generated from core/op_list.h has a
 * usable entry for every op id. */
#include <string.h>

#include "ops/internal.h"
#include "tests/testutil.h"

START_TEST(test_op_table_entries)
{
    for (int i = 0; i < HL_OP_COUNT; i++) {
        const hl_op_info *info = hl_op_get((hl_op)i);
        ck_assert_msg(info->name && *info->name, "op %d has no name", i);
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(info->name, hl_op_get((hl_op)j)->name) != 0,
                          "ops %d and %d are both called %s", j, i, info->name);
        ck_assert_msg(info->n_inputs >= 1 && info->n_inputs <= HL_NODE_MAX_INPUTS,
                      "%s records %d inputs (1..%d)", info->name, info->n_inputs,
                      HL_NODE_MAX_INPUTS);
        ck_assert_msg(!(info->flags & ~(unsigned)HL_OP_EMITS_INF), "%s: unknown flags %#x",
                      info->name, info->flags);
    }
}
END_TEST

/* Every op but argmax is differentiable, so each needs its backward kernel;
 * a new op without one must be listed here on purpose. */
START_TEST(test_op_table_backward)
{
    for (int i = 0; i < HL_OP_COUNT; i++) {
        const hl_op_info *info = hl_op_get((hl_op)i);
        const bool differentiable = i != HL_OP_ARGMAX;
        ck_assert_msg(differentiable == (info->backward != NULL), "%s: backward %s", info->name,
                      info->backward ? "given, but it is not differentiable" : "missing");
    }
}
END_TEST

Suite *op_table_suite(void)
{
    Suite *s = suite_create("op_table");
    TCase *tc = tcase_create("op_table");
    tcase_add_test(tc, test_op_table_entries);
    tcase_add_test(tc, test_op_table_backward);
    suite_add_tcase(s, tc);
    return s;
}
