/* Tests for models/gpt.c: parity with a PyTorch model on a committed fixture
 * (tests/make_train_fixtures.py), the gradient check, configs and loading. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "io/safetensors.h"
#include "models/gpt.h"
#include "tests/head_models.h"
#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define GPT_TOL 1e-10
#else
#define GPT_TOL 2e-5
#endif

#define FIXTURES "tests/fixtures/"

static hl_safetensors *open_fixture(const char *dir, const char *file)
{
    char path[128];
    snprintf(path, sizeof path, FIXTURES "%s/%s.safetensors", dir, file);
    hl_safetensors *f = NULL;
    hl_error err = {0};
    ck_assert_msg(hl_safetensors_read(path, &f, &err) == HL_OK, "%s", err.message);
    return f;
}

static void expect_tensor(const hl_safetensors *f, const char *name, const hl_real *values,
                          size_t n)
{
    hl_error err = {0};
    hl_tensor *want = hl_safetensors_load(f, name, false, &err);
    ck_assert_msg(want, "%s", err.message);
    ck_assert_uint_eq(want->numel, n);
    tu_assert_close(name, values, want->data, n, GPT_TOL);
    hl_tensor_free(want);
}

/* The model of tests/fixtures/<dir>/ against its PyTorch logits, loss and
 * every parameter's gradient; the model is handed back to check its config. */
static hl_gpt *expect_fixture(const char *dir)
{
    char path[128];
    snprintf(path, sizeof path, FIXTURES "%s/weights.safetensors", dir);
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load(path, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_safetensors *data = open_fixture(dir, "data"), *expected = open_fixture(dir, "expected");
    const hl_safetensors_entry_info *tokens = hl_safetensors_find(data, "tokens");
    const hl_safetensors_entry_info *targets = hl_safetensors_find(data, "targets");
    ck_assert(tokens && targets && tokens->dtype == HL_DTYPE_I32);
    const int B = (int)tokens->shape[0], T = (int)tokens->shape[1];
    int32_t ids[64], tgt[64];
    memcpy(ids, tokens->data, tokens->nbytes); /* little-endian host, as the tests run */
    memcpy(tgt, targets->data, targets->nbytes);

    hl_graph *g = hl_graph_new(0);
    hl_tensor *logits = hl_gpt_forward(g, m, ids, B, T, NULL);
    hl_tensor *loss = hl_cross_entropy(g, logits, tgt, -1);
    ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
    expect_tensor(expected, "logits", logits->data, logits->numel);
    expect_tensor(expected, "loss", loss->data, 1);
    for (size_t i = 0; i < hl_params_n_tensors(m->params); i++) {
        const hl_tensor *p = hl_params_tensor(m->params, i);
        char name[HL_NAME_MAX + 8];
        snprintf(name, sizeof name, "grad.%s", p->name);
        expect_tensor(expected, name, p->grad, p->numel);
    }
    hl_graph_free(g);
    hl_safetensors_free(data);
    hl_safetensors_free(expected);
    return m;
}

START_TEST(test_gpt_matches_pytorch)
{
    hl_gpt *m = expect_fixture("gpt");
    ck_assert(m->cfg.mlp == HL_GPT_MLP_GELU && m->cfg.norm == HL_GPT_NORM_LAYER &&
              m->cfg.pos == HL_GPT_POS_LEARNED);
    hl_gpt_free(m);
}
END_TEST

/* Rotary positions, RMSNorm, SwiGLU, tied embeddings and smeared keys; then
 * fixed sinusoidal positions with LayerNorm and no MLP. */
START_TEST(test_gpt_modern_matches_pytorch)
{
    hl_gpt *m = expect_fixture("gpt_modern");
    ck_assert(m->cfg.pos == HL_GPT_POS_ROPE && m->cfg.norm == HL_GPT_NORM_RMS &&
              m->cfg.mlp == HL_GPT_MLP_SWIGLU && m->cfg.tie_embeddings && m->cfg.smear_keys);
    ck_assert(m->head_w == m->tok_emb && !m->pos_emb && m->blocks[1].attn.smear);
    ck_assert_int_eq(m->blocks[0].fc_w->shape[0], 2 * hl_gpt_mlp_width(&m->cfg));
    hl_gpt_free(m);
    m = expect_fixture("gpt_sinusoidal");
    ck_assert(m->cfg.pos == HL_GPT_POS_SINUSOIDAL && !m->pos_emb && m->pos_table &&
              !m->cfg.mlp && !m->blocks[0].ln2_w);
    hl_gpt_free(m);
}
END_TEST

typedef struct {
    const hl_gpt *m;
    int32_t tokens[12], targets[12];
} gpt_ctx;

static hl_tensor *build_gpt_loss(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)in; /* the inputs are the model's own parameters */
    gpt_ctx *c = ctx;
    hl_tensor *logits = hl_gpt_forward(g, c->m, c->tokens, 2, 6, NULL);
    return hl_cross_entropy(g, logits, c->targets, -1);
}

