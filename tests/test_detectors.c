/* Tests for analysis/detectors.c: each detector on hand-made attention maps
 * that force its pattern, and every detector of a model whose weights force a
 * previous-token head and a copying (or anti-copying) OV circuit, which also
 * tests analysis/copying.c and the roles taken (analysis/roles.c, also on
 * its own: the labeller every program uses). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/copying.h"
#include "analysis/detectors.h"
#include "analysis/roles.h"
#include "io/safetensors.h"
#include "tasks/probe.h"
#include "tests/head_models.h"
#include "tests/testutil.h"

/* A (1,1,T,T) attention tensor whose row t puts its mass on want(t) (and the
 * rest, if any, on position 0). */
static hl_tensor *one_hot_attention(int T, int (*want)(int t, const int32_t *x), const int32_t *x)
{
    hl_tensor *a = hl_tensor_new("attn", 4, (int[]){1, 1, T, T}, false);
    for (int t = 0; t < T; t++)
        a->data[t * T + want(t, x)] = 1;
    return a;
}

static hl_head_scores score_maps(const int32_t *x, const hl_tensor *attn, const hl_repeat *repeat)
{
    hl_detector_sums s;
    hl_detector_sums_begin(&s, 1);
    hl_error err = {0};
    ck_assert_int_eq(hl_detector_sums_add(&s, x, attn, repeat, &err), HL_OK);
    hl_head_scores out;
    hl_detector_sums_finish(&s, &out);
    return out;
}

static int previous(int t, const int32_t *x) { (void)x; return t ? t - 1 : 0; }
static int first(int t, const int32_t *x) { (void)x, (void)t; return 0; }
static int self(int t, const int32_t *x) { (void)x; return t; }
static int two_back(int t, const int32_t *x) { (void)x; return t > 1 ? t - 2 : 0; }
/* The earlier occurrence of x_t (text 1 2 3 4 1 2 3 4), else 0. */
static int duplicate(int t, const int32_t *x) { return t >= 4 && x[t - 4] == x[t] ? t - 4 : 0; }
/* The token after x_t's earlier occurrence. */
static int induction(int t, const int32_t *x) { return t >= 4 && x[t - 4] == x[t] ? t - 3 : 0; }

