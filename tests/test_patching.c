/* Tests for analysis/patching.c against tests/make_patch_fixtures.py, which
 * computes every quantity with its own PyTorch code in float64 on the GPT of
 * tests/fixtures/gpt: activation patching (z, q, k, v, pattern per head; z
 * per head and position; the residual stream per layer and position), path
 * patching through q, k and v, attribution patching of z and k, direct logit
 * attribution and the logit lens, for the loss and the logit difference. Path
 * patching on a grouped-query model against the same model ungrouped. And
 * the bad tasks each function refuses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/patching.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "tests/head_models.h"
#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define PATCH_TOL 1e-10
#else
#define PATCH_TOL 1e-5
#endif

#define FIXTURE "tests/fixtures/patch/"

typedef struct {
    hl_gpt *m;
    int32_t tokens[4][12]; /* clean, corrupt, answer, wrong (2,6) */
    hl_patch_task t;
    hl_safetensors *expected;
} fixture;

static void fixture_open(fixture *f)
{
    hl_error err = {0};
    f->m = hl_gpt_load("tests/fixtures/gpt/weights.safetensors", &err);
    ck_assert_msg(f->m, "%s", err.message);
    hl_safetensors *task = NULL;
    ck_assert_msg(hl_safetensors_read(FIXTURE "task.safetensors", &task, &err) == HL_OK, "%s",
                  err.message);
    static const char *const names[] = {"clean", "corrupt", "answer", "wrong"};
    for (int i = 0; i < 4; i++) {
        hl_tensor *t = hl_safetensors_load(task, names[i], false, &err);
        ck_assert_msg(t && t->numel == 12, "%s: %s", names[i], err.message);
        for (int j = 0; j < 12; j++)
            f->tokens[i][j] = (int32_t)t->data[j];
        hl_tensor_free(t);
    }
    hl_safetensors_free(task);
    f->t = (hl_patch_task){.B = 2, .T = 6, .clean = f->tokens[0], .corrupt = f->tokens[1],
                           .answer = f->tokens[2], .wrong = f->tokens[3]};
    ck_assert_msg(hl_safetensors_read(FIXTURE "expected.safetensors", &f->expected, &err) == HL_OK,
                  "%s", err.message);
}

static void fixture_close(fixture *f)
{
    hl_safetensors_free(f->expected);
    hl_gpt_free(f->m);
}

/* got (n values; NaN where the fixture has NaN) against the fixture's name. */
static void expect(const fixture *f, const char *name, const double *got, size_t n)
{
    hl_error err = {0};
    hl_tensor *want = hl_safetensors_load(f->expected, name, false, &err);
    ck_assert_msg(want, "%s", err.message);
    ck_assert_msg(want->numel == n, "%s: %zu values, the fixture has %zu", name, n, want->numel);
    for (size_t i = 0; i < n; i++) {
        const double w = want->data[i];
        if (isnan(w)) {
            ck_assert_msg(isnan(got[i]), "%s[%zu]: %g where the fixture has NaN", name, i,
                          got[i]);
            continue;
        }
        ck_assert_msg(fabs(got[i] - w) <= PATCH_TOL, "%s[%zu]: %.12g, PyTorch %.12g (|diff| "
                      "%.3g > %.0e)", name, i, got[i], w, fabs(got[i] - w), PATCH_TOL);
    }
    hl_tensor_free(want);
}

