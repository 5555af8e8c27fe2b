/* Tests for data/window_copy.c: a copy lands where it says in the inputs and
 * the targets, draws stay inside the window at the asked frequency, and no
 * copies draw nothing. */
#include "tests/testutil.h"

/* A window of T + 1 tokens 100, 101, ... as inputs and targets. */
static void window(int32_t *x, int32_t *y, int T)
{
    for (int i = 0; i < T; i++) {
        x[i] = 100 + i;
        y[i] = 101 + i;
    }
}

START_TEST(test_window_copy_apply)
{
    enum { T = 10 };
    int32_t x[T], y[T];
    /* Tokens 1..3 again at 6..8: the inputs there, and the targets of
     * positions 5..7, are 101..103. */
    window(x, y, T);
    hl_window_copy_apply(x, y, T, (hl_window_copy){1, 6, 3});
    const int32_t x1[T] = {100, 101, 102, 103, 104, 105, 101, 102, 103, 109};
    const int32_t y1[T] = {101, 102, 103, 104, 105, 101, 102, 103, 109, 110};
    ck_assert_mem_eq(x, x1, sizeof x);
    ck_assert_mem_eq(y, y1, sizeof y);
    /* A copy ending at the last token (position T) changes the last target
     * only; one starting at token 0 reads the first input. */
    window(x, y, T);
    hl_window_copy_apply(x, y, T, (hl_window_copy){0, 9, 2});
    const int32_t x2[T] = {100, 101, 102, 103, 104, 105, 106, 107, 108, 100};
    const int32_t y2[T] = {101, 102, 103, 104, 105, 106, 107, 108, 100, 101};
    ck_assert_mem_eq(x, x2, sizeof x);
    ck_assert_mem_eq(y, y2, sizeof y);
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {2, 3, 4, 5};
    hl_window_copy_apply(a, b, 4, (hl_window_copy){2, 4, 0}); /* length 0: nothing */
    ck_assert_int_eq(b[3], 5);
    hl_window_copy_apply(a, b, 4, (hl_window_copy){0, 3, 2}); /* "1 2" over tokens 3, 4 */
    const int32_t a3[4] = {1, 2, 3, 1}, b3[4] = {2, 3, 1, 2};
    ck_assert_mem_eq(a, a3, sizeof a);
    ck_assert_mem_eq(b, b3, sizeof b);
}
END_TEST

START_TEST(test_window_copy_draw)
{
    hl_rng rng, before;
    hl_rng_seed(&rng, 7);
    before = rng;
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(hl_window_copy_draw(&rng, 65, 16, 0).length, 0);
    ck_assert_mem_eq(&rng, &before, sizeof rng); /* nothing drawn */
    ck_assert_int_eq(hl_window_copy_draw(&rng, 10, 6, 1).length, 0); /* does not fit */
    enum { N = 20000, n = 65, L = 16 };
    int copied = 0, first_from = 0, last_to = 0;
    for (int i = 0; i < N; i++) {
        const hl_window_copy c = hl_window_copy_draw(&rng, n, L, 0.3);
        if (!c.length)
            continue;
        copied++;
        ck_assert_int_eq(c.length, L);
        ck_assert_int_ge(c.from, 0);
        ck_assert_int_ge(c.to, c.from + L);
        ck_assert_int_le(c.to + L, n);
        first_from += c.from == 0;
        last_to += c.to + L == n;
    }
    ck_assert_msg(copied > 0.28 * N && copied < 0.32 * N, "%d copies in %d windows at 0.3",
                  copied, N);
    ck_assert_msg(first_from > 0 && last_to > 0, "the window's ends are never reached");
    /* A span of half the window: the only place is its two halves. */
    const hl_window_copy half = hl_window_copy_draw(&rng, 64, 32, 1);
    ck_assert_int_eq(half.from, 0);
    ck_assert_int_eq(half.to, 32);
}
END_TEST

Suite *window_copy_suite(void)
{
    Suite *s = suite_create("window_copy");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_window_copy_apply);
    tcase_add_test(tc, test_window_copy_draw);
    suite_add_tcase(s, tc);
    return s;
}