START_TEST(test_gpt_gradcheck)
{
    hl_gpt_config cfg = {.vocab_in = 5, .vocab_out = 4, .n_ctx = 6, .d_model = 6, .n_heads = 2,
                         .n_layers = 2, .mlp = true, .norm = HL_GPT_NORM_LAYER, .emb_std = 0.5};
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_rng rng;
    hl_rng_seed(&rng, 3);
    hl_gpt_init_weights(m, &rng);
    /* LayerNorm weights away from 1 and biases away from 0, so their
     * gradients matter. */
    hl_init_uniform(m->blocks[0].ln1_w, &rng, 0.5, 1.5);
    hl_init_uniform(m->lnf_b, &rng, -0.5, 0.5);
    gpt_ctx ctx = {.m = m};
    for (int i = 0; i < 12; i++) {
        ctx.tokens[i] = (int32_t)hl_rng_below(&rng, 5);
        ctx.targets[i] = i == 4 ? -1 : (int32_t)hl_rng_below(&rng, 4);
    }
    hl_tensor *in[] = {m->tok_emb, m->pos_emb, m->blocks[0].ln1_w, m->blocks[0].attn.in_proj_weight,
                       m->blocks[1].fc_w, m->blocks[1].proj_b, m->lnf_b, m->head_w};
    tu_gradcheck("gpt (2 layers, MLP, LayerNorm)", build_gpt_loss, &ctx, in, 8);
    hl_gpt_free(m);

    /* Today's parts: rotary positions, RMSNorm, SwiGLU, tied embeddings,
     * smeared keys (vocab_in = vocab_out for the tie). */
    cfg = (hl_gpt_config){.vocab_in = 5, .vocab_out = 5, .n_ctx = 6, .d_model = 8,
                          .n_heads = 2, .n_layers = 2, .mlp = HL_GPT_MLP_SWIGLU,
                          .norm = HL_GPT_NORM_RMS, .pos = HL_GPT_POS_ROPE, .rope_base = 50,
                          .tie_embeddings = true, .smear_keys = true, .emb_std = 0.5};
    m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_gpt_init_weights(m, &rng);
    hl_init_uniform(m->blocks[0].ln1_w, &rng, 0.5, 1.5);
    hl_init_uniform(m->blocks[1].attn.smear, &rng, -1, 1);
    ctx.m = m;
    for (int i = 0; i < 12; i++)
        ctx.targets[i] = i == 4 ? -1 : (int32_t)hl_rng_below(&rng, 5);
    hl_tensor *modern[] = {m->tok_emb, m->blocks[0].ln1_w, m->blocks[0].attn.in_proj_weight,
                           m->blocks[1].attn.smear, m->blocks[1].fc_w, m->blocks[1].proj_b,
                           m->lnf_w, m->head_b};
    tu_gradcheck("gpt (rotary, RMSNorm, SwiGLU, tied, smeared keys)", build_gpt_loss, &ctx,
                 modern, 8);
    hl_gpt_free(m);
}
END_TEST

/* ---- activation patching (hl_act_patch) ---- */

/* A heap copy of a graph tensor (it outlives the graph's reset). */
static hl_tensor *keep(const hl_tensor *t)
{
    hl_tensor *c = hl_tensor_new(t->name, t->rank, t->shape, false);
    ck_assert_ptr_nonnull(c);
    memcpy(c->data, t->data, t->numel * sizeof(hl_real));
    return c;
}

/* A (1,H,1,1) or (1,1,T,1) mask with ones at `on` (n of them). */
static hl_tensor *mask(int dim, int size, const int *on, int n)
{
    int shape[4] = {1, 1, 1, 1};
    shape[dim] = size;
    hl_tensor *w = hl_tensor_new("where", 4, shape, false);
    ck_assert_ptr_nonnull(w);
    hl_tensor_fill(w, 0);
    for (int i = 0; i < n; i++)
        w->data[on[i]] = 1;
    return w;
}

/* Rows of head h (or, with h < 0, of position t over all heads) of a
 * (B,H,T,D) tensor equal those of want. */
static bool same_head_rows(const hl_tensor *got, const hl_tensor *want, int h, int t)
{
    const int B = got->shape[0], H = got->shape[1], T = got->shape[2], D = got->shape[3];
    for (int b = 0; b < B; b++)
        for (int hh = 0; hh < H; hh++)
            for (int tt = 0; tt < T; tt++) {
                if ((h >= 0 && hh != h) || (t >= 0 && tt != t))
                    continue;
                const size_t at = (((size_t)b * H + hh) * T + tt) * D;
                if (memcmp(got->data + at, want->data + at, D * sizeof(hl_real)))
                    return false;
            }
    return true;
}

/* Running the blocks from layer k on the residual stream a full pass kept
 * entering k gives bitwise the stream that pass left before its final norm,
 * for each k, with layer or RMS norms, sequential or parallel residual; a
 * missing stream or a layer out of range fails the graph. */
START_TEST(test_gpt_forward_from)
{
    for (int variant = 0; variant < 2; variant++) {
        hl_gpt_config cfg = {.vocab_in = 11, .vocab_out = 9, .n_ctx = 7, .d_model = 8,
                             .n_heads = 2, .n_layers = 3, .mlp = true, .emb_std = 1,
                             .norm = variant ? HL_GPT_NORM_RMS : HL_GPT_NORM_LAYER,
                             .parallel_residual = variant == 1};
        hl_error err = {0};
        hl_gpt *m = hl_gpt_new(&cfg, &err);
        ck_assert_msg(m, "%s", err.message);
        hl_rng rng;
        hl_rng_seed(&rng, 9 + variant);
        hl_gpt_init_weights(m, &rng);
        const int B = 2, T = 7;
        int32_t x[14];
        for (int i = 0; i < B * T; i++)
            x[i] = (int32_t)((i * 5 + 2) % 11);
        hl_graph *g = hl_graph_new(0), *rest = hl_graph_new(0);
        hl_graph_set_grad_enabled(g, false);
        hl_graph_set_grad_enabled(rest, false);
        hl_tensor *resid[4];
        hl_gpt_forward(g, m, x, B, T, &(hl_gpt_run){.resid = resid});
        ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
        for (int k = 0; k < 3; k++) {
            const hl_tensor *out = hl_gpt_forward_from(rest, m, resid[k], k, NULL);
            ck_assert_msg(!hl_graph_failed(rest), "%s", hl_graph_message(rest));
            ck_assert_int_eq(out->numel, resid[3]->numel);
            ck_assert_msg(!memcmp(out->data, resid[3]->data,
                                  out->numel * sizeof(hl_real)),
                          "variant %d: from layer %d differs", variant, k);
            hl_graph_reset(rest);
        }
        hl_gpt_forward_from(rest, m, resid[0], 3, NULL);
        ck_assert(hl_graph_failed(rest));
        ck_assert_ptr_nonnull(strstr(hl_graph_message(rest), "forward from layer 3"));
        hl_graph_reset(rest);
        hl_gpt_forward_from(rest, m, NULL, 0, NULL);
        ck_assert(hl_graph_failed(rest));
        hl_graph_free(g);
        hl_graph_free(rest);
        hl_gpt_free(m);
    }
}
END_TEST

