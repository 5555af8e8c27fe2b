/* Tests for models/gpt_groups.c: which of a GPT's parameters are hidden
 * matrices and how their rows split, an optimizer built on it, and the zero
 * initialisation. */
#include <stdlib.h>
#include <string.h>

#include "models/gpt_groups.h"
#include "train/optim.h"
#include "tests/testutil.h"

static hl_gpt *make(hl_gpt_mlp mlp, int kv_heads, bool tie)
{
    hl_gpt_config cfg = {.vocab_in = 11, .vocab_out = 11, .n_ctx = 8, .d_model = 16,
                         .n_heads = 4, .n_layers = 2, .mlp = mlp, .norm = HL_GPT_NORM_LAYER,
                         .emb_std = 0.02, .n_kv_heads = kv_heads, .tie_embeddings = tie,
                         .smear_keys = true};
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    return m;
}

/* Every parameter's group and row blocks, by name. */
static void check_groups(hl_gpt *m, int q_rows, int kv_rows, int fc_blocks)
{
    int hidden = 0;
    for (size_t i = 0; i < hl_params_n_tensors(m->params); i++) {
        const hl_tensor *t = hl_params_tensor(m->params, i);
        int rows[HL_GPT_ROW_BLOCKS_MAX] = {0}, n_blocks = -1;
        const int group = hl_gpt_param_group(m, t, &n_blocks, rows);
        const bool want = strstr(t->name, "in_proj_weight") || strstr(t->name, "out_proj.weight") ||
                          strstr(t->name, "mlp.fc.weight") || strstr(t->name, "mlp.proj.weight");
        ck_assert_msg(group == (want ? HL_GPT_GROUP_HIDDEN : HL_GPT_GROUP_OTHER), "%s: group %d",
                      t->name, group);
        hidden += group == HL_GPT_GROUP_HIDDEN;
        if (strstr(t->name, "in_proj_weight")) {
            ck_assert_int_eq(n_blocks, 3);
            ck_assert_int_eq(rows[0], q_rows);
            ck_assert_int_eq(rows[1], kv_rows);
            ck_assert_int_eq(rows[2], kv_rows);
        } else if (strstr(t->name, "mlp.fc.weight")) {
            ck_assert_int_eq(n_blocks, fc_blocks);
            if (fc_blocks)
                ck_assert_int_eq(rows[0] + rows[1], t->shape[0]);
        } else {
            ck_assert_int_eq(n_blocks, 0);
        }
    }
    ck_assert_int_eq(hidden, 4 * m->cfg.n_layers);
}

START_TEST(test_hidden_matrices)
{
    hl_gpt *m = make(HL_GPT_MLP_GELU, 0, false);
    check_groups(m, 16, 16, 0);
    hl_gpt_free(m);
    m = make(HL_GPT_MLP_SWIGLU, 2, true); /* grouped-query: k and v are 2 heads of 4 */
    check_groups(m, 16, 8, 2);
    hl_gpt_free(m);
}
END_TEST

/* An optimizer with Muon on the hidden matrices takes a step and updates
 * every parameter that has a gradient. */
START_TEST(test_groups_build_an_optimizer)
{
    hl_gpt *m = make(HL_GPT_MLP_SWIGLU, 2, false);
    hl_rng rng;
    hl_rng_seed(&rng, 4);
    hl_gpt_init_weights(m, &rng);
    hl_error err = {0};
    hl_optim_groups groups = {
        .n = 2, .group_of = hl_gpt_param_group, .ctx = m,
        .cfg = {[HL_GPT_GROUP_OTHER] = {.kind = HL_OPTIM_ADAMW, .lr = 1e-3, .beta1 = 0.9,
                                        .beta2 = 0.99, .eps = 1e-8},
                [HL_GPT_GROUP_HIDDEN] = {.kind = HL_OPTIM_MUON, .lr = 0.02, .momentum = 0.95}}};
    hl_optim *opt = hl_optim_new_groups(m->params, &groups, &err);
    ck_assert_msg(opt, "%s", err.message);
    const size_t n = hl_params_count(m->params);
    hl_real *before = malloc(n * sizeof *before);
    memcpy(before, hl_params_values(m->params), n * sizeof *before);
    for (size_t i = 0; i < hl_params_n_tensors(m->params); i++) {
        const hl_tensor *t = hl_params_tensor(m->params, i);
        for (size_t j = 0; j < t->numel; j++)
            t->grad[j] = (hl_real)(0.01 * (double)((j * 7 + i) % 13) - 0.06);
    }
    hl_optim_step(opt, 1);
    for (size_t i = 0; i < hl_params_n_tensors(m->params); i++) {
        const hl_tensor *t = hl_params_tensor(m->params, i);
        const size_t at = (size_t)(t->data - hl_params_values(m->params));
        ck_assert_msg(memcmp(before + at, t->data, t->numel * sizeof *before) != 0,
                      "%s was not updated", t->name);
    }
    free(before);
    hl_optim_free(opt);
    hl_gpt_free(m);
}
END_TEST

static bool all_zero(const hl_tensor *t)
{
    for (size_t i = 0; i < t->numel; i++)
        if (t->data[i] != 0)
            return false;
    return true;
}

START_TEST(test_zero_init)
{
    for (int tie = 0; tie < 2; tie++) {
        hl_gpt *m = make(HL_GPT_MLP_GELU, 0, tie);
        hl_rng rng;
        hl_rng_seed(&rng, 9);
        hl_gpt_init_weights(m, &rng);
        hl_gpt_zero_init(m);
        for (int l = 0; l < m->cfg.n_layers; l++) {
            ck_assert(all_zero(m->blocks[l].attn.out_proj_weight));
            ck_assert(all_zero(m->blocks[l].proj_w));
            ck_assert(!all_zero(m->blocks[l].attn.in_proj_weight));
            ck_assert(!all_zero(m->blocks[l].fc_w));
            ck_assert(!all_zero(m->blocks[l].proj_b));
        }
        ck_assert(all_zero(m->head_w) == !tie); /* a tied head is the token embedding */
        ck_assert(!all_zero(m->tok_emb));
        hl_gpt_free(m);
    }
}
END_TEST

Suite *gpt_groups_suite(void)
{
    Suite *s = suite_create("gpt_groups");
    TCase *tc = tcase_create("gpt_groups");
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, test_hidden_matrices);
    tcase_add_test(tc, test_groups_build_an_optimizer);
    tcase_add_test(tc, test_zero_init);
    suite_add_tcase(s, tc);
    return s;
}
