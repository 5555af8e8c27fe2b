/* Tests for analysis/composition.c: Q-, K- and V-composition scores equal a
 * direct computation with full (d_model,d_model) matrices in TransformerLens's
 * orientation, LayerNorm gains folded and weights centred, for a random model
 * and for the same model pruned; pairs that cannot compose are NaN; the
 * baseline is deterministic and in range. */
#include <math.h>
#include <stdlib.h>

#include "analysis/composition.h"
#include "analysis/copying.h"
#include "analysis/heads.h"
#include "tests/head_models.h"
#include "tests/testutil.h"

/* TransformerLens's W_Q, W_K, W_V (E,D) and W_O (D,E) of one head, from the
 * raw parameters: ln1 gain folded into the reading weights, which are then
 * centred over d_model, and W_O centred over d_model (LayerNorm models). */
static void tl_weights(const hl_gpt *m, int l, int h, double *wq, double *wk, double *wv,
                       double *wo)
{
    const hl_mha *a = &m->blocks[l].attn;
    const int E = m->cfg.d_model, D = a->cfg.head_dim, inner = hl_mha_inner_dim(a);
    double *reading[3] = {wq, wk, wv};
    for (int part = 0; part < 3; part++)
        for (int d = 0; d < D; d++) {
            double mean = 0;
            for (int e = 0; e < E; e++) {
                const double w = a->in_proj_weight->data[(size_t)(part * inner + h * D + d) * E + e];
                reading[part][e * D + d] = w * m->blocks[l].ln1_w->data[e];
                mean += reading[part][e * D + d] / E;
            }
            for (int e = 0; e < E; e++)
                reading[part][e * D + d] -= mean;
        }
    for (int d = 0; d < D; d++) {
        double mean = 0;
        for (int e = 0; e < E; e++)
            mean += (wo[d * E + e] = a->out_proj_weight->data[(size_t)e * inner + h * D + d]) / E;
        for (int e = 0; e < E; e++)
            wo[d * E + e] -= mean;
    }
}

/* c (E,E) = a (E,D) · b (D,E), or a · bᵀ with b stored (E,D). */
static void product(int E, int D, const double *a, const double *b, int bt, double *c)
{
    for (int i = 0; i < E; i++)
        for (int j = 0; j < E; j++) {
            double s = 0;
            for (int k = 0; k < D; k++)
                s += a[i * D + k] * (bt ? b[j * D + k] : b[k * E + j]);
            c[i * E + j] = s;
        }
}

static double frobenius(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    return sqrt(s);
}

/* ‖left·right‖ / (‖left‖‖right‖), all (E,E). */
static double direct_score(int E, const double *left, const double *right, int transpose_right)
{
    double *p = malloc(sizeof *p * E * E);
    for (int i = 0; i < E; i++)
        for (int j = 0; j < E; j++) {
            double s = 0;
            for (int k = 0; k < E; k++)
                s += left[i * E + k] * (transpose_right ? right[j * E + k] : right[k * E + j]);
            p[i * E + j] = s;
        }
    double r = frobenius(p, E * E) / (frobenius(left, E * E) * frobenius(right, E * E));
    free(p);
    return r;
}

static void check_against_direct(const hl_gpt *m)
{
    const hl_gpt_config *c = &m->cfg;
    const int E = c->d_model, D = E / c->n_heads, N = hl_gpt_total_heads(c);
    double *qk = malloc(sizeof *qk * N * E * E), *ov = malloc(sizeof *ov * N * E * E);
    double *q = malloc(sizeof *q * E * D), *k = malloc(sizeof *k * E * D);
    double *v = malloc(sizeof *v * E * D), *o = malloc(sizeof *o * E * D);
    int layer[64];
    for (int l = 0, i = 0; l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++, i++) {
            tl_weights(m, l, h, q, k, v, o);
            product(E, D, q, k, 1, qk + (size_t)i * E * E); /* W_Q·W_Kᵀ */
            product(E, D, v, o, 0, ov + (size_t)i * E * E); /* W_V·W_O */
            layer[i] = l;
        }
    double *scores = malloc(sizeof *scores * N * N);
    hl_error err = {0};
    for (int kind = 0; kind < HL_COMPOSE_KINDS; kind++) {
        ck_assert_int_eq(hl_composition_scores(m, kind, scores, &err), HL_OK);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                const double got = scores[i * N + j];
                if (layer[i] >= layer[j]) {
                    ck_assert_msg(isnan(got), "pair %d -> %d should be NaN", i, j);
                    continue;
                }
                const double *right = kind == HL_COMPOSE_V ? ov + (size_t)j * E * E
                                                           : qk + (size_t)j * E * E;
                const double want = direct_score(E, ov + (size_t)i * E * E, right,
                                                 kind == HL_COMPOSE_K);
                ck_assert_msg(fabs(got - want) < 1e-9 * (1 + want), "%s %d -> %d: %.12g vs %.12g",
                              hl_compose_kind_name(kind), i, j, got, want);
            }
    }
    free(scores);
    free(qk);
    free(ov);
    free(q);
    free(k);
    free(v);
    free(o);
}