/* Patching replaces exactly what it names: the residual stream entering
 * layer 0 makes a corrupted run the clean one; q and k make the pattern the
 * clean one; z of one head, or at some positions, changes those rows only;
 * the fused path honours q, k, v and z patches as the composed ops do. */
START_TEST(test_gpt_patches)
{
    hl_gpt *m = hm_random_model(2, 2, 8, 5);
    const int B = 2, T = 6, L = 2;
    int32_t clean[12], corrupt[12];
    for (int i = 0; i < 12; i++) {
        clean[i] = (int32_t)((i * 7 + 3) % 11);
        corrupt[i] = i % T < 3 ? (int32_t)((i * 5 + 1) % 11) : clean[i];
    }
    hl_graph *g = hl_graph_new(0);
    hl_graph_set_grad_enabled(g, false);
    hl_mha_trace tr[2];
    hl_tensor *resid[3];
    hl_gpt_run capture = {.trace = tr, .resid = resid};
    hl_tensor *logits = hl_gpt_forward(g, m, clean, B, T, &capture);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    hl_tensor *clean_logits = keep(logits), *clean_resid0 = keep(resid[0]);
    hl_tensor *clean_q1 = keep(tr[1].q), *clean_k1 = keep(tr[1].k), *clean_v1 = keep(tr[1].v);
    hl_tensor *clean_attn1 = keep(tr[1].attn), *clean_z0 = keep(tr[0].heads);
    hl_tensor *clean_z1 = keep(tr[1].heads);
    hl_graph_reset(g);
    hl_gpt_forward(g, m, corrupt, B, T, &capture);
    hl_tensor *corrupt_z0 = keep(tr[0].heads);
    hl_graph_reset(g);

    /* The whole residual stream entering layer 0. */
    hl_act_patch p = {.layer = 0, .act = HL_ACT_RESID_PRE, .value = clean_resid0};
    logits = hl_gpt_forward(g, m, corrupt, B, T, &(hl_gpt_run){.patches = &p, .n_patches = 1});
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    ck_assert(!memcmp(logits->data, clean_logits->data, logits->numel * sizeof(hl_real)));
    hl_graph_reset(g);

    /* q and k of layer 1: its pattern is the clean run's. */
    hl_act_patch qk[] = {{1, HL_ACT_Q, clean_q1, NULL}, {1, HL_ACT_K, clean_k1, NULL}};
    hl_gpt_run run = {.trace = tr, .patches = qk, .n_patches = 2};
    hl_gpt_forward(g, m, corrupt, B, T, &run);
    ck_assert(!memcmp(tr[1].attn->data, clean_attn1->data, clean_attn1->numel * sizeof(hl_real)));
    hl_graph_reset(g);

    /* z of head 1 in layer 0; then z at positions 1 and 4 of every head. */
    hl_tensor *head1 = mask(1, 2, (int[]){1}, 1), *pos = mask(2, T, (int[]){1, 4}, 2);
    p = (hl_act_patch){0, HL_ACT_Z, clean_z0, head1};
    run = (hl_gpt_run){.trace = tr, .patches = &p, .n_patches = 1};
    hl_gpt_forward(g, m, corrupt, B, T, &run);
    ck_assert(same_head_rows(tr[0].heads, clean_z0, 1, -1));
    ck_assert(same_head_rows(tr[0].heads, corrupt_z0, 0, -1));
    hl_graph_reset(g);
    p.where = pos;
    hl_gpt_forward(g, m, corrupt, B, T, &run);
    for (int t = 0; t < T; t++)
        ck_assert_msg(same_head_rows(tr[0].heads, t == 1 || t == 4 ? clean_z0 : corrupt_z0, -1, t),
                      "position %d", t);
    hl_graph_reset(g);

    /* The fused op with q, k, v and z patches against the composed ops. */
    hl_tensor *x = hl_tensor_new("x", 3, (int[]){B, T, 8}, false);
    hl_rng rng;
    hl_rng_seed(&rng, 9);
    hl_init_uniform(x, &rng, -1, 1);
    hl_tensor *half = mask(1, 2, (int[]){0}, 1);
    hl_act_patch all[] = {{0, HL_ACT_Q, clean_q1, NULL}, {0, HL_ACT_K, clean_k1, half},
                          {0, HL_ACT_V, clean_v1, NULL}, {0, HL_ACT_Z, clean_z1, head1}};
    const hl_mha_masks causal = {.causal = true};
    hl_tensor *out[2];
    for (int path = 0; path < 2; path++) {
        hl_mha_run r = {.patches = all, .n_patches = 4,
                        .path = path ? HL_MHA_FUSED : HL_MHA_COMPOSED};
        out[path] = keep(hl_mha_forward(g, &m->blocks[1].attn, x, x, x, &causal, &r));
        ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
        hl_graph_reset(g);
    }
    for (size_t i = 0; i < out[0]->numel; i++)
        ck_assert_msg(fabs(out[0]->data[i] - out[1]->data[i]) < 1e-5, "fused %g, composed %g",
                      (double)out[1]->data[i], (double)out[0]->data[i]);

    /* Bad patches: a value of another shape, a layer the model lacks. */
    p = (hl_act_patch){1, HL_ACT_Z, clean_resid0, NULL};
    hl_gpt_forward(g, m, corrupt, B, T, &(hl_gpt_run){.patches = &p, .n_patches = 1});
    ck_assert(hl_graph_failed(g));
    ck_assert_msg(strstr(hl_graph_message(g), "patch: the value (2,6,8) must have the "
                                              "activation's shape (2,2,6,4)"),
                  "%s", hl_graph_message(g));
    hl_graph_free(g);
    g = hl_graph_new(0);
    p = (hl_act_patch){L, HL_ACT_Z, clean_z0, NULL};
    hl_gpt_forward(g, m, corrupt, B, T, &(hl_gpt_run){.patches = &p, .n_patches = 1});
    ck_assert_msg(strstr(hl_graph_message(g), "gpt: patch 0 names layer 2"), "%s",
                  hl_graph_message(g));
    hl_graph_free(g);
    hl_tensor *all_kept[] = {clean_logits, clean_resid0, clean_q1, clean_k1, clean_v1,
                             clean_attn1, clean_z0, clean_z1, corrupt_z0, head1, pos, half, x,
                             out[0], out[1]};
    for (size_t i = 0; i < sizeof all_kept / sizeof all_kept[0]; i++)
        hl_tensor_free(all_kept[i]);
    hl_gpt_free(m);
}
END_TEST

