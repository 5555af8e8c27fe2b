/* Tests for models/head_set.c: head sets and the pruned_heads record. */
#include <string.h>

#include "tests/testutil.h"

START_TEST(test_format_measures_and_truncates)
{
    hl_gpt_config cfg = hl_toy_gpt_config(); /* 2 layers of 4 heads */
    hl_head_set pruned = {0};
    pruned.on[0][1] = pruned.on[0][3] = pruned.on[1][2] = true;
    cfg.layer_heads[0] = 2;
    cfg.layer_heads[1] = 3;
    const char *want = "0:1,3;1:2";
    char full[32];
    ck_assert_int_eq(hl_pruned_heads_format(&pruned, &cfg, full, sizeof full), strlen(want));
    ck_assert_str_eq(full, want);
    /* The snprintf contract: with no buffer, the length it would need... */
    ck_assert_int_eq(hl_pruned_heads_format(&pruned, &cfg, NULL, 0), strlen(want));
    /* ...and a short buffer keeps a terminated prefix, nothing written past it. */
    char small[8];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(hl_pruned_heads_format(&pruned, &cfg, small, 4), strlen(want));
    ck_assert_str_eq(small, "0:1");
    ck_assert(small[4] == 'x');
    hl_head_set back;
    hl_error err = {0};
    ck_assert_int_eq(hl_pruned_heads_parse(full, &cfg, &back, &err), HL_OK);
    ck_assert(memcmp(&back, &pruned, sizeof back) == 0);
}
END_TEST

START_TEST(test_original_and_current_indices)
{
    hl_head_set pruned = {0};
    pruned.on[0][1] = true;
    ck_assert_int_eq(hl_head_original(&pruned, 4, 0, 1), 2);
    ck_assert_int_eq(hl_head_current(&pruned, 4, 0, 2), 1);
    ck_assert_int_eq(hl_head_current(&pruned, 4, 0, 1), -1);
    ck_assert_int_eq(hl_head_original(&pruned, 4, 0, 3), -1);
}
END_TEST

/* A record that keeps another number of heads than the model has is
 * refused, the model unchanged (it wrote outside an array before). */
START_TEST(test_set_pruned_refuses_a_mismatch)
{
    hl_gpt_config cfg = hl_toy_gpt_config(); /* 2 layers of 4 heads */
    cfg.layer_heads[0] = 3;
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_head_set pruned = {0};
    pruned.on[0][0] = true;
    ck_assert_int_eq(hl_gpt_set_pruned(m, &pruned, &err), HL_OK);
    ck_assert_int_eq(hl_gpt_head_current(m, 0, 3), 2);
    pruned.on[0][1] = true;
    ck_assert_int_eq(hl_gpt_set_pruned(m, &pruned, &err), HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "layer 0 keeps 2 of its 4 heads, but the model has 3"),
                  "%s", err.message);
    ck_assert_int_eq(hl_gpt_head_current(m, 0, 3), 2);
    hl_gpt_free(m);
}
END_TEST

Suite *head_set_suite(void)
{
    Suite *s = suite_create("head_set");
    TCase *tc = tcase_create("head_set");
    tcase_add_test(tc, test_format_measures_and_truncates);
    tcase_add_test(tc, test_original_and_current_indices);
    tcase_add_test(tc, test_set_pruned_refuses_a_mismatch);
    suite_add_tcase(s, tc);
    return s;
}
