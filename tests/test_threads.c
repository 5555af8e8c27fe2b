/* Tests for train/threads.c: the tuner keeps the team whose steps are
 * fastest, notices when the machine changes, and stays off when asked. The
 * step times are made up, so the tests see the decisions, not the clock. */
#include <math.h>

#include "train/threads.h"
#include "tests/testutil.h"

/* Runs n steps whose time is cost(threads) and returns how many ran on each
 * count (index = thread count, up to 8). */
static void run_steps(hl_thread_tuner *t, int n, double (*cost)(int), int used[9])
{
    for (int i = 0; i < n; i++) {
        const int threads = hl_thread_tuner_begin(t);
        ck_assert(threads >= 1 && threads <= 8);
        used[threads]++;
        hl_thread_tuner_end(t, cost(threads));
    }
}

/* A quiet machine: twice the threads, 1.6x the speed. */
static double quiet(int threads) { return 0.01 / pow(1.6, log2(threads)); }
/* Another process on a core: any team beyond one thread waits for it. */
static double busy(int threads) { return threads == 1 ? 0.01 : 0.05; }

START_TEST(test_threads_quiet_takes_all_cores)
{
    hl_thread_tuner t;
    hl_thread_tuner_init(&t, 4);
    ck_assert_int_eq(t.n, 3); /* 1, 2, 4 */
    int used[9] = {0};
    run_steps(&t, 1000, quiet, used);
    /* Most steps on 4 threads; the others only while being timed. */
    ck_assert_msg(used[4] >= 950, "4 threads: %d of 1000 steps", used[4]);
    ck_assert(used[1] > 0 && used[2] > 0);
}
END_TEST

START_TEST(test_threads_busy_takes_one)
{
    hl_thread_tuner t;
    hl_thread_tuner_init(&t, 2);
    int used[9] = {0};
    run_steps(&t, 600, busy, used);
    /* Each visit of 2 threads ends after one slow step. */
    ck_assert_msg(used[2] <= 12, "2 threads: %d of 600 steps", used[2]);
}
END_TEST

START_TEST(test_threads_follows_the_machine)
{
    hl_thread_tuner t;
    hl_thread_tuner_init(&t, 2);
    int used[9] = {0};
    run_steps(&t, 300, quiet, used);
    ck_assert_int_eq(hl_thread_tuner_begin(&t), 2);
    /* Another process starts: within a few steps the tuner is on 1 thread. */
    int busy_used[9] = {0};
    run_steps(&t, 40, busy, busy_used);
    ck_assert_int_eq(hl_thread_tuner_begin(&t), 1);
    ck_assert_msg(busy_used[2] <= 15, "2 threads: %d of 40 busy steps", busy_used[2]);
    /* It ends: at a later visit the tuner goes back to 2. */
    int later[9] = {0};
    run_steps(&t, 2000, quiet, later);
    ck_assert_int_eq(hl_thread_tuner_begin(&t), 2);
}
END_TEST

START_TEST(test_threads_off)
{
    hl_thread_tuner t;
    hl_thread_tuner_init(&t, 1);
    ck_assert_int_eq(t.n, 0);
    ck_assert_int_eq(hl_thread_tuner_begin(&t), 0);
    hl_thread_tuner_end(&t, 1.0);
    ck_assert_int_eq(hl_thread_tuner_begin(&t), 0);
    hl_thread_tuner_init(&t, 3);
    ck_assert_int_eq(t.n, 3);
    ck_assert(t.counts[0] == 1 && t.counts[1] == 2 && t.counts[2] == 3);
}
END_TEST

Suite *threads_suite(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");
    tcase_add_test(tc, test_threads_quiet_takes_all_cores);
    tcase_add_test(tc, test_threads_busy_takes_one);
    tcase_add_test(tc, test_threads_follows_the_machine);
    tcase_add_test(tc, test_threads_off);
    suite_add_tcase(s, tc);
    return s;
}
