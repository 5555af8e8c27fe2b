/* Tests for core/rng.c: reproducibility and the distributions' moments. */
#include <math.h>

#include "tests/testutil.h"

START_TEST(test_rng_same_seed_same_numbers)
{
    hl_rng a, b, c;
    hl_rng_seed(&a, 42);
    hl_rng_seed(&b, 42);
    hl_rng_seed(&c, 43);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = hl_rng_next(&a);
        ck_assert_uint_eq(x, hl_rng_next(&b));
        differ += x != hl_rng_next(&c);
    }
    ck_assert_int_gt(differ, 95);
}
END_TEST

START_TEST(test_rng_moments)
{
    hl_rng rng;
    hl_rng_seed(&rng, 7);
    const int n = 200000;
    double su = 0, sn = 0, sn2 = 0;
    int counts[10] = {0};
    for (int i = 0; i < n; i++) {
        double u = hl_rng_uniform(&rng);
        ck_assert(u >= 0 && u < 1);
        su += u;
        double z = hl_rng_normal(&rng);
        sn += z;
        sn2 += z * z;
        counts[hl_rng_below(&rng, 10)]++;
    }
    /* Tolerances: about 5 standard errors of each estimate. */
    ck_assert(fabs(su / n - 0.5) < 5 * sqrt(1.0 / 12 / n));
    ck_assert(fabs(sn / n) < 5 / sqrt(n));
    ck_assert(fabs(sn2 / n - 1) < 5 * sqrt(2.0 / n));
    for (int k = 0; k < 10; k++)
        ck_assert(fabs(counts[k] - n / 10.0) < 5 * sqrt(n * 0.09));
}
END_TEST

START_TEST(test_init_bounds)
{
    hl_rng rng;
    hl_rng_seed(&rng, 1);
    hl_tensor *t = hl_tensor_new("w", 2, (int[]){64, 16}, false);
    hl_init_xavier_uniform(t, &rng, 16, 64);
    double bound = sqrt(6.0 / 80), max = 0;
    for (size_t i = 0; i < t->numel; i++)
        max = fmax(max, fabs(t->data[i]));
    ck_assert(max <= bound && max > 0.9 * bound);
    hl_init_kaiming_uniform(t, &rng, 16);
    max = 0;
    for (size_t i = 0; i < t->numel; i++)
        max = fmax(max, fabs(t->data[i]));
    ck_assert(max <= 0.25 && max > 0.9 * 0.25);
    hl_tensor_free(t);
}
END_TEST

Suite *rng_suite(void)
{
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("rng");
    tcase_add_test(tc, test_rng_same_seed_same_numbers);
    tcase_add_test(tc, test_rng_moments);
    tcase_add_test(tc, test_init_bounds);
    suite_add_tcase(s, tc);
    return s;
}
