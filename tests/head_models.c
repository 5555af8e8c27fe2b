/* Hand-built models for the head-study tests: see head_models.h. */
#include "tests/head_models.h"

#include <check.h>
#include <string.h>

#include "core/rng.h"

hl_gpt *hm_previous_token_model(int layers, double sign)
{
    hl_gpt_config cfg = {.vocab_in = HM_VOCAB, .vocab_out = HM_VOCAB, .n_ctx = HM_CTX,
                         .d_model = HM_D, .n_heads = 1, .n_layers = layers, .emb_std = 1};
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    for (int t = 0; t < HM_CTX; t++)
        m->pos_emb->data[t * HM_D + t] = 1;
    for (int v = 0; v < HM_VOCAB; v++) {
        m->tok_emb->data[v * HM_D + 8 + v] = 1;
        m->head_w->data[v * HM_D + 8 + v] = 1;
    }
    for (int l = 0; l < layers; l++) {
        hl_real *w = m->blocks[l].attn.in_proj_weight->data; /* (48,16) */
        hl_real *o = m->blocks[l].attn.out_proj_weight->data; /* (16,16) */
        for (int i = 0; i < 8; i++)
            w[i * HM_D + i] = 100; /* q = 100·e_t */
        for (int j = 1; j < 8; j++)
            w[(HM_D + j) * HM_D + j - 1] = 1; /* k_s = e_{s+1} */
        for (int i = 8; i < HM_D; i++) {
            w[(2 * HM_D + i) * HM_D + i] = 1; /* v copies the token dims */
            o[i * HM_D + i] = (hl_real)sign;
        }
    }
    return m;
}

hl_gpt *hm_random_model(int layers, int heads, int d_model, uint64_t seed)
{
    hl_gpt_config cfg = {.vocab_in = 11, .vocab_out = 9, .n_ctx = 7, .d_model = d_model,
                         .n_heads = heads, .n_layers = layers, .mlp = true, .norm = HL_GPT_NORM_LAYER,
                         .emb_std = 1};
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    hl_gpt_init_weights(m, &rng);
    for (int l = 0; l < layers; l++)
        hl_init_uniform(m->blocks[l].ln1_w, &rng, 0.5, 1.5);
    hl_init_uniform(m->lnf_w, &rng, 0.5, 1.5);
    return m;
}

/* m's layout: q of H heads, then k and v of K (models/mha.h). */
void hm_ungrouped_twin(const hl_gpt *m, hl_gpt *twin)
{
    const int H = m->cfg.n_heads, K = m->cfg.n_kv_heads, D = m->cfg.d_model / H;
    for (size_t i = 0; i < hl_params_n_tensors(twin->params); i++) {
        hl_tensor *to = hl_params_tensor(twin->params, i);
        const hl_tensor *from = hl_params_find(m->params, to->name);
        ck_assert_msg(from, "%s: not in the grouped model", to->name);
        if (from->numel == to->numel) {
            memcpy(to->data, from->data, sizeof *to->data * to->numel);
            continue;
        }
        const size_t width = to->numel / (size_t)to->shape[0]; /* E for weights, 1 for biases */
        for (int part = 0; part < 3; part++)
            for (int h = 0; h < H; h++) {
                const int src = part ? H + (part - 1) * K + h / (H / K) : h;
                memcpy(to->data + ((size_t)part * H + h) * D * width,
                       from->data + (size_t)src * D * width, sizeof *to->data * D * width);
            }
    }
}

hl_gpt *hm_grouped_model(const hl_gpt_config *cfg, uint64_t seed, bool random_gains,
                         hl_gpt **twin)
{
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    hl_gpt_init_weights(m, &rng);
    for (int l = 0; random_gains && l < cfg->n_layers; l++)
        hl_init_uniform(m->blocks[l].ln1_w, &rng, 0.5, 1.5);
    hl_gpt_config ungrouped = *cfg;
    ungrouped.n_kv_heads = 0;
    *twin = hl_gpt_new(&ungrouped, &err);
    ck_assert_msg(*twin, "%s", err.message);
    hm_ungrouped_twin(m, *twin);
    return m;
}
