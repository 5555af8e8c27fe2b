/* Tests for core/params.c. */
#include <stdint.h>

#include "tests/testutil.h"

START_TEST(test_params_one_block)
{
    hl_params *p = hl_params_new();
    hl_tensor *w = hl_params_add(p, "fc.weight", 2, (int[]){3, 5});
    hl_tensor *b = hl_params_add(p, "fc.bias", 1, (int[]){3});
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_null(w->data);
    ck_assert_int_eq(hl_params_commit(p), HL_OK);
    ck_assert(w->requires_grad);
    ck_assert_ptr_eq(w->data, hl_params_values(p));
    ck_assert((uintptr_t)b->data % HL_ARENA_ALIGN == 0);
    ck_assert(b->data >= w->data + w->numel);
    ck_assert(b->data + b->numel <= hl_params_values(p) + hl_params_count(p));
    ck_assert_ptr_eq(hl_params_find(p, "fc.bias"), b);
    ck_assert_ptr_null(hl_params_find(p, "nope"));
    ck_assert_uint_eq(hl_params_n_tensors(p), 2);
    b->grad[2] = 4;
    hl_params_zero_grad(p);
    ck_assert(b->grad[2] == 0);
    hl_params_free(p);
}
END_TEST

START_TEST(test_params_errors)
{
    hl_params *p = hl_params_new();
    ck_assert_ptr_nonnull(hl_params_add(p, "a", 1, (int[]){2}));
    ck_assert_ptr_null(hl_params_add(p, "a", 1, (int[]){2}));
    ck_assert_str_eq(hl_params_error(p)->message, "params: duplicate name a");
    ck_assert_int_ne(hl_params_commit(p), HL_OK);
    hl_params_free(p);

    p = hl_params_new();
    ck_assert_ptr_null(hl_params_add(p, "bad", 2, (int[]){2, 0}));
    ck_assert_int_eq(hl_params_error(p)->status, HL_ERR_SHAPE);
    hl_params_free(p);

    p = hl_params_new();
    hl_params_add(p, "a", 1, (int[]){2});
    ck_assert_int_eq(hl_params_commit(p), HL_OK);
    ck_assert_ptr_null(hl_params_add(p, "b", 1, (int[]){2}));
    ck_assert_int_eq(hl_params_error(p)->status, HL_ERR_STATE);
    hl_params_free(p);
}
END_TEST

Suite *params_suite(void)
{
    Suite *s = suite_create("params");
    TCase *tc = tcase_create("params");
    tcase_add_test(tc, test_params_one_block);
    tcase_add_test(tc, test_params_errors);
    suite_add_tcase(s, tc);
    return s;
}
