/* Tests for core/tensor.c and core/error.c. */
#include <string.h>

#include "tests/testutil.h"

START_TEST(test_tensor_new)
{
    hl_tensor *t = hl_tensor_new("w", 3, (int[]){2, 3, 4}, true);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->name, "w");
    ck_assert_uint_eq(t->numel, 24);
    ck_assert_ptr_nonnull(t->grad);
    ck_assert(t->data[23] == 0 && t->grad[23] == 0);
    ck_assert_uint_eq(hl_tensor_span(t, 1, 3), 12);
    char buf[HL_SHAPE_STR_MAX];
    ck_assert_str_eq(hl_shape_str(t, buf), "(2,3,4)");
    hl_tensor_fill(t, 2.5);
    ck_assert(t->data[7] == (hl_real)2.5);
    hl_tensor_free(t);
}
END_TEST

START_TEST(test_tensor_bad_shapes)
{
    hl_error err = {0};
    ck_assert_ptr_null(hl_tensor_new_checked("x", 5, (int[]){1, 1, 1, 1, 1}, false, &err));
    ck_assert_int_eq(err.status, HL_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(err.message, "rank 5"));
    ck_assert_ptr_null(hl_tensor_new("x", 2, (int[]){3, 0}, false));
    ck_assert_ptr_null(hl_tensor_new("x", 2, (int[]){-1, 3}, false));
    ck_assert_ptr_null(hl_tensor_new("x", 0, (int[]){1}, false));
    /* The element count must not overflow size_t. */
    ck_assert_ptr_null(hl_tensor_new("x", 4, (int[]){1 << 30, 1 << 30, 1 << 30, 1 << 30}, false));
}
END_TEST

START_TEST(test_error_keeps_first)
{
    hl_error err = {0};
    ck_assert(!hl_error_failed(&err));
    ck_assert_int_eq(hl_error_set(&err, HL_ERR_SHAPE, "first %d", 1), HL_ERR_SHAPE);
    ck_assert_int_eq(hl_error_set(&err, HL_ERR_IO, "second"), HL_ERR_SHAPE);
    ck_assert_str_eq(err.message, "first 1");
    ck_assert_str_eq(hl_status_name(err.status), "shape");
    hl_error_clear(&err);
    ck_assert(!hl_error_failed(&err));
}
END_TEST

Suite *tensor_suite(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("tensor");
    tcase_add_test(tc, test_tensor_new);
    tcase_add_test(tc, test_tensor_bad_shapes);
    tcase_add_test(tc, test_error_keeps_first);
    suite_add_tcase(s, tc);
    return s;
}