START_TEST(test_each_detector_on_forced_maps)
{
    const int32_t x[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    hl_tensor *a = one_hot_attention(8, previous, x);
    hl_head_scores s = score_maps(x, a, NULL);
    ck_assert_double_eq_tol(s.v[HL_DETECT_PREVIOUS], 1, 1e-12);
    ck_assert_double_eq_tol(s.v[HL_DETECT_LOCAL], 1, 1e-12);
    ck_assert_double_eq_tol(s.v[HL_DETECT_SELF], 0, 1e-12);
    ck_assert_double_eq_tol(s.v[HL_DETECT_ENTROPY], 0, 1e-12);
    ck_assert(isnan(s.v[HL_DETECT_COPYING]));
    hl_tensor_free(a);

    a = one_hot_attention(8, first, x);
    s = score_maps(x, a, NULL);
    ck_assert_double_eq_tol(s.v[HL_DETECT_FIRST], 1, 1e-12);
    /* Rows 1..3 have the first token within 3 back: 3 of 7 rows. */
    ck_assert_double_eq_tol(s.v[HL_DETECT_LOCAL], 3.0 / 7, 1e-12);
    /* Duplicates exist for t = 4..7 only; attention to 0 hits one at t = 4. */
    ck_assert_double_eq_tol(s.v[HL_DETECT_DUPLICATE], 1.0 / 4, 1e-12);
    hl_tensor_free(a);

    a = one_hot_attention(8, self, x);
    s = score_maps(x, a, NULL);
    ck_assert_double_eq_tol(s.v[HL_DETECT_SELF], 1, 1e-12);
    ck_assert_double_eq_tol(s.v[HL_DETECT_PREVIOUS], 0, 1e-12);
    hl_tensor_free(a);

    a = one_hot_attention(8, duplicate, x);
    s = score_maps(x, a, NULL);
    ck_assert_double_eq_tol(s.v[HL_DETECT_DUPLICATE], 1, 1e-12);
    ck_assert_double_eq_tol(s.v[HL_DETECT_INDUCTION], 0, 1e-12);
    hl_tensor_free(a);

    a = one_hot_attention(8, induction, x);
    s = score_maps(x, a, NULL);
    ck_assert_double_eq_tol(s.v[HL_DETECT_INDUCTION], 1, 1e-12);
    ck_assert_double_eq_tol(s.v[HL_DETECT_DUPLICATE], 0, 1e-12);
    hl_tensor_free(a);
}
END_TEST

START_TEST(test_uniform_attention_entropy_and_probe_induction)
{
    enum { T = 9 };
    const int32_t x[T] = {9, 1, 2, 3, 4, 1, 2, 3, 4}; /* BOS 9, then n = 4 tokens twice */
    hl_tensor *a = hl_tensor_new("attn", 4, (int[]){1, 1, T, T}, false);
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++)
            a->data[t * T + j] = (hl_real)(1.0 / (t + 1));
    const hl_repeat probe = {.begin = 5, .end = T, .lag = 4};
    hl_head_scores s = score_maps(x, a, &probe);
    double entropy = 0, self = 0, induction = 0;
    for (int t = 1; t < T; t++) {
        entropy += log(t + 1) / (T - 1);
        self += 1.0 / (t + 1) / (T - 1);
    }
    for (int t = 5; t < T; t++)
        induction += 1.0 / (t + 1) / 4;
    ck_assert_double_eq_tol(s.v[HL_DETECT_ENTROPY], entropy, 1e-6);
    ck_assert_double_eq_tol(s.v[HL_DETECT_SELF], self, 1e-6);
    ck_assert_double_eq_tol(s.v[HL_DETECT_INDUCTION], induction, 1e-6);
    /* The probe's induction target: t -> t - lag + 1 on its queries. */
    memset(a->data, 0, sizeof(hl_real) * a->numel);
    for (int t = 0; t < T; t++)
        a->data[t * T + (t >= 5 ? t - 3 : 0)] = 1;
    s = score_maps(x, a, &probe);
    ck_assert_double_eq_tol(s.v[HL_DETECT_INDUCTION], 1, 1e-12);
    s = score_maps(x, a, &(hl_repeat){0});
    ck_assert(isnan(s.v[HL_DETECT_INDUCTION])); /* no repeat known: nothing measured */
    /* Halves of 3, 2 and 1 tokens: the induction target is the two-back or
     * the previous token or the query itself, no score of its own (before:
     * 2back's, prev's or self's). */
    const int32_t x2[7] = {9, 1, 2, 3, 1, 2, 3};
    for (int lag = 1; lag <= 3; lag++) {
        hl_tensor *b = one_hot_attention(7, lag == 3 ? two_back : previous, x2);
        s = score_maps(x2, b, &(hl_repeat){.begin = 7 - lag, .end = 7, .lag = lag});
        ck_assert_msg(isnan(s.v[HL_DETECT_INDUCTION]), "lag %d: %g", lag,
                      s.v[HL_DETECT_INDUCTION]);
        ck_assert_double_eq_tol(s.v[lag == 3 ? HL_DETECT_TWO_BACK : HL_DETECT_PREVIOUS], 1,
                                1e-12);
        hl_tensor_free(b);
    }
    /* On text likewise: a copy two back (x = 1 2 3 1) points induction at the
     * two-back token, left out (NaN: no query has a match); three back
     * (1 2 3 4 1) counts. */
    const int32_t near[5] = {1, 2, 3, 1, 5}, far[5] = {1, 2, 3, 4, 1};
    hl_tensor *b = one_hot_attention(5, two_back, near);
    s = score_maps(near, b, NULL);
    ck_assert(isnan(s.v[HL_DETECT_INDUCTION]));
    hl_tensor_free(b);
    b = one_hot_attention(5, first, far);
    for (int j = 0; j < 5; j++)
        b->data[4 * 5 + j] = j == 1;
    s = score_maps(far, b, NULL);
    ck_assert_double_eq_tol(s.v[HL_DETECT_INDUCTION], 1, 1e-12);
    hl_tensor_free(b);
    hl_detector_sums bad;
    hl_detector_sums_begin(&bad, 2);
    hl_error err = {0};
    ck_assert_int_eq(hl_detector_sums_add(&bad, x, a, NULL, &err), HL_ERR_SHAPE);
    hl_tensor_free(a);
}
END_TEST

