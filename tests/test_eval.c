/* Tests for train/eval.c: text windows (evenly spaced, the last ending at the
 * text's last token, a text too short refused), and the per-position loss and
 * in-context-learning score against a direct computation on a small model. */
#include <math.h>
#include <string.h>

#include "tests/head_models.h"

#include "tests/testutil.h"

START_TEST(test_text_windows_and_bad_text)
{
    const int32_t text[] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'};
    hl_error err = {0};
    hl_eval_set *w = hl_eval_text_windows(text, 10, 3, 4, 2, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->tokens[0], 'a');
    ck_assert_int_eq(w->targets[0][3], 'e');
    ck_assert_int_eq(w->tokens[2 * 4], 'f'); /* the last window ends at the last token */
    ck_assert_int_eq(w->targets[0][2 * 4 + 3], 'j');
    hl_eval_set_free(w);
    ck_assert_ptr_null(hl_eval_text_windows(text, 4, 3, 4, 2, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "4 tokens"));
}
END_TEST

/* Repeated text: each window followed by itself, the second half's targets
 * in "repeat" and the first half's (but its first token) in "first"; the
 * bytes each position predicts as the mean weight of its targets. */
START_TEST(test_repeat_windows_and_position_weights)
{
    const int32_t text[] = {10, 11, 12, 13, 14, 15, 16};
    hl_error err = {0};
    hl_eval_set *w = hl_eval_repeat_windows(text, 7, 2, 3, 2, &err);
    ck_assert_msg(w, "%s", err.message);
    ck_assert_int_eq(w->T, 6);
    ck_assert_str_eq(w->group_names[0], "repeat");
    ck_assert_str_eq(w->group_names[1], "first");
    const int32_t x1[] = {14, 15, 16, 14, 15, 16}; /* the last window ends at the end */
    ck_assert(!memcmp(w->tokens + 6, x1, sizeof x1));
    const int32_t repeat[] = {-1, -1, 14, 15, 16, -1}, first[] = {15, 16, -1, -1, -1, -1};
    ck_assert(!memcmp(w->targets[0] + 6, repeat, sizeof repeat));
    ck_assert(!memcmp(w->targets[1] + 6, first, sizeof first));
    double token_weight[17] = {0}, position_weight[6];
    for (int v = 10; v < 17; v++)
        token_weight[v] = v - 9;
    hl_eval_position_weights(w, token_weight, position_weight);
    ck_assert(isnan(position_weight[0]) && isnan(position_weight[5]));
    ck_assert_double_eq_tol(position_weight[2], (1 + 5) / 2.0, 1e-12); /* tokens 10 and 14 */
    ck_assert_double_eq_tol(position_weight[4], (3 + 7) / 2.0, 1e-12);
    /* Over a whole group: "repeat" 10..12 and 14..16, "first" 11, 12, 15, 16. */
    ck_assert_double_eq_tol(hl_eval_mean_weight(w, 0, token_weight), 4.0, 1e-12);
    ck_assert_double_eq_tol(hl_eval_mean_weight(w, 1, token_weight), 4.5, 1e-12);
    hl_eval_set_free(w);
    ck_assert_ptr_null(hl_eval_repeat_windows(text, 2, 2, 3, 2, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "2 tokens do not hold 3 to repeat"));
}
END_TEST

/* hl_eval_position_loss against each position's cross-entropy computed here
 * from one forward pass's logits; hl_eval_icl_score against the two means over
 * hl_eval_icl_ranges, and the ranges for T = 256 as documented. */
START_TEST(test_position_loss_and_icl_score)
{
    hl_gpt *m = hm_random_model(2, 2, 8, 11); /* vocab 11 in, 9 out, n_ctx 7 */
    const int n = 5, T = 7;
    hl_error err = {0};
    hl_eval_set *set = hl_eval_set_new(n, T, 1, 2, &err);
    ck_assert_msg(set, "%s", err.message);
    for (int i = 0; i < n * T; i++) {
        set->tokens[i] = (int32_t)((i * 5 + 2) % 11);
        set->targets[0][i] = i % T == 3 ? HL_EVAL_IGNORE : (int32_t)((i * 7 + 1) % 9);
    }
    double got[7];
    hl_eval_result r;
    ck_assert_int_eq(hl_eval_position_loss(m, set, NULL, got, &r, &err), HL_OK);
    hl_graph *g = hl_graph_new(0);
    hl_graph_set_grad_enabled(g, false);
    hl_tensor *logits = hl_gpt_forward(g, m, set->tokens, n, T, NULL);
    double want[7] = {0}, total = 0;
    for (int i = 0; i < n * T; i++) {
        const int32_t y = set->targets[0][i];
        if (y == HL_EVAL_IGNORE)
            continue;
        const hl_real *row = logits->data + (size_t)i * 9;
        double sum = 0;
        for (int v = 0; v < 9; v++)
            sum += exp((double)row[v]);
        want[i % T] += (log(sum) - (double)row[y]) / n;
        total += (log(sum) - (double)row[y]) / (n * (T - 1));
    }
    for (int t = 0; t < T; t++) {
        if (t == 3) {
            ck_assert(isnan(got[t]));
            continue;
        }
        ck_assert_msg(fabs(got[t] - want[t]) < 1e-5, "position %d: %g, wanted %g", t, got[t],
                      want[t]);
    }
    ck_assert(fabs(r.loss[0] - total) < 1e-5);
    hl_graph_free(g);

    int e0, e1, l0, l1;
    hl_eval_icl_ranges(256, &e0, &e1, &l0, &l1);
    ck_assert(e0 == 40 && e1 == 61 && l0 == 199 && l1 == 250);
    double loss[256];
    for (int t = 0; t < 256; t++)
        loss[t] = t < 61 ? 3 + 0.01 * t : 2 - 0.001 * t;
    double early = 0, late = 0;
    for (int t = 40; t < 61; t++)
        early += loss[t] / 21;
    for (int t = 199; t < 250; t++)
        late += loss[t] / 51;
    ck_assert(fabs(hl_eval_icl_score(loss, NULL, 256) - (late - early)) < 1e-12);
    /* T 8: the early range [1, 1) is empty (it was 0/0); T 9 has one position */
    ck_assert(isnan(hl_eval_icl_score(loss, NULL, 7)) && isnan(hl_eval_icl_score(loss, NULL, 8)));
    ck_assert(!isnan(hl_eval_icl_score(loss, NULL, 9)));
    /* Per byte: each range's loss over its bytes. */
    double bytes[256], early_bytes = 0, late_bytes = 0;
    for (int t = 0; t < 256; t++)
        bytes[t] = 1 + (t % 5) * 0.5;
    early = late = 0;
    for (int t = 40; t < 61; t++) {
        early += loss[t];
        early_bytes += bytes[t];
    }
    for (int t = 199; t < 250; t++) {
        late += loss[t];
        late_bytes += bytes[t];
    }
    ck_assert(fabs(hl_eval_icl_score(loss, bytes, 256) -
                   (late / late_bytes - early / early_bytes)) < 1e-12);
    hl_eval_set_free(set);
    hl_gpt_free(m);
}
END_TEST

Suite *eval_suite(void)
{
    Suite *s = suite_create("eval");
    TCase *tc = tcase_create("eval");
    tcase_add_test(tc, test_text_windows_and_bad_text);
    tcase_add_test(tc, test_repeat_windows_and_position_weights);
    tcase_add_test(tc, test_position_loss_and_icl_score);
    suite_add_tcase(s, tc);
    return s;
}
