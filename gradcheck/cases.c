/* The gradient-check catalogue: see cases.h. */
#include "gradcheck/cases.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/gpt.h"
#include "models/mha.h"
#include "ops/ops.h"

#define MAX_OWNED (HL_GRADCHECK_MAX_INPUTS + 1)
#define MAX_IDS 64
#define LN_EPS ((hl_real)1e-5)

/* Everything a case owns; its functions get it as ctx. */
struct hl_gradcheck_case_data {
    hl_tensor *owned[MAX_OWNED]; /* heap tensors: inputs, and a mask */
    int n_owned;
    const hl_tensor *mask;       /* mask cases: padding, blocked, additive bias or doc ids */
    int flags;                   /* matmul transpose flags */
    hl_real p;                   /* scale factor, dropout probability */
    int32_t ids[MAX_IDS];        /* embedding ids, or the gpt's tokens */
    int32_t targets[MAX_IDS];    /* cross-entropy targets */
    int B, T;                    /* the gpt's batch */
    hl_params *params;           /* mha cases */
    hl_mha mha;
    hl_mha_masks masks;
    hl_tensor *gate; /* (H) per-head gate of the MHA run, or NULL */
    hl_gpt *gpt;
};

typedef hl_gradcheck_case_data case_data;

/* ---- the functions under check ---- */

static hl_tensor *build_linear(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear(g, in[0], in[1], in[2]);
}

static hl_tensor *build_linear_gelu(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear_gelu(g, in[0], in[1], in[2]);
}

static hl_tensor *build_linear_gelu_tanh(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear_gelu_tanh(g, in[0], in[1], in[2]);
}

static hl_tensor *build_matmul(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_matmul(g, in[0], in[1], ((case_data *)ctx)->flags);
}

static hl_tensor *build_reshape(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_reshape(g, in[0], 2, (int[]){3, -1});
}

static hl_tensor *build_permute(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_permute(g, in[0], (int[]){1, 3, 0, 2});
}

static hl_tensor *build_narrow(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_narrow(g, in[0], 1, 1, 3);
}

static hl_tensor *build_scale(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_scale(g, in[0], ((case_data *)ctx)->p);
}

static hl_tensor *build_add(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_add(g, in[0], in[1]);
}

static hl_tensor *build_mul(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_mul(g, in[0], in[1]);
}

static hl_tensor *build_sum(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_sum(g, in[0]);
}

static hl_tensor *build_mean(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_mean(g, in[0]);
}

static hl_tensor *build_softmax(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_softmax(g, in[0]);
}

static hl_tensor *build_causal(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_softmax(g, hl_mask_causal(g, in[0]));
}

static hl_tensor *build_key_padding(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_softmax(g, hl_mask_key_padding(g, in[0], ((case_data *)ctx)->mask));
}

static hl_tensor *build_blocked(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_softmax(g, hl_mask_blocked(g, in[0], ((case_data *)ctx)->mask));
}

static hl_tensor *build_additive(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_softmax(g, hl_mask_additive(g, in[0], ((case_data *)ctx)->mask));
}

/* Causal and documents, d->mask the document ids. */
static hl_tensor *build_documents(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_softmax(g, hl_mask_documents(g, hl_mask_causal(g, in[0]), ((case_data *)ctx)->mask));
}

/* Causal, with d->mask as key padding, scale 0.6. */
static hl_tensor *build_attention(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    hl_attention_masks m = {.causal = true, .key_padding = ((case_data *)ctx)->mask};
    return hl_attention(g, in[0], in[1], in[2], (hl_real)0.6, &m);
}

static hl_tensor *build_embedding(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_embedding(g, in[0], ((case_data *)ctx)->ids, 2, (int[]){3, 7});
}

static hl_tensor *build_layernorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_layernorm(g, in[0], in[1], in[2], LN_EPS);
}

static hl_tensor *build_rmsnorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_rmsnorm(g, in[0], in[1], LN_EPS);
}

