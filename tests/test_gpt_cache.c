/* Tests for models/gpt_cache.c: logits fed a token at a time through the
 * key/value cache agree with hl_gpt_forward's over the whole prefix, for the
 * imported architectures (GQA, partial rotary, parallel residual, tanh GELU)
 * and for trained-model options (smeared keys, sinusoidal positions, QK-norm,
 * ReLU², soft-capped logits); the
 * sampler's rules. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/model_io.h"
#include "models/gpt_cache.h"
#include "tests/testutil.h"

#define CACHE_TOL 1e-4

/* Logits of the last of tokens[0..T) by the whole forward pass. */
static void forward_last(const hl_gpt *m, const int32_t *tokens, int T, hl_real *out)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *logits = hl_gpt_forward(g, m, tokens, 1, T, NULL);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    const int V = m->cfg.vocab_out;
    for (int v = 0; v < V; v++) /* soft-capped as the cache hands them out */
        out[v] = hl_gpt_logit(&m->cfg, logits->data[(size_t)(T - 1) * V + v]);
    hl_graph_free(g);
}

/* The cache fed a prompt of 5, then one token at a time, against forward. */
static void expect_cache_agrees(const hl_gpt *m, const char *what)
{
    const int T = m->cfg.n_ctx < 12 ? m->cfg.n_ctx : 12, V = m->cfg.vocab_out;
    int32_t tokens[12];
    for (int i = 0; i < T; i++)
        tokens[i] = (int32_t)((i * 7 + 3) % m->cfg.vocab_in);
    hl_error err = {0};
    hl_gpt_cache *c = hl_gpt_cache_new(m, 0, &err);
    ck_assert_msg(c, "%s", err.message);
    hl_real *want = malloc((size_t)V * sizeof *want);
    ck_assert(want);
    const hl_real *got;
    ck_assert_msg(hl_gpt_cache_feed(c, tokens, 5, &got, &err) == HL_OK, "%s", err.message);
    for (int t = 5; t <= T; t++) {
        forward_last(m, tokens, t, want);
        char label[96];
        snprintf(label, sizeof label, "%s, position %d", what, t - 1);
        tu_assert_close(label, got, want, (size_t)V, CACHE_TOL);
        if (t < T)
            ck_assert_msg(hl_gpt_cache_feed(c, &tokens[t], 1, &got, &err) == HL_OK, "%s",
                          err.message);
    }
    ck_assert_int_eq(hl_gpt_cache_length(c), T);
    /* Past n_ctx and outside the vocabulary: refused, the cache unchanged. */
    int32_t bad = m->cfg.vocab_in;
    if (T == m->cfg.n_ctx)
        ck_assert_int_eq(hl_gpt_cache_feed(c, tokens, 1, &got, &err), HL_ERR_ARG);
    err = (hl_error){0};
    ck_assert_int_eq(hl_gpt_cache_feed(c, &bad, 1, &got, &err), HL_ERR_ARG);
    ck_assert_int_eq(hl_gpt_cache_length(c), T);
    free(want);
    hl_gpt_cache_free(c);
}

START_TEST(test_cache_matches_forward_on_imports)
{
    const char *const names[] = {"gpt2_tiny", "pythia_tiny", "llama_tiny"};
    for (int i = 0; i < 3; i++) {
        char dir[96];
        snprintf(dir, sizeof dir, "tests/fixtures/hf/%s", names[i]);
        hl_error err = {0};
        hl_gpt *m = hl_gpt_load(dir, &err);
        ck_assert_msg(m, "%s", err.message);
        expect_cache_agrees(m, names[i]);
        hl_gpt_free(m);
    }
}
END_TEST