/* The hand-built model: previous-token >= 0.99, copying +1, then -1. */
START_TEST(test_forced_previous_token_and_copying_heads)
{
    for (int sign = 1; sign >= -1; sign -= 2) {
        hl_gpt *m = hm_previous_token_model(2, sign);
        hl_probe p;
        hl_error err = {0};
        ck_assert_int_eq(hl_probe_new(m, &(hl_probe_opts){.bos = -1, .seed = 1}, &p, &err),
                         HL_OK);
        hl_head_scores s[2];
        ck_assert_int_eq(hl_heads_detect(m, p.set, NULL, s, &err), HL_OK);
        for (int l = 0; l < 2; l++) {
            ck_assert_msg(s[l].v[HL_DETECT_PREVIOUS] >= 0.99, "L%dH0 previous %g", l,
                          s[l].v[HL_DETECT_PREVIOUS]);
            ck_assert_double_eq_tol(s[l].v[HL_DETECT_COPYING], sign, 1e-9);
            ck_assert(s[l].v[HL_DETECT_INDUCTION] < 0.01);
            char roles[64];
            ck_assert_str_eq(hl_head_roles(&s[l], roles, sizeof roles),
                             sign > 0 ? "previous-token+copying" : "previous-token");
            ck_assert_int_eq(hl_head_main_detector(&s[l]), HL_DETECT_PREVIOUS);
        }
        hl_probe_free(&p);
        hl_gpt_free(m);
    }
}
END_TEST

/* A head whose OV circuit holds a NaN gets a NaN copying score; the others
 * keep theirs and the call succeeds. */
START_TEST(test_copying_of_a_broken_head_is_nan)
{
    hl_gpt *m = hm_previous_token_model(2, 1);
    const int E = m->cfg.d_model;
    m->blocks[1].attn.in_proj_weight->data[(size_t)2 * E * E] = NAN; /* L1's first V row */
    double copying[2];
    hl_error err = {0};
    ck_assert_msg(hl_heads_copying(m, copying, &err) == HL_OK, "%s", err.message);
    ck_assert_double_eq_tol(copying[0], 1, 1e-9);
    ck_assert(isnan(copying[1]));
    hl_gpt_free(m);
}
END_TEST

/* TransformerLens's three detectors against its own formulas computed in
 * PyTorch (tests/make_detector_fixtures.py) on the same maps and tokens. */
START_TEST(test_transformer_lens_detectors_match_its_formula)
{
    hl_safetensors *f = NULL;
    hl_error err = {0};
    ck_assert_msg(hl_safetensors_read("tests/fixtures/detectors/transformer_lens.safetensors",
                                      &f, &err) == HL_OK, "%s", err.message);
    hl_tensor *tokens = hl_safetensors_load(f, "tokens", false, &err);
    hl_tensor *attn = hl_safetensors_load(f, "attn", false, &err);
    hl_tensor *want = hl_safetensors_load(f, "tl", false, &err);
    ck_assert_msg(tokens && attn && want, "%s", err.message);
    int32_t x[3 * 9];
    for (int i = 0; i < 27; i++)
        x[i] = (int32_t)tokens->data[i];
    hl_detector_sums sums;
    hl_detector_sums_begin(&sums, 2);
    ck_assert_int_eq(hl_detector_sums_add(&sums, x, attn, NULL, &err), HL_OK);
    hl_head_scores got[2];
    hl_detector_sums_finish(&sums, got);
    static const hl_detector tl[] = {HL_DETECT_PREVIOUS_TL, HL_DETECT_DUPLICATE_TL,
                                     HL_DETECT_INDUCTION_TL};
#ifdef HL_REAL_DOUBLE
    const double tol = 1e-12;
#else
    const double tol = 1e-6;
#endif
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 3; i++)
            ck_assert_msg(fabs(got[h].v[tl[i]] - want->data[h * 3 + i]) < tol,
                          "head %d %s: %.12g, TransformerLens %.12g", h,
                          hl_detector_name(tl[i]), got[h].v[tl[i]], (double)want->data[h * 3 + i]);
    /* Ours average the matched queries only: larger than theirs here. */
    ck_assert(got[0].v[HL_DETECT_DUPLICATE] > got[0].v[HL_DETECT_DUPLICATE_TL]);
    hl_tensor_free(tokens);
    hl_tensor_free(attn);
    hl_tensor_free(want);
    hl_safetensors_free(f);
}
END_TEST