/* Both outputs of the fused residual junction reach the checked tensor. */
static hl_tensor *build_add_layernorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_tensor *sum;
    hl_tensor *y = hl_add_layernorm(g, in[0], in[1], in[2], in[3], LN_EPS, &sum);
    return hl_add(g, y, hl_scale(g, sum, (hl_real)0.7));
}

static hl_tensor *build_add_rmsnorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_tensor *sum;
    hl_tensor *y = hl_add_rmsnorm(g, in[0], in[1], in[2], LN_EPS, &sum);
    return hl_add(g, y, hl_scale(g, sum, (hl_real)0.7));
}

/* The three heads weighted apart, so each output's gradient is checked. */
static hl_tensor *build_qkv_heads(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_tensor *k, *v;
    hl_tensor *q = hl_qkv_heads(g, in[0], 2, (hl_real)10000, &k, &v);
    return hl_add(g, hl_add(g, q, hl_scale(g, k, (hl_real)0.5)), hl_scale(g, v, (hl_real)0.25));
}

/* 3 query heads on 1 key/value head of width 6, 4 of it rotated. */
static hl_tensor *build_qkv_heads_grouped(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_tensor *k, *v;
    hl_tensor *q = hl_qkv_heads_grouped(g, in[0], 3, 1, (hl_real)100, 4, &k, &v);
    hl_tensor *kv = hl_add(g, hl_scale(g, k, (hl_real)0.5), hl_scale(g, v, (hl_real)0.25));
    return hl_add(g, q, kv); /* k and v broadcast over the query heads */
}

/* 5 heads from 3, repeated out of order, head 1 read twice. */
static hl_tensor *build_gather_heads(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    static const int src[] = {2, 1, 0, 1, 2};
    return hl_gather_heads(g, in[0], src, 5);
}

static hl_tensor *build_gelu(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_gelu(g, in[0]);
}

static hl_tensor *build_gelu_tanh(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_gelu_tanh(g, in[0]);
}

static hl_tensor *build_swiglu(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_swiglu(g, in[0]);
}

static hl_tensor *build_relu2(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_relu2(g, in[0]);
}

/* A small base, so that positions far apart turn by visibly different angles. */
static hl_tensor *build_rope(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_rope(g, in[0], 100);
}

/* 4 of each row of 7 rotated, 3 passed through. */
static hl_tensor *build_rope_partial(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_rope_partial(g, in[0], 100, 4);
}

static hl_tensor *build_smear(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_smear(g, in[0], in[1]);
}

static hl_tensor *build_dropout(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_dropout(g, in[0], ((case_data *)ctx)->p);
}

static hl_tensor *build_cross_entropy(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_cross_entropy(g, in[0], ((case_data *)ctx)->targets, -1);
}

/* The cap in d->p. */
static hl_tensor *build_cross_entropy_softcap(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const case_data *d = ctx;
    return hl_cross_entropy_softcap(g, in[0], d->targets, -1, d->p);
}

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

/* ---- inputs ---- */

/* FNV-1a: each case's seeds come from its name, so adding a case changes no
 * other case's numbers. */