START_TEST(test_gpt_config_round_trip)
{
    hl_gpt_config a = hl_toy_gpt_config(), b;
    a.mlp = true;
    a.dropout = 0.1;
    char text[512];
    hl_gpt_config_format(&a, text, sizeof text);
    hl_error err = {0};
    ck_assert_int_eq(hl_gpt_config_parse(text, &b, &err), HL_OK);
    ck_assert(a.vocab_in == b.vocab_in && a.vocab_out == b.vocab_out && a.n_ctx == b.n_ctx &&
              a.d_model == b.d_model && a.n_heads == b.n_heads && a.n_layers == b.n_layers &&
              a.mlp == b.mlp && a.norm == b.norm && a.dropout == b.dropout &&
              a.emb_std == b.emb_std);
    ck_assert_int_eq(b.layer_heads[0], a.n_heads);
    ck_assert_int_eq(hl_gpt_config_parse("vocab_in=3", &b, &err), HL_ERR_FORMAT);
    /* A pruned model: its layers keep their own head counts. */
    a.layer_heads[1] = 3;
    hl_gpt_config_format(&a, text, sizeof text);
    ck_assert_int_eq(hl_gpt_config_parse(text, &b, &err), HL_OK);
    ck_assert_int_eq(hl_gpt_layer_heads(&b, 0), 4);
    ck_assert_int_eq(hl_gpt_layer_heads(&b, 1), 3);
    hl_gpt *pruned = hl_gpt_new(&b, &err);
    ck_assert_ptr_nonnull(pruned);
    ck_assert_int_eq(pruned->blocks[1].attn.in_proj_weight->shape[0], 3 * 3 * 16);
    ck_assert_int_eq(pruned->blocks[1].attn.out_proj_weight->shape[1], 3 * 16);
    hl_gpt_free(pruned);
    /* Today's options, and older strings without them (learned, untied). */
    a.pos = HL_GPT_POS_ROPE;
    a.rope_base = 500;
    a.norm = HL_GPT_NORM_RMS;
    a.mlp = HL_GPT_MLP_SWIGLU;
    a.tie_embeddings = a.smear_keys = true;
    hl_gpt_config_format(&a, text, sizeof text);
    ck_assert_int_eq(hl_gpt_config_parse(text, &b, &err), HL_OK);
    ck_assert(b.pos == HL_GPT_POS_ROPE && b.rope_base == 500 && b.norm == HL_GPT_NORM_RMS &&
              b.mlp == HL_GPT_MLP_SWIGLU && b.tie_embeddings && b.smear_keys);
    /* The training recipe's options: written only when set. */
    ck_assert_ptr_null(strstr(text, "qk_norm"));
    ck_assert_ptr_null(strstr(text, "softcap"));
    a.mlp = HL_GPT_MLP_RELU2;
    a.qk_norm = true;
    a.softcap = 15.5;
    hl_gpt_config_format(&a, text, sizeof text);
    ck_assert_int_eq(hl_gpt_config_parse(text, &b, &err), HL_OK);
    ck_assert(b.mlp == HL_GPT_MLP_RELU2 && b.qk_norm && b.softcap == 15.5);
    ck_assert_str_eq(hl_gpt_mlp_name(HL_GPT_MLP_RELU2), "relu2");
    ck_assert_int_eq(hl_gpt_mlp_parse("relu2"), HL_GPT_MLP_RELU2);
    a.qk_norm = false;
    a.softcap = 0;
    ck_assert_int_eq(hl_gpt_config_parse("vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 "
                                         "n_layers=1 mlp=1 layernorm=1 dropout=0 emb_std=1",
                                         &b, &err), HL_OK);
    ck_assert(b.pos == HL_GPT_POS_LEARNED && !b.tie_embeddings && !b.smear_keys);
    ck_assert_int_eq(hl_gpt_config_parse("vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 "
                                         "n_layers=1 mlp=1 layernorm=1 dropout=0 emb_std=1 "
                                         "layer_heads=2 pos=rope tie=1\n", &b, &err), HL_OK);
    ck_assert(b.pos == HL_GPT_POS_ROPE && b.tie_embeddings);
    static const char *const bad[] = {
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=9 layernorm=1 "
        "dropout=0 emb_std=1",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 no_bias=x",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 kv_heads=0",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 no_bias=hq",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 norm_eps=2",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 pos=alibi",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 tie=2",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 rope_base=-1",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 smear=1 tie=0 smear=0",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 softcap=0",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 softcap=inf",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=1 layernorm=1 "
        "dropout=0 emb_std=1 layer_heads=2 qk_norm=2",
        "vocab_in=3 vocab_out=3 n_ctx=4 d_model=4 n_heads=2 n_layers=1 mlp=5 layernorm=1 "
        "dropout=0 emb_std=1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(hl_gpt_config_parse(bad[i], &b, &err) == HL_ERR_FORMAT, "%s", bad[i]);
    /* The options of pretrained architectures round-trip, each written only when set. */
    hl_gpt_config gqa = {.vocab_in = 9, .vocab_out = 9, .n_ctx = 8, .d_model = 16, .n_heads = 4,
                         .n_layers = 2, .mlp = HL_GPT_MLP_GELU_TANH, .norm = HL_GPT_NORM_RMS,
                         .emb_std = 0.02, .pos = HL_GPT_POS_ROPE, .n_kv_heads = 2,
                         .layer_kv_heads = {2, 1}, .layer_heads = {4, 2}, .rotary_dims = 2,
                         .mlp_width = 24, .norm_eps = 1e-6, .parallel_residual = true,
                         .no_qkv_bias = true, .no_mlp_bias = true, .no_head_bias = true};
    char gqa_text[1024];
    ck_assert_int_lt(hl_gpt_config_format(&gqa, gqa_text, sizeof gqa_text), (int)sizeof gqa_text);
    ck_assert_int_eq(hl_gpt_config_parse(gqa_text, &b, &err), HL_OK);
    ck_assert_msg(b.mlp == gqa.mlp && b.n_kv_heads == 2 && b.layer_kv_heads[0] == 2 &&
                  b.layer_kv_heads[1] == 1 && b.layer_heads[1] == 2 && b.rotary_dims == 2 &&
                  b.mlp_width == 24 && b.norm_eps == 1e-6 && b.parallel_residual &&
                  b.no_qkv_bias && !b.no_out_bias && b.no_mlp_bias && b.no_head_bias,
                  "%s", gqa_text);
    ck_assert_ptr_nonnull(strstr(gqa_text, "no_bias=qmh"));
    char plain[512];
    hl_gpt_config_format(&a, plain, sizeof plain);
    ck_assert_ptr_null(strstr(plain, "kv_heads"));
    /* Tying needs one vocabulary; rotary an even head width. */
    hl_gpt_config tie = {.vocab_in = 5, .vocab_out = 4, .n_ctx = 4, .d_model = 4, .n_heads = 2,
                         .n_layers = 1, .emb_std = 1, .tie_embeddings = true};
    err = (hl_error){0};
    ck_assert_ptr_null(hl_gpt_new(&tie, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "vocab_in = vocab_out"));
    hl_gpt_config odd = {.vocab_in = 5, .vocab_out = 5, .n_ctx = 4, .d_model = 6, .n_heads = 2,
                         .n_layers = 1, .emb_std = 1, .pos = HL_GPT_POS_ROPE};
    err = (hl_error){0};
    ck_assert_ptr_null(hl_gpt_new(&odd, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "even head width"));
    /* Partial rotary: the message says which condition failed. */
    hl_gpt_config partial = {.vocab_in = 5, .vocab_out = 5, .n_ctx = 4, .d_model = 8,
                             .n_heads = 2, .n_layers = 1, .emb_std = 1, .rotary_dims = 6};
    err = (hl_error){0};
    ck_assert_ptr_null(hl_gpt_new(&partial, &err));
    ck_assert_msg(strstr(err.message, "rotary_dims 6 needs rope positions"), "%s", err.message);
    partial.pos = HL_GPT_POS_ROPE;
    err = (hl_error){0};
    ck_assert_ptr_null(hl_gpt_new(&partial, &err));
    ck_assert_msg(strstr(err.message, "rotary_dims 6 must be even and at most the head width, 4"),
                  "%s", err.message);
    /* A context without a learned table to pay for it is still bounded. */
    odd.d_model = 4;
    odd.n_ctx = HL_GPT_MAX_CTX + 1;
    err = (hl_error){0};
    ck_assert_ptr_null(hl_gpt_new(&odd, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "HL_GPT_MAX_CTX"));
}
END_TEST

/* The training recipe on a GPT with rotary positions: packed documents give
 * each document's logits as if it were alone (attention is relative under
 * rope and never crosses a boundary, nor do smeared keys), on both attention
 * paths; QK-norm
 * makes the logits blind to the scale of q and k; the loss is the
 * soft-capped cross-entropy. */
START_TEST(test_gpt_recipe)
{
    hl_gpt_config cfg = {.vocab_in = 11, .vocab_out = 7, .n_ctx = 12, .d_model = 16,
                         .n_heads = 2, .n_layers = 2, .mlp = HL_GPT_MLP_RELU2,
                         .norm = HL_GPT_NORM_RMS, .pos = HL_GPT_POS_ROPE, .emb_std = 0.5,
                         .qk_norm = true, .softcap = 4, .smear_keys = true};
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_rng rng;
    hl_rng_seed(&rng, 77);
    hl_gpt_init_weights(m, &rng);
    ck_assert(m->blocks[1].attn.k_norm->data[3] == 1); /* gains start at 1 */
    const int T = 12, first = 5, V = 7;
    int32_t tokens[12], targets[12];
    for (int t = 0; t < T; t++) {
        tokens[t] = (int32_t)((3 * t + 1) % 11);
        targets[t] = (int32_t)((5 * t + 2) % 7);
    }
    hl_tensor *ids = hl_tensor_new("doc_ids", 2, (int[]){1, T}, false);
    for (int t = 0; t < T; t++)
        ids->data[t] = t < first ? 0 : 1;
    hl_graph *g = hl_graph_new(0);
    hl_mha_trace trace[2];
    hl_tensor *fused = hl_gpt_forward(g, m, tokens, 1, T, &(hl_gpt_run){.doc_ids = ids});
    hl_tensor *composed =
        hl_gpt_forward(g, m, tokens, 1, T, &(hl_gpt_run){.doc_ids = ids, .trace = trace});
    hl_tensor *head = hl_gpt_forward(g, m, tokens, 1, first, NULL);
    hl_tensor *tail = hl_gpt_forward(g, m, tokens + first, 1, T - first, NULL);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    tu_assert_close("packed, fused vs composed", fused->data, composed->data, (size_t)T * V, 1e-5);
    tu_assert_close("first document alone", fused->data, head->data, (size_t)first * V, 1e-5);
    tu_assert_close("second document alone", fused->data + first * V, tail->data,
                    (size_t)(T - first) * V, 1e-4);
    ck_assert(trace[0].attn->data[(size_t)first * T] == 0); /* no look back across */
    /* q and k three times larger: the same logits. */
    hl_tensor *before = hl_gpt_forward(g, m, tokens, 1, T, NULL);
    hl_tensor *w = m->blocks[0].attn.in_proj_weight;
    for (int i = 0; i < 2 * 16 * 16; i++)
        w->data[i] *= 3;
    for (int i = 0; i < 2 * 16; i++)
        m->blocks[0].attn.in_proj_bias->data[i] *= 3;
    hl_tensor *after = hl_gpt_forward(g, m, tokens, 1, T, NULL);
    tu_assert_close("q and k scaled", before->data, after->data, (size_t)T * V, 1e-4);
    /* The model's loss is the soft-capped cross-entropy. */
    const double loss = hl_gpt_loss(g, m, after, targets, -1)->data[0];
    ck_assert(loss == hl_cross_entropy_softcap(g, after, targets, -1, 4)->data[0]);
    ck_assert(fabs((double)hl_gpt_logit(&m->cfg, 10) - 4 * tanh(2.5)) < 1e-6);
    ck_assert(hl_gpt_logit(&m->cfg, -1e9f) == -4);
    /* Document ids of the wrong shape: an error naming the mask. */
    hl_tensor *wrong = hl_tensor_new("doc_ids", 2, (int[]){2, T}, false);
    tu_expect_error(g, hl_gpt_forward(g, m, tokens, 1, T, &(hl_gpt_run){.doc_ids = wrong}),
                    "doc_ids", "(2,12)", NULL);
    hl_tensor_free(wrong);
    hl_tensor_free(ids);
    hl_graph_free(g);
    hl_gpt_free(m);
}
END_TEST

START_TEST(test_gpt_errors)
{
    hl_error err = {0};
    hl_gpt_config cfg = hl_toy_gpt_config();
    cfg.n_heads = 5;
    ck_assert_ptr_null(hl_gpt_new(&cfg, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "not divisible"));
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_gpt_load("tests/fixtures/no-such-file.safetensors", &err));
    ck_assert_int_eq(err.status, HL_ERR_IO);
    hl_error_clear(&err);
    /* The MHA fixture has no config: a clear error, not a crash. */
    ck_assert_ptr_null(hl_gpt_load("tests/fixtures/mha/self/weights.safetensors", &err));
    ck_assert_ptr_nonnull(strstr(err.message, "config"));

    /* A model file with an infinite weight: refused, naming file and tensor. */
    cfg = hl_toy_gpt_config();
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    char dir[] = "/tmp/headlab-gpt-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    m->tok_emb->data[2] = (hl_real)-INFINITY;
    hl_gpt_meta meta = {0};
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &meta, &err), HL_OK);
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_gpt_load(path, &err));
    char part[192];
    snprintf(part, sizeof part, "%s: tensor \"%s\" holds -infinity at element 2", path,
             m->tok_emb->name);
    ck_assert_msg(strstr(err.message, part), "\"%s\" lacks \"%s\"", err.message, part);
    /* A tensor the model has no place for (a tied head stored anyway, a
     * bigger model's layer): refused, not ignored. */
    hl_error_clear(&err);
    m->tok_emb->data[2] = 0;
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &meta, &err), HL_OK);
    hl_safetensors *f = NULL;
    ck_assert(hl_safetensors_read(path, &f, &err) == HL_OK);
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    for (size_t i = 0; i < hl_safetensors_count(f); i++) {
        const hl_safetensors_entry_info *e = hl_safetensors_entry(f, i);
        ck_assert(hl_safetensors_writer_add_raw(w, e->name, e->dtype, e->rank, e->shape, e->data,
                                                &err) == HL_OK);
    }
    ck_assert(hl_safetensors_writer_add(w, "blocks.9.attn.out_proj.weight", m->tok_emb,
                                        HL_DTYPE_F32, &err) == HL_OK);
    ck_assert(hl_safetensors_writer_set_metadata(w, "config", hl_safetensors_metadata(f, "config"),
                                                 &err) == HL_OK);
    hl_safetensors_free(f);
    ck_assert(hl_safetensors_writer_save(w, path, &err) == HL_OK);
    hl_safetensors_writer_free(w);
    ck_assert_ptr_null(hl_gpt_load(path, &err));
    ck_assert_msg(strstr(err.message, "tensor \"blocks.9.attn.out_proj.weight\" is not in the "
                                      "model"), "%s", err.message);
    unlink(path);
    rmdir(dir);
    hl_gpt_free(m);

    m = hl_gpt_new(&cfg, &err);
    hl_graph *g = hl_graph_new(0);
    int32_t tokens[40] = {0};
    tu_expect_error(g, hl_gpt_forward(g, m, tokens, 1, 40, NULL), "gpt", "n_ctx 32", NULL);
    hl_graph_reset(g);
    tokens[3] = 99;
    tu_expect_error(g, hl_gpt_forward(g, m, tokens, 1, 8, NULL), "embedding", "99", NULL);
    hl_graph_free(g);
    hl_gpt_free(m);
}
END_TEST

