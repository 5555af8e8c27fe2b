/* Tests for core/pages.c: large buffers on huge-page boundaries. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/pages.h"
#include "tests/testutil.h"

static const size_t huge = (size_t)2 << 20;

START_TEST(test_pages_sizes)
{
    ck_assert_uint_eq(hl_pages_size(0), 64);
    ck_assert_uint_eq(hl_pages_size(1), 64);
    ck_assert_uint_eq(hl_pages_size(65), 128);
    ck_assert_uint_eq(hl_pages_size(huge - 1), huge);
    ck_assert_uint_eq(hl_pages_size(huge), huge);
    ck_assert_uint_eq(hl_pages_size(huge + 1), 2 * huge);
    ck_assert_uint_eq(hl_pages_size(SIZE_MAX - 8), 0);
}
END_TEST

/* Small buffers are 64-byte aligned, large ones start on a huge page; all of
 * what hl_pages_size promises can be written. */
START_TEST(test_pages_alignment)
{
    static const size_t sizes[] = {1, 100, 4096, 3 * ((size_t)2 << 20) + 5};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = hl_pages_alloc(sizes[i]);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % (sizes[i] >= huge ? huge : 64), 0);
        const size_t n = hl_pages_size(sizes[i]);
        memset(p, 7, n);
        ck_assert_int_eq(p[n - 1], 7);
        free(p);
    }
    ck_assert_ptr_null(hl_pages_alloc(SIZE_MAX - 8));
}
END_TEST

Suite *pages_suite(void)
{
    Suite *s = suite_create("pages");
    TCase *tc = tcase_create("pages");
    tcase_add_test(tc, test_pages_sizes);
    tcase_add_test(tc, test_pages_alignment);
    suite_add_tcase(s, tc);
    return s;
}