static void expect_metric(fixture *f, hl_patch_metric metric)
{
    f->t.metric = metric;
    const char *sfx = metric == HL_METRIC_LOGIT_DIFF ? "_diff" : "";
    const int L = 2, H = 2, T = 6, N = 4;
    hl_error err = {0};
    char name[64];
    double base[2], v[(2 + 1) * 6 * 4];
    ck_assert_msg(hl_patch_baselines(f->m, &f->t, &base[0], &base[1], &err) == HL_OK, "%s",
                  err.message);
    snprintf(name, sizeof name, "clean%s", sfx);
    expect(f, name, &base[0], 1);
    snprintf(name, sizeof name, "corrupt%s", sfx);
    expect(f, name, &base[1], 1);
    static const struct {
        hl_act act;
        const char *name;
    } acts[] = {{HL_ACT_Z, "z"}, {HL_ACT_Q, "q"}, {HL_ACT_K, "k"}, {HL_ACT_V, "v"},
                {HL_ACT_PATTERN, "pattern"}};
    for (int a = 0; a < 5; a++) {
        ck_assert_msg(hl_patch_heads(f->m, &f->t, acts[a].act, false, v, &err) == HL_OK, "%s",
                      err.message);
        snprintf(name, sizeof name, "patch_%s%s", acts[a].name, sfx);
        expect(f, name, v, (size_t)L * H);
    }
    ck_assert_msg(hl_patch_heads(f->m, &f->t, HL_ACT_Z, true, v, &err) == HL_OK, "%s",
                  err.message);
    snprintf(name, sizeof name, "patch_z_pos%s", sfx);
    expect(f, name, v, (size_t)L * H * T);
    ck_assert_msg(hl_patch_resid(f->m, &f->t, v, &err) == HL_OK, "%s", err.message);
    snprintf(name, sizeof name, "patch_resid%s", sfx);
    expect(f, name, v, (size_t)(L + 1) * T);
    for (int a = 1; a <= 3; a++) {
        double paths[16];
        ck_assert_msg(hl_patch_paths(f->m, &f->t, acts[a].act, paths, &err) == HL_OK, "%s",
                      err.message);
        snprintf(name, sizeof name, "paths_%s%s", acts[a].name, sfx);
        expect(f, name, paths, (size_t)N * N);
        /* From one sender: its row, bit for bit, and NaN elsewhere. */
        hl_head_set one = {0};
        one.on[0][1] = true;
        double from[16];
        ck_assert_msg(hl_patch_paths_from(f->m, &f->t, acts[a].act, &one, from, &err) == HL_OK,
                      "%s", err.message);
        const int sender = hl_gpt_head_index(&f->m->cfg, 0, 1);
        for (int i = 0; i < N * N; i++)
            ck_assert_msg(i / N == sender ? !memcmp(&from[i], &paths[i], sizeof *from)
                                          : isnan(from[i]),
                          "paths from sender %d, cell %d: %g", sender, i, from[i]);
    }
    for (int a = 0; a < 3; a += 2) { /* z and k */
        ck_assert_msg(hl_patch_attrib_heads(f->m, &f->t, acts[a].act, false, v, &err) == HL_OK,
                      "%s", err.message);
        snprintf(name, sizeof name, "attrib_%s%s", acts[a].name, sfx);
        expect(f, name, v, (size_t)L * H);
    }
    ck_assert_msg(hl_patch_logit_attribution(f->m, &f->t, v, &err) == HL_OK, "%s", err.message);
    snprintf(name, sizeof name, "dla%s", sfx);
    expect(f, name, v, (size_t)L * H);
    int32_t top[(2 + 1) * 6 * 2];
    ck_assert_msg(hl_patch_logit_lens(f->m, &f->t, 2, v, top, &err) == HL_OK, "%s", err.message);
    snprintf(name, sizeof name, "lens%s", sfx);
    expect(f, name, v, (size_t)L + 1);
}

START_TEST(test_patching_matches_pytorch)
{
    fixture f;
    fixture_open(&f);
    expect_metric(&f, HL_METRIC_LOSS);
    expect_metric(&f, HL_METRIC_LOGIT_DIFF);
    /* The weights' gradients are left as they were (zero). */
    for (size_t i = 0; i < hl_params_n_tensors(f.m->params); i++) {
        const hl_tensor *p = hl_params_tensor(f.m->params, i);
        for (size_t j = 0; j < p->numel; j++)
            ck_assert_msg(p->grad[j] == 0, "%s.grad[%zu] = %g", p->name, j, (double)p->grad[j]);
    }
    fixture_close(&f);
}
END_TEST

/* The logit lens's top tokens are the unembedded stream's largest logits, in order. */
START_TEST(test_logit_lens_top_tokens_ordered)
{
    fixture f;
    fixture_open(&f);
    hl_error err = {0};
    double metric[3];
    int32_t top[3 * 6 * 6];
    ck_assert_int_eq(hl_patch_logit_lens(f.m, &f.t, 6, metric, top, &err), HL_OK);
    for (int i = 0; i < 3 * 6; i++) {
        bool seen[6] = {false};
        for (int k = 0; k < 6; k++) {
            ck_assert(top[i * 6 + k] >= 0 && top[i * 6 + k] < 6 && !seen[top[i * 6 + k]]);
            seen[top[i * 6 + k]] = true;
        }
    }
    ck_assert_int_eq(hl_patch_logit_lens(f.m, &f.t, 7, metric, top, &err), HL_ERR_ARG);
    fixture_close(&f);
}
END_TEST