/* The one labeller (analysis/roles.h): a role is on at its threshold, never
 * on a NaN; join lists every role that is on, first the one that comes first;
 * the detectors' local role gives way to previous-token. */
START_TEST(test_roles_join_and_first)
{
    const hl_role roles[] = {
        {"previous-token", 0.49, 0.5}, {"two-back", NAN, 0.5}, {"induction", 0.5, 0.5},
        {"first-token", 0.9, 0.5},
    };
    char buf[64];
    ck_assert_str_eq(hl_roles_join(roles, 4, buf, sizeof buf), "induction+first-token");
    ck_assert_ptr_eq(hl_roles_first(roles, 4), &roles[2]);
    ck_assert_ptr_eq(hl_roles_first(roles, 2), NULL);
    ck_assert_str_eq(hl_roles_join(roles, 2, buf, sizeof buf), "-");
    ck_assert_str_eq(hl_roles_join(roles, 0, buf, sizeof buf), "-");
    char small[8];
    ck_assert_str_eq(hl_roles_join(roles, 4, small, sizeof small), "inducti");

    hl_head_scores sc;
    for (int d = 0; d < HL_DETECTORS; d++)
        sc.v[d] = NAN;
    ck_assert_str_eq(hl_head_roles(&sc, buf, sizeof buf), "-");
    sc.v[HL_DETECT_LOCAL] = HL_ROLE_LOCAL;
    sc.v[HL_DETECT_INDUCTION] = HL_ROLE_INDUCTION;
    ck_assert_str_eq(hl_head_roles(&sc, buf, sizeof buf), "induction+local");
    sc.v[HL_DETECT_PREVIOUS] = HL_ROLE_PREVIOUS;
    ck_assert_str_eq(hl_head_roles(&sc, buf, sizeof buf), "previous-token+induction");
    /* Two-back also silences local; the label role goes by priority. */
    sc.v[HL_DETECT_PREVIOUS] = NAN;
    sc.v[HL_DETECT_TWO_BACK] = HL_ROLE_TWO_BACK;
    ck_assert_str_eq(hl_head_roles(&sc, buf, sizeof buf), "two-back+induction");
    hl_role label[HL_LABEL_ROLES];
    ck_assert_str_eq(hl_head_label_role(&sc, label)->name, "two-back");
    sc.v[HL_DETECT_TWO_BACK] = NAN;
    sc.v[HL_DETECT_FIRST] = 1;
    ck_assert_str_eq(hl_head_label_role(&sc, label)->name, "induction");
    sc.v[HL_DETECT_INDUCTION] = HL_ROLE_INDUCTION / 2;
    ck_assert_str_eq(hl_head_label_role(&sc, label)->name, "first-token");
    sc.v[HL_DETECT_FIRST] = NAN;
    ck_assert_ptr_eq(hl_head_label_role(&sc, label), NULL);
}
END_TEST

Suite *detectors_suite(void)
{
    Suite *s = suite_create("detectors");
    TCase *tc = tcase_create("detectors");
    tcase_add_test(tc, test_each_detector_on_forced_maps);
    tcase_add_test(tc, test_uniform_attention_entropy_and_probe_induction);
    tcase_add_test(tc, test_forced_previous_token_and_copying_heads);
    tcase_add_test(tc, test_copying_of_a_broken_head_is_nan);
    tcase_add_test(tc, test_transformer_lens_detectors_match_its_formula);
    tcase_add_test(tc, test_roles_join_and_first);
    suite_add_tcase(s, tc);
    return s;
}