START_TEST(test_gpt_size_limits)
{
    /* Refused before allocating: more heads than head sets can name, more
     * parameters than HL_GPT_MAX_PARAMS (17.7e9 here: 70 GB of floats), and a
     * config whose count overflows 64 bits (and 4·d_model an int). */
    hl_error err = {0};
    hl_gpt_config cfg = hl_toy_gpt_config();
    cfg.n_heads = HL_HEADS_MAX + 2;
    cfg.d_model = 2 * cfg.n_heads;
    ck_assert_ptr_null(hl_gpt_new(&cfg, &err));
    ck_assert_msg(strstr(err.message, "n_heads 258 is over the limit of 256"), "%s", err.message);
    hl_error_clear(&err);
    cfg = hl_toy_gpt_config();
    cfg.d_model = 27156;
    cfg.n_layers = 2;
    cfg.mlp = true;
    ck_assert_ptr_null(hl_gpt_new(&cfg, &err));
    ck_assert_msg(strstr(err.message, "asks for 17701014028 parameters, over the limit of "
                                      "1073741824"),
                  "%s", err.message);
    hl_error_clear(&err);
    cfg.d_model = 1 << 30;
    cfg.n_heads = 1;
    cfg.n_layers = HL_GPT_MAX_LAYERS;
    ck_assert_ptr_null(hl_gpt_new(&cfg, &err));
    ck_assert_msg(strstr(err.message, "more than 2^64 parameters"), "%s", err.message);
}
END_TEST