static uint64_t name_seed(const char *name)
{
    uint64_t h = 1469598103934665603u;
    for (const char *s = name; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* A heap tensor owned by d, uniform in [lo, hi). */
static hl_tensor *owned_tensor(case_data *d, const char *name, int rank, const int *shape,
                               bool requires_grad, hl_rng *rng, double lo, double hi,
                               hl_error *err)
{
    if (d->n_owned == MAX_OWNED) {
        hl_error_set(err, HL_ERR_STATE, "gradcheck cases: too many tensors");
        return NULL;
    }
    hl_tensor *t = hl_tensor_new_checked(name, rank, shape, requires_grad, err);
    if (t) {
        hl_init_uniform(t, rng, lo, hi);
        d->owned[d->n_owned++] = t;
    }
    return t;
}

typedef struct {
    const char *name;
    int rank;
    int shape[HL_MAX_RANK];
    double lo, hi;
} input_spec;

/* Sets up what a case needs beyond its listed inputs (a mask, ids, a module). */
typedef hl_status (*setup_fn)(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err);

typedef struct {
    const char *name;
    hl_gradcheck_fn fn;
    int n_inputs;
    input_spec in[4];
    setup_fn setup;
    int flags;  /* matmul */
    double p;   /* scale factor, dropout probability */
} case_entry;

/* is_padding (2,7): batch 0 hides key 6, batch 1 keys 2 and 5. */
static hl_status setup_key_padding(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c;
    hl_tensor *m = owned_tensor(d, "key_is_padding", 2, (int[]){2, 7}, false, rng, 0, 0, err);
    if (!m)
        return err->status;
    m->data[6] = m->data[7 + 2] = m->data[7 + 5] = 1;
    d->mask = m;
    return HL_OK;
}

/* is_blocked (5,7): about a third blocked, never a whole row. */
static hl_status setup_blocked(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c;
    hl_tensor *m = owned_tensor(d, "is_blocked", 2, (int[]){5, 7}, false, rng, 0, 0, err);
    if (!m)
        return err->status;
    for (int t = 0; t < 5; t++)
        for (int s = 0; s < 7; s++)
            m->data[t * 7 + s] = (t + 2 * s) % 3 == 0;
    d->mask = m;
    return HL_OK;
}

/* bias (5,7): U(-1,1), with -inf where s > t + 3. */
static hl_status setup_additive(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c;
    hl_tensor *m = owned_tensor(d, "bias", 2, (int[]){5, 7}, false, rng, -1, 1, err);
    if (!m)
        return err->status;
    for (int t = 0; t < 5; t++)
        for (int s = t + 4; s < 7; s++)
            m->data[t * 7 + s] = -INFINITY;
    d->mask = m;
    return HL_OK;
}

/* key_is_padding (2,7) for attention: batch 0 hides keys 1 and 6, batch 1
 * every key (its queries see nothing: zero output, zero gradient). */
static hl_status setup_attention(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c;
    hl_tensor *m = owned_tensor(d, "key_is_padding", 2, (int[]){2, 7}, false, rng, 0, 0, err);
    if (!m)
        return err->status;
    m->data[1] = m->data[6] = 1;
    for (int s = 7; s < 14; s++)
        m->data[s] = 1;
    d->mask = m;
    return HL_OK;
}

/* doc_ids (2,7): batch 0 three documents (0,0,1,1,1,2,2), batch 1 two. */
static hl_status setup_documents(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c;
    hl_tensor *m = owned_tensor(d, "doc_ids", 2, (int[]){2, 7}, false, rng, 0, 0, err);
    if (!m)
        return err->status;
    static const int ids[14] = {0, 0, 1, 1, 1, 2, 2, 4, 4, 4, 7, 7, 7, 7};
    for (int i = 0; i < 14; i++)
        m->data[i] = (hl_real)ids[i];
    d->mask = m;
    return HL_OK;
}

/* Every other input negated: |x| stays away from ReLU²'s kink at 0, where a
 * central difference would straddle it. */
static hl_status setup_relu2(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)d, (void)rng, (void)err;
    for (size_t i = 0; i < c->inputs[0]->numel; i += 2)
        c->inputs[0]->data[i] = -c->inputs[0]->data[i];
    return HL_OK;
}

/* 21 ids in [0,17), id 0 three times. */
static hl_status setup_embedding(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c, (void)err;
    for (int i = 0; i < 21; i++)
        d->ids[i] = (int32_t)hl_rng_below(rng, 17);
    d->ids[0] = d->ids[5] = d->ids[20] = 0;
    return HL_OK;
}

/* Targets for logits (2,17,5), every fourth row ignored. */
static hl_status setup_cross_entropy(case_data *d, hl_gradcheck_case *c, hl_rng *rng,
                                     hl_error *err)
{
    (void)c, (void)err;
    for (int i = 0; i < 34; i++)
        d->targets[i] = i % 4 == 3 ? -1 : (int32_t)hl_rng_below(rng, 5);
    return HL_OK;
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
    d->gate = owned_tensor(d, "gate", 1, (int[]){2}, true, rng, 0.5, 1.5, err);
    hl_tensor *x = d->gate ? owned_tensor(d, "x", 3, (int[]){2, 5, 6}, true, rng, -1, 1, err)
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
    hl_tensor *q = owned_tensor(d, "query", 3, (int[]){2, 3, 4}, true, rng, -1, 1, err);
    hl_tensor *k = q ? owned_tensor(d, "key", 3, (int[]){2, 5, 3}, true, rng, -1, 1, err) : NULL;
    hl_tensor *v = k ? owned_tensor(d, "value", 3, (int[]){2, 5, 5}, true, rng, -1, 1, err) : NULL;
    hl_tensor *pad = v ? owned_tensor(d, "key_is_padding", 2, (int[]){2, 5}, false, rng, 0, 0, err)
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
    if (!d->gpt || setup_documents(d, c, rng, err) != HL_OK)
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

#define IN(name, rank, ...) {name, rank, {__VA_ARGS__}, -1, 1}
#define IN_RANGE(name, rank, lo, hi, ...) {name, rank, {__VA_ARGS__}, lo, hi}

static const case_entry cases[] = {
    {.name = "linear", .fn = build_linear, .n_inputs = 3,
     .in = {IN("x", 3, 3, 1, 17), IN("w", 2, 5, 17), IN("b", 1, 5)}},
    {.name = "linear_gelu", .fn = build_linear_gelu, .n_inputs = 3,
     .in = {IN("x", 3, 3, 1, 17), IN("w", 2, 5, 17), IN("b", 1, 5)}},
    {.name = "linear_gelu_tanh", .fn = build_linear_gelu_tanh, .n_inputs = 3,
     .in = {IN("x", 3, 3, 1, 17), IN("w", 2, 5, 17), IN("b", 1, 5)}},
    {.name = "matmul", .fn = build_matmul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 3, 17), IN("b", 3, 2, 17, 5)}},
    {.name = "matmul_ta", .fn = build_matmul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 17, 3), IN("b", 3, 2, 17, 5)}, .flags = HL_TRANS_A},
    {.name = "matmul_tb", .fn = build_matmul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 3, 17), IN("b", 3, 2, 5, 17)}, .flags = HL_TRANS_B},
    {.name = "matmul_tab", .fn = build_matmul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 17, 3), IN("b", 3, 2, 5, 17)}, .flags = HL_TRANS_A | HL_TRANS_B},
    {.name = "reshape", .fn = build_reshape, .n_inputs = 1, .in = {IN("x", 3, 2, 3, 17)}},
    {.name = "permute", .fn = build_permute, .n_inputs = 1, .in = {IN("x", 4, 3, 1, 17, 2)}},
    {.name = "narrow", .fn = build_narrow, .n_inputs = 1, .in = {IN("x", 3, 2, 5, 17)}},
    {.name = "scale", .fn = build_scale, .n_inputs = 1, .in = {IN("x", 3, 3, 1, 17)}, .p = -0.37},
    {.name = "add", .fn = build_add, .n_inputs = 2, .in = {IN("a", 3, 2, 3, 17), IN("b", 1, 17)}},
    {.name = "mul", .fn = build_mul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 3, 17), IN_RANGE("b", 2, 0.5, 1.5, 3, 1)}},
    {.name = "sum", .fn = build_sum, .n_inputs = 1, .in = {IN("x", 3, 3, 1, 17)}},
    {.name = "mean", .fn = build_mean, .n_inputs = 1, .in = {IN("x", 3, 3, 1, 17)}},
    {.name = "softmax", .fn = build_softmax, .n_inputs = 1,
     .in = {IN_RANGE("x", 3, -3, 3, 3, 1, 17)}},
    {.name = "mask_causal+softmax", .fn = build_causal, .n_inputs = 1,
     .in = {IN_RANGE("scores", 4, -2, 2, 2, 3, 5, 7)}},
    {.name = "mask_key_padding+softmax", .fn = build_key_padding, .n_inputs = 1,
     .in = {IN_RANGE("scores", 4, -2, 2, 2, 3, 5, 7)}, .setup = setup_key_padding},
    {.name = "mask_blocked+softmax", .fn = build_blocked, .n_inputs = 1,
     .in = {IN_RANGE("scores", 3, -2, 2, 3, 5, 7)}, .setup = setup_blocked},
    {.name = "mask_additive+softmax", .fn = build_additive, .n_inputs = 1,
     .in = {IN_RANGE("scores", 4, -2, 2, 2, 1, 5, 7)}, .setup = setup_additive},
    {.name = "mask_documents+softmax", .fn = build_documents, .n_inputs = 1,
     .in = {IN_RANGE("scores", 4, -2, 2, 2, 3, 5, 7)}, .setup = setup_documents},
    {.name = "attention", .fn = build_attention, .n_inputs = 3,
     .in = {IN("q", 4, 2, 2, 5, 3), IN("k", 4, 2, 2, 7, 3), IN("v", 4, 2, 2, 7, 3)},
     .setup = setup_attention},
    {.name = "embedding", .fn = build_embedding, .n_inputs = 1, .in = {IN("weight", 2, 17, 3)},
     .setup = setup_embedding},
    {.name = "layernorm", .fn = build_layernorm, .n_inputs = 3,
     .in = {IN_RANGE("x", 2, -2, 2, 3, 17), IN_RANGE("gamma", 1, 0.5, 1.5, 17),
            IN("beta", 1, 17)}},
    {.name = "rmsnorm", .fn = build_rmsnorm, .n_inputs = 2,
     .in = {IN_RANGE("x", 2, -2, 2, 3, 17), IN_RANGE("gamma", 1, 0.5, 1.5, 17)}},
    {.name = "add_layernorm", .fn = build_add_layernorm, .n_inputs = 4,
     .in = {IN_RANGE("a", 2, -2, 2, 3, 17), IN_RANGE("b", 2, -2, 2, 3, 17),
            IN_RANGE("gamma", 1, 0.5, 1.5, 17), IN("beta", 1, 17)}},
    {.name = "add_rmsnorm", .fn = build_add_rmsnorm, .n_inputs = 3,
     .in = {IN_RANGE("a", 2, -2, 2, 3, 17), IN_RANGE("b", 2, -2, 2, 3, 17),
            IN_RANGE("gamma", 1, 0.5, 1.5, 17)}},
    {.name = "gelu", .fn = build_gelu, .n_inputs = 1, .in = {IN_RANGE("x", 3, -3, 3, 3, 1, 17)}},
    {.name = "gelu_tanh", .fn = build_gelu_tanh, .n_inputs = 1,
     .in = {IN_RANGE("x", 3, -3, 3, 3, 1, 17)}},
    {.name = "swiglu", .fn = build_swiglu, .n_inputs = 1,
     .in = {IN_RANGE("x", 3, -3, 3, 3, 1, 34)}},
    {.name = "relu2", .fn = build_relu2, .n_inputs = 1,
     .in = {IN_RANGE("x", 3, 0.2, 3, 3, 1, 17)}, .setup = setup_relu2},
    {.name = "rope", .fn = build_rope, .n_inputs = 1, .in = {IN("x", 4, 2, 3, 7, 6)}},
    {.name = "rope_partial", .fn = build_rope_partial, .n_inputs = 1,
     .in = {IN("x", 4, 2, 3, 5, 7)}},
    {.name = "qkv_heads", .fn = build_qkv_heads, .n_inputs = 1, .in = {IN("qkv", 3, 2, 5, 12)}},
    {.name = "qkv_heads_grouped", .fn = build_qkv_heads_grouped, .n_inputs = 1,
     .in = {IN("qkv", 3, 2, 5, 30)}},
    {.name = "gather_heads", .fn = build_gather_heads, .n_inputs = 1,
     .in = {IN("x", 4, 2, 3, 5, 3)}},
    {.name = "smear", .fn = build_smear, .n_inputs = 2,
     .in = {IN("k", 4, 2, 3, 5, 3), IN_RANGE("alpha", 1, -1.5, 1.5, 3)}},
    {.name = "dropout", .fn = build_dropout, .n_inputs = 1, .in = {IN("x", 3, 3, 1, 17)},
     .p = 0.4},
    {.name = "cross_entropy", .fn = build_cross_entropy, .n_inputs = 1,
     .in = {IN_RANGE("logits", 3, -2, 2, 2, 17, 5)}, .setup = setup_cross_entropy},
    {.name = "cross_entropy_softcap", .fn = build_cross_entropy_softcap, .n_inputs = 1,
     .in = {IN_RANGE("logits", 3, -4, 4, 2, 17, 5)}, .setup = setup_cross_entropy, .p = 3},
    {.name = "mha_self_causal", .fn = build_mha_self, .setup = setup_mha_self},
    {.name = "mha_cross_padding", .fn = build_mha_cross, .setup = setup_mha_cross},
    {.name = "gpt", .fn = build_gpt, .setup = setup_gpt},
    {.name = "gpt_recipe", .fn = build_gpt_recipe, .setup = setup_gpt_recipe},
};