START_TEST(test_cache_matches_forward_on_trained_options)
{
    hl_gpt_config cfgs[3] = {
        {.vocab_in = 13, .vocab_out = 13, .n_ctx = 12, .d_model = 16, .n_heads = 4,
         .n_layers = 2, .mlp = HL_GPT_MLP_SWIGLU, .norm = HL_GPT_NORM_RMS, .emb_std = 0.5,
         .pos = HL_GPT_POS_ROPE, .smear_keys = true, .tie_embeddings = true},
        {.vocab_in = 9, .vocab_out = 7, .n_ctx = 10, .d_model = 12, .n_heads = 3,
         .n_layers = 2, .mlp = HL_GPT_MLP_GELU, .norm = HL_GPT_NORM_LAYER, .emb_std = 0.5,
         .pos = HL_GPT_POS_SINUSOIDAL},
        {.vocab_in = 11, .vocab_out = 11, .n_ctx = 12, .d_model = 16, .n_heads = 2,
         .n_layers = 2, .mlp = HL_GPT_MLP_RELU2, .norm = HL_GPT_NORM_RMS, .emb_std = 0.5,
         .pos = HL_GPT_POS_ROPE, .qk_norm = true, .softcap = 3},
    };
    static const char *const what[3] = {"smeared keys", "sinusoidal", "qk-norm, relu2, softcap"};
    for (int i = 0; i < 3; i++) {
        hl_error err = {0};
        hl_gpt *m = hl_gpt_new(&cfgs[i], &err);
        ck_assert_msg(m, "%s", err.message);
        hl_rng rng;
        hl_rng_seed(&rng, 5 + (uint64_t)i);
        hl_gpt_init_weights(m, &rng);
        for (int l = 0; m->blocks[0].attn.smear && l < 2; l++) /* smearing on, not 1/2 */
            for (int h = 0; h < 4; h++)
                m->blocks[l].attn.smear->data[h] = (hl_real)(h - 1.5);
        for (int l = 0; m->blocks[0].attn.q_norm && l < 2; l++) { /* gains away from 1 */
            hl_init_uniform(m->blocks[l].attn.q_norm, &rng, 0.5, 1.5);
            hl_init_uniform(m->blocks[l].attn.k_norm, &rng, 0.5, 1.5);
        }
        expect_cache_agrees(m, what[i]);
        hl_gpt_free(m);
    }
}
END_TEST

/* A cache of fewer positions than the model refuses more; more than n_ctx is refused. */
START_TEST(test_cache_capacity)
{
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load("tests/fixtures/hf/llama_tiny", &err);
    ck_assert_msg(m, "%s", err.message);
    ck_assert_ptr_null(hl_gpt_cache_new(m, m->cfg.n_ctx + 1, &err));
    ck_assert_int_eq(err.status, HL_ERR_ARG);
    err = (hl_error){0};
    hl_gpt_cache *c = hl_gpt_cache_new(m, 6, &err);
    ck_assert_msg(c, "%s", err.message);
    const int32_t tokens[7] = {1, 2, 3, 4, 5, 6, 7};
    const hl_real *logits;
    ck_assert_int_eq(hl_gpt_cache_feed(c, tokens, 7, &logits, &err), HL_ERR_ARG);
    ck_assert_int_eq(hl_gpt_cache_length(c), 0);
    err = (hl_error){0};
    ck_assert_int_eq(hl_gpt_cache_feed(c, tokens, 6, &logits, &err), HL_OK);
    ck_assert_int_eq(hl_gpt_cache_feed(c, tokens, 1, &logits, &err), HL_ERR_ARG);
    hl_gpt_cache_free(c);
    hl_gpt_free(m);
}
END_TEST

START_TEST(test_sample_rules)
{
    const hl_real logits[5] = {0.5, 2.0, -1.0, 2.0, 1.5};
    hl_rng rng;
    hl_rng_seed(&rng, 1);
    ck_assert_int_eq(hl_gpt_sample(logits, 5, 0, 0, &rng), 1); /* argmax, the first on ties */
    int counts[5] = {0};
    for (int i = 0; i < 4000; i++)
        counts[hl_gpt_sample(logits, 5, 1, 3, &rng)]++;
    /* Top 3: 2.0, 2.0, 1.5; the rest never drawn; the two 2.0s alike. */
    ck_assert(counts[0] == 0 && counts[2] == 0 && counts[1] > 0 && counts[4] > 0);
    ck_assert_msg(abs(counts[1] - counts[3]) < 300, "%d %d", counts[1], counts[3]);
    /* e^0.5 ≈ 1.65 times as likely as the 1.5 logit. */
    const double ratio = (double)counts[1] / counts[4];
    ck_assert_msg(ratio > 1.35 && ratio < 2.0, "ratio %g", ratio);
    hl_rng a, b;
    hl_rng_seed(&a, 9);
    hl_rng_seed(&b, 9);
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(hl_gpt_sample(logits, 5, 0.7, 0, &a), hl_gpt_sample(logits, 5, 0.7, 0, &b));
}
END_TEST

Suite *gpt_cache_suite(void)
{
    Suite *s = suite_create("gpt_cache");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, test_cache_matches_forward_on_imports);
    tcase_add_test(tc, test_cache_matches_forward_on_trained_options);
    tcase_add_test(tc, test_cache_capacity);
    tcase_add_test(tc, test_sample_rules);
    suite_add_tcase(s, tc);
    return s;
}