/* Bad tasks: no answer, a token out of range, a logit difference without
 * wrong tokens, clean and corrupted alike, an activation a command does not
 * take. Each names what is wrong. */
START_TEST(test_patching_bad_tasks)
{
    fixture f;
    fixture_open(&f);
    hl_error err = {0};
    double v[64], a, b;
    hl_patch_task t = f.t;
    int32_t none[12], bad[12];
    for (int i = 0; i < 12; i++)
        none[i] = -1, bad[i] = f.tokens[0][i];
    bad[3] = 7; /* vocab_in 7 */
    const struct {
        const char *what;
        hl_patch_task task;
        const char *message;
    } cases[] = {
        {"no answer", {.B = 2, .T = 6, .clean = f.tokens[0], .corrupt = f.tokens[1], .answer = none},
         "no position has an answer"},
        {"bad token", {.B = 2, .T = 6, .clean = bad, .corrupt = f.tokens[1], .answer = f.tokens[2]},
         "not an input token"},
        {"no wrong", {.B = 2, .T = 6, .clean = f.tokens[0], .corrupt = f.tokens[1],
                      .answer = f.tokens[2], .metric = HL_METRIC_LOGIT_DIFF},
         "needs wrong tokens"},
        {"too long", {.B = 1, .T = 7, .clean = f.tokens[0], .corrupt = f.tokens[1],
                      .answer = f.tokens[2]},
         "n_ctx 6"},
        {"alike", {.B = 2, .T = 6, .clean = f.tokens[0], .corrupt = f.tokens[0],
                   .answer = f.tokens[2]},
         "score the same"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hl_error_clear(&err);
        ck_assert_msg(hl_patch_heads(f.m, &cases[i].task, HL_ACT_Z, false, v, &err) == HL_ERR_ARG,
                      "%s accepted", cases[i].what);
        ck_assert_msg(strstr(err.message, cases[i].message), "%s: %s", cases[i].what,
                      err.message);
    }
    hl_error_clear(&err);
    ck_assert_int_eq(hl_patch_heads(f.m, &t, HL_ACT_RESID_PRE, false, v, &err), HL_ERR_ARG);
    hl_error_clear(&err);
    ck_assert_int_eq(hl_patch_paths(f.m, &t, HL_ACT_Z, v, &err), HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "q, k or v"));
    ck_assert_int_eq(hl_patch_baselines(f.m, &t, &a, &b, &err), HL_OK);
    fixture_close(&f);
}
END_TEST

/* Path patching on a grouped-query model: a receiver's k or v is its own copy
 * of its group's key/value head, as activation patching defines it, so every
 * path scores what it scores on the same model with each key/value head
 * repeated for its query heads (before, k and v read the wrong rows of the
 * in-projection or failed). */
