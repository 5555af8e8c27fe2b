/* Gradient checks of the attention module, models/mha.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_mha_self(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    case_data *d = ctx;
    return hl_mha_forward(g, &d->mha, in[0], in[0], in[0], &d->masks,
                          &(hl_mha_run){.gate = d->gate});
}

static hl_tensor *build_mha_cross(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    case_data *d = ctx;
    return hl_mha_forward(g, &d->mha, in[0], in[1], in[2], &d->masks, NULL);
}

static hl_status declare_mha(case_data *d, const hl_mha_config *cfg, hl_rng *rng, hl_error *err)
{
    d->params = hl_params_new();
    if (!d->params)
        return hl_error_set(err, HL_ERR_NOMEM, "gradcheck cases: out of memory");
    if (hl_mha_declare(&d->mha, d->params, "", cfg, err) != HL_OK)
        return err->status;
    if (hl_params_commit(d->params) != HL_OK)
        return hl_error_set(err, hl_params_error(d->params)->status, "%s",
                            hl_params_error(d->params)->message);
    hl_mha_init_weights(&d->mha, rng);
    /* Biases away from their zero initialisation, so they matter. */
    hl_init_uniform(d->mha.in_proj_bias, rng, -0.3, 0.3);
    hl_init_uniform(d->mha.out_proj_bias, rng, -0.3, 0.3);
    return HL_OK;
}

/* E 6, 2 heads of 3, x (2,5,6), causal, gates U(0.5,1.5). */
static hl_status setup_mha_self(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    hl_mha_config cfg = {.embed_dim = 6, .num_heads = 2, .bias = true};
    if (declare_mha(d, &cfg, rng, err) != HL_OK)
        return err->status;
    d->gate = hl_gradcheck_new_tensor(d, "gate", 1, (int[]){2}, true, rng, 0.5, 1.5, err);
    hl_tensor *x = d->gate ? hl_gradcheck_new_tensor(d, "x", 3, (int[]){2, 5, 6}, true, rng, -1, 1, err)
                           : NULL;
    if (!x)
        return err->status;
    d->masks = (hl_mha_masks){.causal = true};
    hl_tensor *in[] = {x, d->mha.in_proj_weight, d->mha.in_proj_bias, d->mha.out_proj_weight,
                       d->mha.out_proj_bias, d->gate};
    c->n_inputs = 6;
    memcpy(c->inputs, in, sizeof in);
    return HL_OK;
}

/* E 4, 2 heads, query (2,3,4), key (2,5,3), value (2,5,5), key padding. */
static hl_status setup_mha_cross(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    hl_mha_config cfg = {.embed_dim = 4, .num_heads = 2, .kdim = 3, .vdim = 5, .bias = true};
    if (declare_mha(d, &cfg, rng, err) != HL_OK)
        return err->status;
    hl_tensor *q = hl_gradcheck_new_tensor(d, "query", 3, (int[]){2, 3, 4}, true, rng, -1, 1, err);
    hl_tensor *k = q ? hl_gradcheck_new_tensor(d, "key", 3, (int[]){2, 5, 3}, true, rng, -1, 1, err) : NULL;
    hl_tensor *v = k ? hl_gradcheck_new_tensor(d, "value", 3, (int[]){2, 5, 5}, true, rng, -1, 1, err) : NULL;
    hl_tensor *pad = v ? hl_gradcheck_new_tensor(d, "key_is_padding", 2, (int[]){2, 5}, false, rng, 0, 0, err)
                       : NULL;
    if (!pad)
        return err->status;
    pad->data[4] = pad->data[5 + 1] = 1; /* batch 0 hides its last key, batch 1 its second */
    d->masks = (hl_mha_masks){.key_padding = pad};
    hl_tensor *in[] = {q, k, v, d->mha.q_proj_weight, d->mha.k_proj_weight, d->mha.v_proj_weight,
                       d->mha.in_proj_bias, d->mha.out_proj_weight};
    c->n_inputs = 8;
    memcpy(c->inputs, in, sizeof in);
    return HL_OK;
}

HL_GRADCHECK_CASES(mha) = {
    {.name = "mha_self_causal", .fn = build_mha_self, .setup = setup_mha_self},
    {.name = "mha_cross_padding", .fn = build_mha_cross, .setup = setup_mha_cross},
    {0},
};
