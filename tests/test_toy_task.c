/* Tests for tasks/toy_task.c: the sequence generator follows TOYTASK.md and
 * the head scores measure what they claim on hand-made attention maps. */
#include <math.h>
#include <string.h>

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

START_TEST(test_scores_on_known_patterns)
{
    const int T = HL_TOY_T, H = 3;
    hl_toy_batch *b = hl_toy_batch_new(2);
    hl_rng rng;
    hl_rng_seed(&rng, 2);
    hl_toy_sample(b, &rng);
    hl_tensor *attn = hl_tensor_new("attn", 4, (int[]){2, H, T, T}, false);
    for (int i = 0; i < 2; i++)
        for (int t = 0; t < T; t++) {
            hl_real *row0 = attn->data + (((size_t)i * H + 0) * T + t) * T;
            hl_real *row1 = attn->data + (((size_t)i * H + 1) * T + t) * T;
            hl_real *row2 = attn->data + (((size_t)i * H + 2) * T + t) * T;
            row0[t > 0 ? t - 1 : 0] = 1; /* head 0: previous token */
            for (int j = 0; j <= t; j++)
                row1[j] = (hl_real)1 / (t + 1); /* head 1: uniform */
            /* head 2: induction on the copy rows, BOS elsewhere */
            const int s = b->src[i], d = b->dst[i], L = b->len[i];
            row2[t >= d && t <= d + L - 2 ? s + (t - d) + 1 : 0] = 1;
        }
    hl_toy_score_sums sums;
    hl_error err = {0};
    ck_assert_int_eq(hl_toy_scores_begin(&sums, H, &err), HL_OK);
    hl_toy_scores_add(&sums, b, attn);
    hl_toy_head_scores s[3];
    hl_toy_scores_finish(&sums, s);
    ck_assert(fabs(s[0].previous_token - 1) < 1e-12);
    ck_assert(fabs(s[0].entropy) < 1e-12);
    ck_assert(fabs(s[2].induction - 1) < 1e-12);
    ck_assert(s[2].previous_token < 0.2);
    /* The uniform head: mean over t >= 1 of ln(t+1) nats. */
    double entropy = 0;
    for (int t = 1; t < T; t++)
        entropy += log(t + 1.0);
    ck_assert(fabs(s[1].entropy - entropy / (T - 1)) < 1e-6);
    hl_tensor_free(attn);
    hl_toy_batch_free(b);
}
END_TEST

START_TEST(test_scorer_refuses_too_many_heads)
{
    hl_toy_score_sums sums;
    hl_error err = {0};
    ck_assert_int_eq(hl_toy_scores_begin(&sums, HL_TOY_MAX_HEADS + 1, &err), HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "65 heads per layer; the scorer takes 1 to 64"), "%s",
                  err.message);
    ck_assert_int_eq(sums.H, 0);
    hl_error_clear(&err);
    ck_assert_int_eq(hl_toy_scores_begin(&sums, 0, &err), HL_ERR_ARG);
    hl_error_clear(&err);
    ck_assert_int_eq(hl_toy_scores_begin(&sums, HL_TOY_MAX_HEADS, &err), HL_OK);
}
END_TEST

Suite *toy_task_suite(void)
{
    Suite *s = suite_create("toy_task");
    TCase *tc = tcase_create("toy_task");
    tcase_add_test(tc, test_sequences_follow_the_recipe);
    tcase_add_test(tc, test_scores_on_known_patterns);
    tcase_add_test(tc, test_scorer_refuses_too_many_heads);
    suite_add_tcase(s, tc);
    return s;
}