START_TEST(test_scores_match_direct_products)
{
    hl_gpt *m = hm_random_model(3, 3, 12, 5);
    check_against_direct(m);
    hl_gpt_free(m);
}
END_TEST

START_TEST(test_pruned_models_keep_their_pairs_scores)
{
    hl_gpt *m = hm_random_model(3, 3, 12, 6);
    hl_head_set remove = {0};
    remove.on[0][1] = remove.on[2][0] = true;
    hl_error err = {0};
    hl_gpt *small = hl_prune_heads(m, &remove, NULL, &err);
    ck_assert_msg(small, "%s", err.message);
    ck_assert_int_eq(hl_gpt_total_heads(&small->cfg), 7);
    check_against_direct(small);
    /* A surviving pair scores what it scored before pruning: original L0H2 ->
     * L2H2 was flat 2 -> 8; pruned, they are L0H1 -> L2H1, flat 1 -> 6. */
    double before[81], after[49];
    ck_assert_int_eq(hl_composition_scores(m, HL_COMPOSE_K, before, &err), HL_OK);
    ck_assert_int_eq(hl_composition_scores(small, HL_COMPOSE_K, after, &err), HL_OK);
    ck_assert_int_eq(hl_gpt_head_index(&small->cfg, 2, 1), 6);
    ck_assert_double_eq_tol(after[1 * 7 + 6], before[2 * 9 + 8], 1e-12);
    hl_gpt_free(small);
    hl_gpt_free(m);
}
END_TEST

/* A grouped-query model scores what the same model ungrouped scores: each
 * query head's k and v are its group's key/value head (before, k and v were
 * read from the rows of another head, or past the in-projection's end). The
 * copying scores read the same weights. */
START_TEST(test_grouped_query_matches_ungrouped)
{
    hl_gpt_config cfg = {.vocab_in = 20, .vocab_out = 20, .n_ctx = 8, .d_model = 16,
                         .n_heads = 4, .n_kv_heads = 2, .n_layers = 3, .mlp = HL_GPT_MLP_GELU,
                         .norm = HL_GPT_NORM_LAYER, .emb_std = 1};
    hl_error err = {0};
    hl_gpt *twin, *m = hm_grouped_model(&cfg, 3, true, &twin);
    enum { N = 12 };
    double got[N * N], want[N * N];
    for (int kind = 0; kind < HL_COMPOSE_KINDS; kind++) {
        ck_assert_int_eq(hl_composition_scores(m, kind, got, &err), HL_OK);
        ck_assert_int_eq(hl_composition_scores(twin, kind, want, &err), HL_OK);
        for (int i = 0; i < N * N; i++)
            ck_assert_msg(isnan(got[i]) ? isnan(want[i]) : got[i] == want[i],
                          "%s, pair %d: %.12g, ungrouped %.12g", hl_compose_kind_name(kind), i,
                          got[i], want[i]);
    }
    ck_assert_int_eq(hl_heads_copying(m, got, &err), HL_OK);
    ck_assert_int_eq(hl_heads_copying(twin, want, &err), HL_OK);
    for (int i = 0; i < N; i++)
        ck_assert_msg(got[i] == want[i], "copying of head %d: %.12g, ungrouped %.12g", i, got[i],
                      want[i]);
    hl_gpt_free(twin);
    hl_gpt_free(m);
}
END_TEST

START_TEST(test_baseline_and_bad_input)
{
    const double a = hl_composition_baseline(16, 4, 50, 1), b = hl_composition_baseline(16, 4, 50, 1);
    ck_assert(a == b);
    ck_assert_msg(a > 0.05 && a < 0.6, "baseline %g", a);
    /* Wider residual streams make random products smaller. */
    ck_assert(hl_composition_baseline(64, 4, 50, 1) < a);
    hl_gpt *m = hm_random_model(2, 2, 8, 1);
    double s[16];
    hl_error err = {0};
    ck_assert_int_eq(hl_composition_scores(m, HL_COMPOSE_KINDS, s, &err), HL_ERR_ARG);
    hl_head_weights w;
    hl_error_clear(&err);
    ck_assert_int_eq(hl_head_weights_get(m, 1, 2, &w, &err), HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "L1H2"));
    hl_gpt_free(m);
}
END_TEST

Suite *composition_suite(void)
{
    Suite *s = suite_create("composition");
    TCase *tc = tcase_create("composition");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_scores_match_direct_products);
    tcase_add_test(tc, test_pruned_models_keep_their_pairs_scores);
    tcase_add_test(tc, test_grouped_query_matches_ungrouped);
    tcase_add_test(tc, test_baseline_and_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