#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

int hl_gradcheck_case_count(void) { return N_CASES; }

const char *hl_gradcheck_case_name(int i)
{
    return i >= 0 && i < N_CASES ? cases[i].name : NULL;
}

int hl_gradcheck_case_find(const char *name)
{
    for (int i = 0; name && i < N_CASES; i++)
        if (!strcmp(cases[i].name, name))
            return i;
    return -1;
}

hl_status hl_gradcheck_case_make(int i, hl_gradcheck_case *c, hl_error *err)
{
    memset(c, 0, sizeof *c);
    if (i < 0 || i >= N_CASES)
        return hl_error_set(err, HL_ERR_ARG, "gradcheck cases: no case %d (there are %d)", i,
                            N_CASES);
    const case_entry *e = &cases[i];
    case_data *d = calloc(1, sizeof *d);
    if (!d)
        return hl_error_set(err, HL_ERR_NOMEM, "gradcheck cases: out of memory");
    *c = (hl_gradcheck_case){.name = e->name, .fn = e->fn, .ctx = d, .data = d};
    d->flags = e->flags;
    d->p = (hl_real)e->p;
    hl_rng rng;
    hl_rng_seed(&rng, name_seed(e->name));
    hl_status s = HL_OK;
    for (int k = 0; k < e->n_inputs && s == HL_OK; k++) {
        const input_spec *in = &e->in[k];
        c->inputs[k] = owned_tensor(d, in->name, in->rank, in->shape, true, &rng, in->lo, in->hi,
                                    err);
        s = c->inputs[k] ? HL_OK : err->status;
    }
    c->n_inputs = e->n_inputs;
    if (s == HL_OK && e->setup)
        s = e->setup(d, c, &rng, err);
    if (s != HL_OK)
        hl_gradcheck_case_free(c);
    return s;
}

void hl_gradcheck_case_free(hl_gradcheck_case *c)
{
    case_data *d = c->data;
    if (d) {
        for (int k = 0; k < d->n_owned; k++)
            hl_tensor_free(d->owned[k]);
        hl_params_free(d->params);
        hl_gpt_free(d->gpt);
        free(d);
    }
    memset(c, 0, sizeof *c);
}
