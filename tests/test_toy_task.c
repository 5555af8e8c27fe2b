/* Tests for tasks/toy_task.c: the sequence generator follows docs/toy-task.md,
 * and the detectors score the copied segment as the task defines it. */
#include <math.h>
#include <string.h>

#include "analysis/detectors.h"
#include "tasks/toy_task.h"
#include "tests/testutil.h"

START_TEST(test_sequences_follow_the_recipe)
{
    hl_toy_batch *b = hl_toy_batch_new(500);
    hl_rng rng;
    hl_rng_seed(&rng, 1);
    hl_toy_sample(b, &rng);
    const int T = HL_TOY_T;
    int lengths_seen[13] = {0};
    for (int i = 0; i < b->B; i++) {
        const int32_t *x = b->tokens + i * T;
        const int s = b->src[i], d = b->dst[i], L = b->len[i];
        ck_assert_int_eq(x[0], HL_TOY_BOS);
        ck_assert(L >= 4 && L <= 12);
        ck_assert(s >= 1 && s <= T - 2 * L);
        ck_assert(d >= s + L && d <= T - L);
        lengths_seen[L]++;
        for (int t = 1; t < T; t++)
            ck_assert(x[t] >= 0 && x[t] < HL_TOY_VOCAB);
        for (int k = 0; k < L; k++)
            ck_assert_int_eq(x[d + k], x[s + k]);
        for (int p = 0; p < T; p++) {
            const int32_t scored = b->scored[i * T + p], other = b->other[i * T + p];
            if (p == T - 1) {
                ck_assert(scored == HL_TOY_IGNORE && other == HL_TOY_IGNORE);
                continue;
            }
            /* Exactly one of the two losses counts each target. */
            ck_assert((scored == HL_TOY_IGNORE) != (other == HL_TOY_IGNORE));
            ck_assert_int_eq(scored != HL_TOY_IGNORE, p >= d && p <= d + L - 2);
            ck_assert_int_eq(scored != HL_TOY_IGNORE ? scored : other, x[p + 1]);
        }
    }
    for (int L = 4; L <= 12; L++)
        ck_assert_int_gt(lengths_seen[L], 0);
    /* Same seed, same data. */
    hl_toy_batch *again = hl_toy_batch_new(500);
    hl_rng_seed(&rng, 1);
    hl_toy_sample(again, &rng);
    ck_assert(memcmp(b->tokens, again->tokens, sizeof(int32_t) * 500 * T) == 0);
    hl_toy_batch_free(b);
    hl_toy_batch_free(again);
}
END_TEST

/* The detectors (analysis/detectors.h) on the toy task's repeats, on
 * hand-made maps: heads that look one back, uniformly, two back and at the
 * token after the copied segment's first occurrence. */
START_TEST(test_detectors_on_the_copied_segment)
{
    const int T = HL_TOY_T, H = 4;
    hl_toy_batch *b = hl_toy_batch_new(2);
    hl_rng rng;
    hl_rng_seed(&rng, 2);
    hl_toy_sample(b, &rng);
    hl_error err = {0};
    hl_eval_set *set = hl_toy_eval_set(b, 2, &err);
    ck_assert_msg(set && set->repeats, "%s", err.message);
    hl_tensor *attn = hl_tensor_new("attn", 4, (int[]){2, H, T, T}, false);
    for (int i = 0; i < 2; i++) {
        const hl_repeat r = set->repeats[i];
        const int s = b->src[i], d = b->dst[i], L = b->len[i];
        ck_assert(r.begin == d && r.end == d + L - 1 && r.lag == d - s);
        for (int t = 0; t < T; t++) {
            hl_real *row[4];
            for (int h = 0; h < H; h++)
                row[h] = attn->data + (((size_t)i * H + h) * T + t) * T;
            row[0][t > 0 ? t - 1 : 0] = 1; /* previous token */
            for (int j = 0; j <= t; j++)
                row[1][j] = (hl_real)1 / (t + 1); /* uniform */
            row[2][t > 1 ? t - 2 : 0] = 1;         /* two back */
            /* induction on the scored rows, BOS elsewhere */
            row[3][t >= d && t <= d + L - 2 ? s + (t - d) + 1 : 0] = 1;
        }
    }
    hl_detector_sums sums;
    hl_detector_sums_begin(&sums, H);
    ck_assert_int_eq(hl_detector_sums_add(&sums, b->tokens, attn, set->repeats, &err), HL_OK);
    hl_head_scores sc[4];
    hl_detector_sums_finish(&sums, sc);
    ck_assert(fabs(sc[0].v[HL_DETECT_PREVIOUS] - 1) < 1e-12);
    ck_assert(fabs(sc[0].v[HL_DETECT_ENTROPY]) < 1e-12);
    ck_assert(sc[0].v[HL_DETECT_TWO_BACK] < 1e-12);
    ck_assert(fabs(sc[2].v[HL_DETECT_TWO_BACK] - 1) < 1e-12);
    ck_assert(fabs(sc[3].v[HL_DETECT_INDUCTION] - 1) < 1e-12);
    ck_assert(sc[3].v[HL_DETECT_PREVIOUS] < 0.2);
    ck_assert(sc[0].v[HL_DETECT_INDUCTION] < 0.2);
    /* The uniform head: mean over t >= 1 of ln(t+1) nats. */
    double entropy = 0;
    for (int t = 1; t < T; t++)
        entropy += log(t + 1.0);
    ck_assert(fabs(sc[1].v[HL_DETECT_ENTROPY] - entropy / (T - 1)) < 1e-6);

    /* A repeat that points before the sequence is refused, by the detectors
     * and by the set's check. */
    set->repeats[1].lag = set->repeats[1].begin + 1;
    hl_detector_sums_begin(&sums, H);
    ck_assert_int_eq(hl_detector_sums_add(&sums, b->tokens, attn, set->repeats, &err),
                     HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "sequence 1's repeat"), "%s", err.message);
    hl_error_clear(&err);
    hl_gpt_config cfg = hl_toy_gpt_config();
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_int_eq(hl_eval_set_check(set, m, &err), HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "sequence 1's repeat"), "%s", err.message);
    hl_gpt_free(m);
    hl_eval_set_free(set);
    hl_tensor_free(attn);
    hl_toy_batch_free(b);
}
END_TEST

Suite *toy_task_suite(void)
{
    Suite *s = suite_create("toy_task");
    TCase *tc = tcase_create("toy_task");
    tcase_add_test(tc, test_sequences_follow_the_recipe);
    tcase_add_test(tc, test_detectors_on_the_copied_segment);
    suite_add_tcase(s, tc);
    return s;
}
