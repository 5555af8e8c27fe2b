/* Tests for core/params.c. */
#include <omp.h>
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

/* Zero-grad clears every value when the block spans several of its parallel
 * slices and the last one is partial, at any thread count. */
START_TEST(test_params_zero_grad_every_slice)
{
    hl_params *p = hl_params_new();
    hl_params_add(p, "a", 2, (int[]){700, 1001});
    hl_params_add(p, "b", 1, (int[]){3});
    ck_assert_int_eq(hl_params_commit(p), HL_OK);
    const size_t n = hl_params_count(p);
    ck_assert_uint_ge(n, 700 * 1001 + 3);
    hl_real *grads = hl_params_grads(p);
    const int saved_threads = omp_get_max_threads();
    for (int threads = 1; threads <= 4; threads += 3) {
        omp_set_num_threads(threads);
        for (size_t i = 0; i < n; i++)
            grads[i] = (hl_real)(i % 7 + 1);
        hl_params_zero_grad(p);
        size_t nonzero = 0;
        for (size_t i = 0; i < n; i++)
            nonzero += grads[i] != 0;
        ck_assert_uint_eq(nonzero, 0);
    }
    omp_set_num_threads(saved_threads);
    hl_params_free(p);
}
END_TEST

Suite *params_suite(void)
{
    Suite *s = suite_create("params");
    TCase *tc = tcase_create("params");
    tcase_add_test(tc, test_params_one_block);
    tcase_add_test(tc, test_params_errors);
    tcase_add_test(tc, test_params_zero_grad_every_slice);
    suite_add_tcase(s, tc);
    return s;
}