/* hl_gpt_config_check refuses what hl_gpt_new would (an epsilon that is 0 or
 * subnormal as hl_real, a rotary base the attention refuses: it passed the
 * check before), and hl_gpt_count_parameters is the values the model holds,
 * QK-norm's gains included (they were left out). */
START_TEST(test_gpt_config_check_and_count)
{
    hl_error err = {0};
    hl_gpt_config cfg = hl_toy_gpt_config();
    cfg.norm = HL_GPT_NORM_RMS;
    cfg.norm_eps = 1e-320;
    ck_assert_int_eq(hl_gpt_config_check(&cfg, &err), HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "norm_eps 0 or a normal " HL_REAL_NAME), "%s",
                  err.message);
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_gpt_new(&cfg, &err));
    hl_error_clear(&err);
    hl_gpt_config parsed;
    ck_assert_int_eq(hl_gpt_config_parse("vocab_in=5 vocab_out=5 n_ctx=4 d_model=4 n_heads=1 "
                                         "n_layers=1 norm_eps=1e-320", &parsed, &err),
                     HL_ERR_FORMAT);
    hl_error_clear(&err);
    cfg.norm_eps = 0;
    cfg.pos = HL_GPT_POS_ROPE;
    cfg.rope_base = 0.5;
    ck_assert_int_eq(hl_gpt_config_check(&cfg, &err), HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "rope_base 0 or in (1, "), "%s", err.message);
    hl_error_clear(&err);
    cfg.rope_base = 0;
    hl_mha m;
    hl_params *p = hl_params_new();
    ck_assert_int_eq(hl_mha_declare(&m, p, "a.", &(hl_mha_config){.embed_dim = 4,
                                                                    .num_heads = 1,
                                                                    .qk_norm = true,
                                                                    .qk_norm_eps = 1e-320},
                                    &err), HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "qk_norm_eps"), "%s", err.message);
    hl_error_clear(&err);
    hl_params_free(p);
    /* A layer's key/value heads: more than the model's, than the layer's
     * heads, or negative (hl_gpt_new refused them, naming no layer). */
    hl_gpt_config grouped = hl_toy_gpt_config();
    grouped.n_kv_heads = 2;
    const int kv[][2] = {{-3, 0}, {3, 0}, {2, 1}};
    for (int i = 0; i < 3; i++) {
        grouped.layer_kv_heads[1] = kv[i][0];
        grouped.layer_heads[1] = kv[i][1];
        ck_assert_int_eq(hl_gpt_config_check(&grouped, &err), HL_ERR_ARG);
        ck_assert_msg(strstr(err.message, "gpt: layer 1 has") &&
                          strstr(err.message, "key/value heads"), "%s", err.message);
        hl_error_clear(&err);
    }
    grouped.layer_kv_heads[1] = 1;
    ck_assert_int_eq(hl_gpt_config_check(&grouped, &err), HL_OK);
    /* No error record to fill: the status alone. */
    ck_assert_ptr_null(hl_gpt_new(&(hl_gpt_config){0}, NULL));
    /* No model, or patches at NULL: refused by the forward pass. */
    hl_graph *g = hl_graph_new(0);
    const int32_t tokens[2] = {1, 2};
    tu_expect_error(g, hl_gpt_forward(g, NULL, tokens, 1, 2, NULL), "gpt: the model is NULL",
                    NULL);
    hl_graph_reset(g);
    hl_gpt *toy = hl_gpt_new(&cfg, &err);
    ck_assert_msg(toy, "%s", err.message);
    tu_expect_error(g, hl_gpt_forward(g, toy, tokens, 1, 2, &(hl_gpt_run){.n_patches = 2}),
                    "gpt: 2 patches at NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_gpt_forward(g, toy, NULL, 1, 2, NULL), "gpt: the tokens are NULL",
                    NULL);
    hl_gpt_free(toy);
    hl_graph_free(g);
    for (int variant = 0; variant < 3; variant++) {
        cfg.qk_norm = variant > 0;
        cfg.tie_embeddings = variant == 2;
        cfg.vocab_out = cfg.vocab_in;
        ck_assert_int_eq(hl_gpt_config_check(&cfg, &err), HL_OK);
        hl_gpt *built = hl_gpt_new(&cfg, &err);
        ck_assert_msg(built, "%s", err.message);
        ck_assert_msg(hl_gpt_count_parameters(&cfg) == hl_params_n_values(built->params),
                      "variant %d: counted %llu, built %zu", variant,
                      (unsigned long long)hl_gpt_count_parameters(&cfg),
                      hl_params_n_values(built->params));
        hl_gpt_free(built);
    }
}
END_TEST