START_TEST(test_paths_grouped_query)
{
    hl_gpt_config cfg = {.vocab_in = 24, .vocab_out = 24, .n_ctx = 16, .d_model = 16,
                         .n_heads = 4, .n_kv_heads = 2, .n_layers = 3,
                         .mlp = HL_GPT_MLP_SWIGLU, .norm = HL_GPT_NORM_RMS,
                         .pos = HL_GPT_POS_ROPE, .emb_std = 1};
    hl_error err = {0};
    hl_gpt *twin, *m = hm_grouped_model(&cfg, 7, false, &twin);
    hl_patch_task t;
    int32_t *buf;
    ck_assert_msg(hl_patch_induction_task(m, 3, -1, 0, 24, 11, &t, &buf, &err) == HL_OK, "%s",
                  err.message);
    double base[2][2];
    ck_assert_msg(hl_patch_baselines(m, &t, &base[0][0], &base[0][1], &err) == HL_OK, "%s",
                  err.message);
    ck_assert_msg(hl_patch_baselines(twin, &t, &base[1][0], &base[1][1], &err) == HL_OK, "%s",
                  err.message);
    ck_assert_msg(fabs(base[0][0] - base[1][0]) < 1e-5 && fabs(base[0][1] - base[1][1]) < 1e-5,
                  "the twins differ: clean %g, %g; corrupted %g, %g", base[0][0], base[1][0],
                  base[0][1], base[1][1]);
    enum { N = 12 };
    static const hl_act acts[] = {HL_ACT_Q, HL_ACT_K, HL_ACT_V};
    for (int a = 0; a < 3; a++) {
        double got[N * N], want[N * N], largest = 0;
        ck_assert_msg(hl_patch_paths(m, &t, acts[a], got, &err) == HL_OK, "act %d: %s",
                      (int)acts[a], err.message);
        ck_assert_msg(hl_patch_paths(twin, &t, acts[a], want, &err) == HL_OK, "act %d: %s",
                      (int)acts[a], err.message);
        for (int i = 0; i < N * N; i++) {
            ck_assert_msg(isnan(got[i]) == isnan(want[i]), "act %d, cell %d: %g, ungrouped %g",
                          (int)acts[a], i, got[i], want[i]);
            if (isnan(want[i]))
                continue;
            ck_assert_msg(fabs(got[i] - want[i]) < 1e-4, "act %d, path %d -> %d: %.6f, "
                          "ungrouped %.6f", (int)acts[a], i / N, i % N, got[i], want[i]);
            largest = fmax(largest, fabs(want[i]));
        }
        ck_assert_msg(largest > 0.01, "act %d: every path scores below 0.01", (int)acts[a]);
    }
    free(buf);
    hl_gpt_free(twin);
    hl_gpt_free(m);
}
END_TEST

/* On a soft-capped model the loss metric is the model's loss, of the capped
 * logits (hl_gpt_loss): the clean and corrupted baselines are the mean capped
 * cross-entropy at the scored positions (they were the uncapped one). */
START_TEST(test_patching_soft_cap)
{
    hl_gpt_config cfg = {.vocab_in = 24, .vocab_out = 24, .n_ctx = 16, .d_model = 16,
                         .n_heads = 4, .n_layers = 2, .pos = HL_GPT_POS_ROPE, .emb_std = 1,
                         .softcap = 2};
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_rng rng;
    hl_rng_seed(&rng, 5);
    hl_gpt_init_weights(m, &rng);
    hl_patch_task t;
    int32_t *buf;
    ck_assert_msg(hl_patch_induction_task(m, 3, -1, 0, 24, 11, &t, &buf, &err) == HL_OK, "%s",
                  err.message);
    double clean, corrupt;
    ck_assert_msg(hl_patch_baselines(m, &t, &clean, &corrupt, &err) == HL_OK, "%s",
                  err.message);
    hl_graph *g = hl_graph_new(0);
    hl_graph_set_grad_enabled(g, false);
    const int32_t *inputs[2] = {t.clean, t.corrupt};
    const double got[2] = {clean, corrupt};
    for (int k = 0; k < 2; k++) {
        hl_tensor *logits = hl_gpt_forward(g, m, inputs[k], t.B, t.T, NULL);
        const double want = hl_gpt_loss(g, m, logits, t.answer, -1)->data[0];
        const double plain = hl_cross_entropy(g, logits, t.answer, -1)->data[0];
        ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
        ck_assert_msg(fabs(got[k] - want) < 1e-5 && fabs(want - plain) > 1e-3,
                      "%s: %.6f, the capped loss %.6f, uncapped %.6f", k ? "corrupted" : "clean",
                      got[k], want, plain);
    }
    hl_graph_free(g);
    free(buf);
    hl_gpt_free(m);
}
END_TEST

Suite *patching_suite(void)
{
    Suite *s = suite_create("patching");
    TCase *tc = tcase_create("patching");
    tcase_add_test(tc, test_patching_matches_pytorch);
    tcase_add_test(tc, test_logit_lens_top_tokens_ordered);
    tcase_add_test(tc, test_patching_bad_tasks);
    tcase_add_test(tc, test_paths_grouped_query);
    tcase_add_test(tc, test_patching_soft_cap);
    suite_add_tcase(s, tc);
    return s;
}
