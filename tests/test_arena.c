/* Tests for core/arena.c. */
#include <stdint.h>
#include <string.h>

#include "tests/testutil.h"

START_TEST(test_arena_alignment_and_growth)
{
    hl_arena a;
    hl_arena_init(&a, 1024);
    char *p = hl_arena_alloc(&a, 3);
    char *q = hl_arena_alloc(&a, 100);
    ck_assert_uint_eq((uintptr_t)p % HL_ARENA_ALIGN, 0);
    ck_assert_uint_eq((uintptr_t)q % HL_ARENA_ALIGN, 0);
    ck_assert(q >= p + 3);
    memset(q, 7, 100);
    /* Larger than a chunk: a new chunk, old pointers stay valid. */
    char *big = hl_arena_alloc(&a, 5000);
    ck_assert_ptr_nonnull(big);
    memset(big, 1, 5000);
    ck_assert_int_eq(q[99], 7);
    ck_assert_uint_eq(a.n_mallocs, 2);
    hl_arena_free(&a);
}
END_TEST

/* A reset keeps the chain: the same allocations land in the same places, and
 * from the second step on nothing is allocated. */
START_TEST(test_arena_reset_reuses_the_chain)
{
    hl_arena a;
    hl_arena_init(&a, 256);
    char *first[40];
    size_t after_first = 0;
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < 40; i++) {
            char *p = hl_arena_alloc(&a, 200);
            ck_assert_ptr_nonnull(p);
            if (step == 0)
                first[i] = p;
            else
                ck_assert_ptr_eq(p, first[i]);
        }
        hl_arena_reset(&a);
        if (step == 0)
            after_first = a.n_mallocs;
    }
    ck_assert_uint_gt(after_first, 1);
    ck_assert_uint_eq(a.n_mallocs, after_first);
    ck_assert_uint_eq(a.high_water, 40 * 256);
    /* A step needing more than the chain holds grows it, and keeps the rest. */
    for (int i = 0; i < 40; i++)
        ck_assert_ptr_eq(hl_arena_alloc(&a, 200), first[i]);
    const size_t held = hl_arena_capacity(&a);
    ck_assert_ptr_nonnull(hl_arena_alloc(&a, 2 * held));
    ck_assert_uint_eq(a.n_mallocs, after_first + 1);
    ck_assert_uint_ge(hl_arena_capacity(&a), 3 * held);
    hl_arena_reset(&a);
    ck_assert_ptr_eq(hl_arena_alloc(&a, 200), first[0]);
    hl_arena_free(&a);
}
END_TEST

START_TEST(test_arena_refuses_absurd_sizes)
{
    hl_arena a;
    hl_arena_init(&a, 0);
    ck_assert_ptr_null(hl_arena_alloc(&a, SIZE_MAX - 8));
    ck_assert_ptr_nonnull(hl_arena_alloc(&a, 8));
    hl_arena_free(&a);
}
END_TEST

/* Chunks of 2 MiB and more start on a huge-page boundary and span whole huge
 * pages, so transparent huge pages can back them. */
START_TEST(test_arena_large_chunks_on_huge_pages)
{
    const size_t huge = (size_t)2 << 20;
    hl_arena a;
    hl_arena_init(&a, 0);
    char *small = hl_arena_alloc(&a, 1000);
    char *big = hl_arena_alloc(&a, 3 * huge + 5);
    ck_assert_ptr_nonnull(small);
    ck_assert_ptr_nonnull(big);
    ck_assert_uint_eq((uintptr_t)big % huge, 0);
    ck_assert_uint_eq(hl_arena_capacity(&a), (1 << 20) + 4 * huge);
    memset(big, 3, 3 * huge + 5);
    ck_assert_int_eq(big[3 * huge + 4], 3);
    hl_arena_free(&a);
}
END_TEST

Suite *arena_suite(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("arena");
    tcase_add_test(tc, test_arena_alignment_and_growth);
    tcase_add_test(tc, test_arena_reset_reuses_the_chain);
    tcase_add_test(tc, test_arena_refuses_absurd_sizes);
    tcase_add_test(tc, test_arena_large_chunks_on_huge_pages);
    suite_add_tcase(s, tc);
    return s;
}