/* Sinusoidal positions: sin and cos of t / 10000^(2i/d), of RMS emb_std, in
 * place of the noise. */
START_TEST(test_gpt_sinusoidal_positions)
{
    hl_gpt_config cfg = {.vocab_in = 5, .vocab_out = 5, .n_ctx = 9, .d_model = 6, .n_heads = 2,
                         .n_layers = 1, .emb_std = 0.5};
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_gpt_init_positions_sinusoidal(m);
    double sum_sq = 0;
    for (int t = 0; t < 9; t++)
        for (int i = 0; i < 6; i++) {
            const double angle = t / pow(10000.0, (i / 2 * 2) / 6.0);
            const double want = 0.5 * sqrt(2.0) * (i % 2 ? cos(angle) : sin(angle));
            const double got = m->pos_emb->data[t * 6 + i];
            ck_assert_msg(fabs(got - want) < 1e-6, "t %d, i %d: %g, wanted %g", t, i, got, want);
            sum_sq += got * got;
        }
    /* Over many positions, the RMS tends to emb_std (here, 9 positions). */
    ck_assert_msg(fabs(sqrt(sum_sq / 54) - 0.5) < 0.1, "RMS %g", sqrt(sum_sq / 54));
    hl_gpt_free(m);
}
END_TEST

