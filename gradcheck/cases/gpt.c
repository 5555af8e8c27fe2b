/* Gradient checks of the GPT, models/gpt.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_gpt(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)in; /* the inputs are the model's own parameters */
    case_data *d = ctx;
    hl_tensor *logits = hl_gpt_forward(g, d->gpt, d->ids, d->B, d->T, NULL);
    return hl_cross_entropy(g, logits, d->targets, -1);
}

/* The training recipe's GPT: documents packed in each sequence (d->mask the
 * ids) and the model's own loss (soft-capped). */
static hl_tensor *build_gpt_recipe(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)in;
    case_data *d = ctx;
    hl_tensor *logits =
        hl_gpt_forward(g, d->gpt, d->ids, d->B, d->T, &(hl_gpt_run){.doc_ids = d->mask});
    return hl_gpt_loss(g, d->gpt, logits, d->targets, -1);
}

/* 2 layers, d_model 6, 2 heads, vocab 5 in / 4 out, tokens (2,5). */
static hl_status setup_gpt(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    hl_gpt_config cfg = {.vocab_in = 5, .vocab_out = 4, .n_ctx = 7, .d_model = 6, .n_heads = 2,
                         .n_layers = 2, .mlp = true, .norm = HL_GPT_NORM_LAYER, .emb_std = 0.5};
    d->gpt = hl_gpt_new(&cfg, err);
    if (!d->gpt)
        return err->status;
    hl_gpt *m = d->gpt;
    hl_gpt_init_weights(m, rng);
    /* LayerNorm weights away from 1 and biases away from 0, so they matter. */
    hl_init_uniform(m->blocks[0].ln1_w, rng, 0.5, 1.5);
    hl_init_uniform(m->lnf_w, rng, 0.5, 1.5);
    hl_init_uniform(m->lnf_b, rng, -0.5, 0.5);
    d->B = 2, d->T = 5;
    for (int i = 0; i < d->B * d->T; i++) {
        d->ids[i] = (int32_t)hl_rng_below(rng, 5);
        d->targets[i] = i == 3 ? -1 : (int32_t)hl_rng_below(rng, 4);
    }
    hl_tensor *in[] = {m->tok_emb, m->blocks[0].ln1_w, m->blocks[0].attn.in_proj_weight,
                       m->blocks[0].attn.out_proj_bias, m->blocks[1].fc_w, m->blocks[1].proj_b,
                       m->lnf_w, m->head_w};
    c->n_inputs = 8;
    memcpy(c->inputs, in, sizeof in);
    return HL_OK;
}

/* The recipe's options (models/gpt.h): QK-norm, a ReLU² MLP, RMSNorm, rotary
 * positions and a soft-capped loss; 2 layers, d_model 8, 2 heads, vocab 5 in
 * / 4 out, tokens (2,7) packed with documents. */
static hl_status setup_gpt_recipe(case_data *d, hl_gradcheck_case *c, hl_rng *rng,
                                  hl_error *err)
{
    hl_gpt_config cfg = {.vocab_in = 5, .vocab_out = 4, .n_ctx = 7, .d_model = 8, .n_heads = 2,
                         .n_layers = 2, .mlp = HL_GPT_MLP_RELU2, .norm = HL_GPT_NORM_RMS,
                         .pos = HL_GPT_POS_ROPE, .emb_std = 0.5, .qk_norm = true,
                         .softcap = 2};
    d->gpt = hl_gpt_new(&cfg, err);
    if (!d->gpt || hl_gradcheck_setup_documents(d, c, rng, err) != HL_OK)
        return err->status;
    hl_gpt *m = d->gpt;
    hl_gpt_init_weights(m, rng);
    /* The QK-norm gains away from 1, so they matter. */
    hl_init_uniform(m->blocks[0].attn.q_norm, rng, 0.5, 1.5);
    hl_init_uniform(m->blocks[1].attn.k_norm, rng, 0.5, 1.5);
    d->B = 2, d->T = 7;
    for (int i = 0; i < d->B * d->T; i++) {
        d->ids[i] = (int32_t)hl_rng_below(rng, 5);
        d->targets[i] = i == 3 ? -1 : (int32_t)hl_rng_below(rng, 4);
    }
    hl_tensor *in[] = {m->tok_emb, m->blocks[0].attn.q_norm, m->blocks[1].attn.k_norm,
                       m->blocks[0].attn.in_proj_weight, m->blocks[1].fc_w, m->head_w};
    c->n_inputs = 6;
    memcpy(c->inputs, in, sizeof in);
    return HL_OK;
}

HL_GRADCHECK_CASES(gpt) = {
    {.name = "gpt", .fn = build_gpt, .setup = setup_gpt},
    {.name = "gpt_recipe", .fn = build_gpt_recipe, .setup = setup_gpt_recipe},
    {0},
};