/* Grouped-query attention with an odd head width and no rotary positions
 * computes what the same model ungrouped does (it failed at the first step:
 * the split op was asked to rotate all 3 of each head's dims). */
START_TEST(test_gpt_grouped_odd_head_width)
{
    const hl_gpt_config cfg = {.vocab_in = 12, .vocab_out = 12, .n_ctx = 8, .d_model = 6,
                               .n_heads = 2, .n_kv_heads = 1, .n_layers = 1,
                               .mlp = HL_GPT_MLP_GELU, .norm = HL_GPT_NORM_LAYER, .emb_std = 1};
    hl_gpt *twin, *m = hm_grouped_model(&cfg, 4, false, &twin);
    const int32_t tokens[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    hl_graph *g = hl_graph_new(0);
    hl_tensor *a = hl_gpt_forward(g, m, tokens, 1, 8, NULL);
    hl_tensor *b = hl_gpt_forward(g, twin, tokens, 1, 8, NULL);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    tu_assert_close("grouped against ungrouped logits", a->data, b->data, a->numel, 1e-6);
    hl_graph_free(g);
    hl_gpt_free(twin);
    hl_gpt_free(m);
}
END_TEST

Suite *gpt_suite(void)
{
    Suite *s = suite_create("gpt");
    TCase *tc = tcase_create("gpt");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_gpt_matches_pytorch);
    tcase_add_test(tc, test_gpt_modern_matches_pytorch);
    tcase_add_test(tc, test_gpt_gradcheck);
    tcase_add_test(tc, test_gpt_patches);
    tcase_add_test(tc, test_gpt_forward_from);
    tcase_add_test(tc, test_gpt_sinusoidal_positions);
    tcase_add_test(tc, test_gpt_config_round_trip);
    tcase_add_test(tc, test_gpt_errors);
    tcase_add_test(tc, test_gpt_recipe);
    tcase_add_test(tc, test_gpt_size_limits);
    tcase_add_test(tc, test_gpt_config_check_and_count);
    tcase_add_test(tc, test_gpt_grouped_odd_head_width);
    suite_add_tcase(s, tc);
    return s;
}
