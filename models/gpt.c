/* A small GPT-style decoder composed of ops: see gpt.h. */
#include "models/gpt.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

static hl_tensor *declare(hl_params *p, const char *name, int rank, const int *shape)
{
    return hl_params_add(p, name, rank, shape);
}

static void declare_block(hl_gpt *m, int l, hl_error *err)
{
    const hl_gpt_config *c = &m->cfg;
    const int d = c->d_model, F = hl_gpt_mlp_width(c);
    const int fc_rows = c->mlp == HL_GPT_MLP_SWIGLU ? 2 * F : F;
    const int heads = hl_gpt_layer_heads(c, l), kv_heads = hl_gpt_layer_kv_heads(c, l);
    hl_gpt_block *b = &m->blocks[l];
    hl_params *p = m->params;
    char name[HL_NAME_MAX], prefix[HL_NAME_MAX];
#define NAME(suffix) (snprintf(name, sizeof name, "blocks.%d." suffix, l), name)
    if (c->norm) {
        b->ln1_w = declare(p, NAME("ln1.weight"), 1, &d);
        if (c->norm == HL_GPT_NORM_LAYER)
            b->ln1_b = declare(p, NAME("ln1.bias"), 1, &d);
    }
    snprintf(prefix, sizeof prefix, "blocks.%d.attn.", l);
    hl_mha_config attn = {.embed_dim = d, .num_heads = heads, .head_dim = d / c->n_heads,
                          .bias = !c->no_qkv_bias, .no_out_bias = c->no_out_bias,
                          .smear_keys = c->smear_keys, .kv_heads = kv_heads,
                          .qk_norm = c->qk_norm, .qk_norm_eps = hl_gpt_norm_eps(c),
                          .kv_of = kv_heads < heads ? m->kv_of[l] : NULL};
    if (c->pos == HL_GPT_POS_ROPE) {
        attn.rotary_base = c->rope_base > 0 ? c->rope_base : HL_GPT_ROPE_BASE;
        attn.rotary_dims = c->rotary_dims;
    }
    if (hl_mha_declare(&b->attn, p, prefix, &attn, err) != HL_OK)
        return;
    if (c->mlp) {
        if (c->norm) {
            b->ln2_w = declare(p, NAME("ln2.weight"), 1, &d);
            if (c->norm == HL_GPT_NORM_LAYER)
                b->ln2_b = declare(p, NAME("ln2.bias"), 1, &d);
        }
        b->fc_w = declare(p, NAME("mlp.fc.weight"), 2, (int[]){fc_rows, d});
        if (!c->no_mlp_bias)
            b->fc_b = declare(p, NAME("mlp.fc.bias"), 1, &fc_rows);
        b->proj_w = declare(p, NAME("mlp.proj.weight"), 2, (int[]){d, F});
        if (!c->no_mlp_bias)
            b->proj_b = declare(p, NAME("mlp.proj.bias"), 1, &d);
    }
#undef NAME
}

/* The MLP's width in 64 bits: a config being checked may ask for more than an int. */
static uint64_t mlp_width(const hl_gpt_config *cfg)
{
    const uint64_t d = (uint64_t)cfg->d_model;
    if (cfg->mlp && cfg->mlp_width > 0)
        return (uint64_t)cfg->mlp_width;
    switch (cfg->mlp) {
    case HL_GPT_MLP_GELU:
    case HL_GPT_MLP_GELU_TANH:
    case HL_GPT_MLP_RELU2:
        return 4 * d;
    case HL_GPT_MLP_SWIGLU:
        /* Llama's 2/3 of 4d, so that three matrices hold what GELU's two do. */
        return ((8 * d + 2) / 3 + 15) / 16 * 16;
    default:
        return 0;
    }
}

int hl_gpt_mlp_width(const hl_gpt_config *cfg) { return (int)mlp_width(cfg); }

/* a·b and a·b·c, saturating at UINT64_MAX. */
static uint64_t mul(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
static uint64_t product(uint64_t a, uint64_t b, uint64_t c) { return mul(mul(a, b), c); }

static uint64_t sum(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* The parameter values cfg asks for (saturating), from dims already checked >= 1. */
static uint64_t parameter_count(const hl_gpt_config *cfg)
{
    const uint64_t d = (uint64_t)cfg->d_model, head_dim = d / (uint64_t)cfg->n_heads;
    const uint64_t F = mlp_width(cfg);
    const uint64_t norm = cfg->norm == HL_GPT_NORM_LAYER ? 2 * d : cfg->norm ? d : 0;
    uint64_t n = product(cfg->vocab_in, d, 1);
    if (cfg->pos == HL_GPT_POS_LEARNED)
        n = sum(n, product(cfg->n_ctx, d, 1));
    n = sum(n, product(cfg->vocab_out, (cfg->tie_embeddings ? 0 : d) + !cfg->no_head_bias, 1));
    n = sum(n, norm);
    for (int l = 0; l < cfg->n_layers; l++) {
        const uint64_t heads = (uint64_t)hl_gpt_layer_heads(cfg, l);
        const uint64_t inner = product(heads, head_dim, 1);
        const uint64_t rows = inner + product(2, hl_gpt_layer_kv_heads(cfg, l), head_dim);
        n = sum(n, product(rows + inner, d, 1)); /* in- and out-projections */
        n = sum(n, (cfg->no_qkv_bias ? 0 : rows) + (cfg->no_qkv_bias || cfg->no_out_bias ? 0 : d));
        if (cfg->qk_norm)
            n = sum(n, 2 * head_dim); /* q's and k's gains */
        if (cfg->smear_keys)
            n = sum(n, heads);
        n = sum(n, product(cfg->mlp ? 2 : 1, norm, 1));
        if (cfg->mlp) {
            const uint64_t fc = cfg->mlp == HL_GPT_MLP_SWIGLU ? 2 * F : F;
            n = sum(n, sum(product(fc + F, d, 1), cfg->no_mlp_bias ? 0 : fc + d));
        }
    }
    return n;
}

/* Limits of fixed-size records and of memory, checked before anything is
 * allocated (and before any dim is multiplied in int arithmetic). */
static bool size_ok(const hl_gpt_config *cfg, hl_error *err)
{
    if (cfg->n_ctx > HL_GPT_MAX_CTX) {
        hl_error_set(err, HL_ERR_ARG, "gpt: n_ctx %d is over the limit of %d (HL_GPT_MAX_CTX)",
                     cfg->n_ctx, HL_GPT_MAX_CTX);
        return false;
    }
    if (cfg->n_heads > HL_HEADS_MAX) {
        hl_error_set(err, HL_ERR_ARG, "gpt: n_heads %d is over the limit of %d (HL_HEADS_MAX)",
                     cfg->n_heads, HL_HEADS_MAX);
        return false;
    }
    uint64_t n = parameter_count(cfg);
    if (n > HL_GPT_MAX_PARAMS) {
        char count[32];
        if (n == UINT64_MAX)
            snprintf(count, sizeof count, "more than 2^64");
        else
            snprintf(count, sizeof count, "%" PRIu64, n);
        hl_error_set(err, HL_ERR_ARG,
                     "gpt: the config asks for %s parameters, over the limit of %" PRIu64
                     " (HL_GPT_MAX_PARAMS)", count, (uint64_t)HL_GPT_MAX_PARAMS);
        return false;
    }
    return true;
}

/* Vaswani et al.'s sinusoids (dst[t][2i] = sin(t / 10000^(2i/D)), [2i+1] the
 * cos) of RMS std: sin and cos have RMS 1/√2, hence the √2. */
static void fill_sinusoids(hl_real *dst, int T, int D, double std)
{
    const double scale = std * sqrt(2.0);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) {
            const double angle = t * pow(10000.0, -(double)(i / 2 * 2) / D);
            dst[(size_t)t * D + i] = (hl_real)(scale * (i % 2 ? cos(angle) : sin(angle)));
        }
}

hl_status hl_gpt_config_check(const hl_gpt_config *cfg, hl_error *err)
{
    if (!cfg || cfg->vocab_in < 1 || cfg->vocab_out < 1 || cfg->n_ctx < 1 || cfg->d_model < 1 ||
        cfg->n_heads < 1 || cfg->n_layers < 1 || cfg->n_layers > HL_GPT_MAX_LAYERS ||
        !(cfg->dropout >= 0 && cfg->dropout < 1) || !(cfg->emb_std > 0) ||
        (unsigned)cfg->pos >= HL_GPT_POS_KINDS || (unsigned)cfg->norm >= HL_GPT_NORM_KINDS ||
        (unsigned)cfg->mlp >= HL_GPT_MLP_KINDS ||
        cfg->n_kv_heads < 0 || cfg->rotary_dims < 0 || cfg->mlp_width < 0 ||
        !(cfg->norm_eps == 0 || (cfg->norm_eps >= HL_REAL_MIN && cfg->norm_eps < 1)) ||
        !(cfg->rope_base == 0 || (cfg->rope_base > 1 && cfg->rope_base <= HL_REAL_MAX)) ||
        !(cfg->softcap >= 0 && isfinite(cfg->softcap)))
        return hl_error_set(err, HL_ERR_ARG,
                            "gpt: bad config (vocab_in, vocab_out, n_ctx, d_model, n_heads >= 1; "
                            "1 <= n_layers <= %d; 0 <= dropout < 1; emb_std > 0; known pos, "
                            "norm and mlp; rope_base 0 or in (1, %g]; n_kv_heads, rotary_dims, "
                            "mlp_width >= 0; norm_eps 0 or a normal %s below 1; softcap >= 0, "
                            "finite)", HL_GPT_MAX_LAYERS, (double)HL_REAL_MAX, HL_REAL_NAME);
    if (cfg->n_kv_heads > cfg->n_heads || (cfg->n_kv_heads && cfg->n_heads % cfg->n_kv_heads))
        return hl_error_set(err, HL_ERR_ARG, "gpt: %d key/value heads do not divide %d heads",
                            cfg->n_kv_heads, cfg->n_heads);
    if (cfg->rotary_dims && cfg->pos != HL_GPT_POS_ROPE)
        return hl_error_set(err, HL_ERR_ARG, "gpt: rotary_dims %d needs rope positions",
                            cfg->rotary_dims);
    if (cfg->rotary_dims && (cfg->rotary_dims % 2 || cfg->n_heads > cfg->d_model ||
                             cfg->rotary_dims > cfg->d_model / cfg->n_heads))
        return hl_error_set(err, HL_ERR_ARG, "gpt: rotary_dims %d must be even and at most the "
                            "head width, %d", cfg->rotary_dims, cfg->d_model / cfg->n_heads);
    if (cfg->tie_embeddings && cfg->vocab_in != cfg->vocab_out)
        return hl_error_set(err, HL_ERR_ARG, "gpt: tied embeddings need vocab_in = vocab_out, "
                            "not %d and %d", cfg->vocab_in, cfg->vocab_out);
    if (cfg->pos == HL_GPT_POS_ROPE && cfg->n_heads <= cfg->d_model &&
        (cfg->d_model / cfg->n_heads) % 2)
        return hl_error_set(err, HL_ERR_ARG, "gpt: rotary positions need an even head width, "
                            "not d_model %d / n_heads %d", cfg->d_model, cfg->n_heads);
    const int kv_max = cfg->n_kv_heads ? cfg->n_kv_heads : cfg->n_heads;
    for (int l = 0; l < cfg->n_layers; l++) {
        if (cfg->layer_heads[l] < 0 || cfg->layer_heads[l] > cfg->n_heads)
            return hl_error_set(err, HL_ERR_ARG, "gpt: layer %d has %d heads; it may have 1 to "
                                "%d", l, cfg->layer_heads[l], cfg->n_heads);
        if (cfg->layer_kv_heads[l] < 0 || cfg->layer_kv_heads[l] > kv_max ||
            hl_gpt_layer_kv_heads(cfg, l) > hl_gpt_layer_heads(cfg, l))
            return hl_error_set(err, HL_ERR_ARG, "gpt: layer %d has %d key/value heads for %d "
                                "heads; it may have 1 to %d, and no more than its heads", l,
                                cfg->layer_kv_heads[l], hl_gpt_layer_heads(cfg, l), kv_max);
    }
    if (cfg->d_model % cfg->n_heads)
        return hl_error_set(err, HL_ERR_ARG, "gpt: d_model %d is not divisible by n_heads %d",
                            cfg->d_model, cfg->n_heads);
    return size_ok(cfg, err) ? HL_OK : HL_ERR_ARG;
}

uint64_t hl_gpt_count_parameters(const hl_gpt_config *cfg) { return parameter_count(cfg); }

hl_gpt *hl_gpt_new(const hl_gpt_config *cfg, hl_error *err)
{
    if (hl_gpt_config_check(cfg, err) != HL_OK)
        return NULL;
    hl_gpt *m = calloc(1, sizeof *m);
    if (!m || !(m->params = hl_params_new())) {
        free(m);
        hl_error_set(err, HL_ERR_NOMEM, "gpt: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    /* Head h reads key/value head h / group; in a pruned layer a valid
     * placeholder until the pruning record sets it (hl_gpt_set_pruned). */
    const int group = cfg->n_kv_heads ? cfg->n_heads / cfg->n_kv_heads : 1;
    for (int l = 0; l < cfg->n_layers; l++)
        for (int h = 0; h < cfg->n_heads; h++) {
            const int kv = h / group, last = hl_gpt_layer_kv_heads(cfg, l) - 1;
            m->head_original[l][h] = (int16_t)h;
            m->kv_of[l][h] = (int16_t)(kv < last ? kv : last);
        }
    /* A private record: err may already hold an earlier, unrelated error. */
    hl_error local = {0};
    const int d = cfg->d_model;
    m->tok_emb = declare(m->params, "tok_emb.weight", 2, (int[]){cfg->vocab_in, d});
    if (cfg->pos == HL_GPT_POS_LEARNED)
        m->pos_emb = declare(m->params, "pos_emb.weight", 2, (int[]){cfg->n_ctx, d});
    for (int l = 0; l < cfg->n_layers && !hl_error_failed(&local); l++)
        declare_block(m, l, &local);
    if (cfg->norm) {
        m->lnf_w = declare(m->params, "ln_f.weight", 1, &d);
        if (cfg->norm == HL_GPT_NORM_LAYER)
            m->lnf_b = declare(m->params, "ln_f.bias", 1, &d);
    }
    if (!cfg->tie_embeddings)
        m->head_w = declare(m->params, "head.weight", 2, (int[]){cfg->vocab_out, d});
    if (!cfg->no_head_bias)
        m->head_b = declare(m->params, "head.bias", 1, &cfg->vocab_out);
    if (!hl_error_failed(&local) && hl_params_commit(m->params) != HL_OK)
        hl_error_set(&local, hl_params_error(m->params)->status, "gpt: %s",
                     hl_params_error(m->params)->message);
    if (!hl_error_failed(&local) && cfg->tie_embeddings)
        m->head_w = m->tok_emb;
    if (!hl_error_failed(&local) && cfg->pos == HL_GPT_POS_SINUSOIDAL) {
        m->pos_table = hl_tensor_new("pos_table", 2, (int[]){cfg->n_ctx, d}, false);
        if (m->pos_table)
            fill_sinusoids(m->pos_table->data, cfg->n_ctx, d, cfg->emb_std);
        else
            hl_error_set(&local, HL_ERR_NOMEM, "gpt: out of memory");
    }
    if (hl_error_failed(&local)) {
        hl_error_set(err, local.status, "%s", local.message);
        hl_gpt_free(m);
        return NULL;
    }
    return m;
}

void hl_gpt_free(hl_gpt *m)
{
    if (!m)
        return;
    hl_params_free(m->params);
    hl_tensor_free(m->pos_table);
    free(m);
}

static void init_linear(hl_tensor *w, hl_tensor *b, hl_rng *rng)
{
    int fan_in = w->shape[1];
    hl_init_kaiming_uniform(w, rng, fan_in);
    if (b)
        hl_init_kaiming_uniform(b, rng, fan_in);
}

static void init_layernorm(hl_tensor *w, hl_tensor *b)
{
    if (w)
        hl_tensor_fill(w, 1);
    if (b)
        hl_tensor_fill(b, 0);
}

void hl_gpt_init_weights(hl_gpt *m, hl_rng *rng)
{
    hl_init_normal(m->tok_emb, rng, 0, m->cfg.emb_std);
    if (m->pos_emb)
        hl_init_normal(m->pos_emb, rng, 0, m->cfg.emb_std);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        hl_gpt_block *b = &m->blocks[l];
        init_layernorm(b->ln1_w, b->ln1_b);
        init_linear(b->attn.in_proj_weight, b->attn.in_proj_bias, rng);
        init_linear(b->attn.out_proj_weight, b->attn.out_proj_bias, rng);
        if (b->attn.smear)
            hl_tensor_fill(b->attn.smear, 0);
        init_layernorm(b->attn.q_norm, NULL); /* QK-norm gains 1; no random numbers drawn */
        init_layernorm(b->attn.k_norm, NULL);
        init_layernorm(b->ln2_w, b->ln2_b);
        if (b->fc_w) {
            init_linear(b->fc_w, b->fc_b, rng);
            init_linear(b->proj_w, b->proj_b, rng);
        }
    }
    init_layernorm(m->lnf_w, m->lnf_b);
    if (!m->cfg.tie_embeddings)
        init_linear(m->head_w, m->head_b, rng);
    else if (m->head_b) /* the head's bias as an untied head's would be */
        hl_init_kaiming_uniform(m->head_b, rng, m->cfg.d_model);
}

void hl_gpt_init_positions_sinusoidal(hl_gpt *m)
{
    if (m->pos_emb)
        fill_sinusoids(m->pos_emb->data, m->cfg.n_ctx, m->cfg.d_model, m->cfg.emb_std);
}

hl_tensor *hl_gpt_normalize(hl_graph *g, const hl_gpt *m, hl_tensor *x, hl_tensor *w,
                            hl_tensor *b)
{
    const hl_real eps = (hl_real)hl_gpt_norm_eps(&m->cfg);
    switch (m->cfg.norm) {
    case HL_GPT_NORM_LAYER:
        return hl_layernorm(g, x, w, b, eps);
    case HL_GPT_NORM_RMS:
        return hl_rmsnorm(g, x, w, eps);
    default:
        return x;
    }
}

/* *h + branch, normalised, as one fused op that leaves the sum in *h; with no
 * branch, *h normalised. */
static hl_tensor *add_normalize(hl_graph *g, const hl_gpt *m, hl_tensor **h, hl_tensor *branch,
                                hl_tensor *w, hl_tensor *b)
{
    if (!branch)
        return hl_gpt_normalize(g, m, *h, w, b);
    const hl_real eps = (hl_real)hl_gpt_norm_eps(&m->cfg);
    switch (m->cfg.norm) {
    case HL_GPT_NORM_LAYER:
        return hl_add_layernorm(g, *h, branch, w, b, eps, h);
    case HL_GPT_NORM_RMS:
        return hl_add_rmsnorm(g, *h, branch, w, eps, h);
    default:
        return *h = hl_add(g, *h, branch);
    }
}

/* The MLP of block b on the normalised x. */
static hl_tensor *mlp(hl_graph *g, const hl_gpt *m, const hl_gpt_block *b, hl_tensor *x)
{
    hl_tensor *hidden;
    switch (m->cfg.mlp) {
    case HL_GPT_MLP_SWIGLU:
        hidden = hl_swiglu(g, hl_linear(g, x, b->fc_w, b->fc_b));
        break;
    case HL_GPT_MLP_GELU_TANH:
        hidden = hl_linear_gelu_tanh(g, x, b->fc_w, b->fc_b);
        break;
    case HL_GPT_MLP_RELU2:
        hidden = hl_relu2(g, hl_linear(g, x, b->fc_w, b->fc_b));
        break;
    default:
        hidden = hl_linear_gelu(g, x, b->fc_w, b->fc_b);
    }
    return hl_linear(g, hidden, b->proj_w, b->proj_b);
}

/* False, with the graph's error set, unless there is a model and each of
 * the run's patches names a layer and an activation. */
static bool run_valid(hl_graph *g, const hl_gpt *m, const hl_gpt_run *run)
{
    if (!m) {
        hl_error_set(&g->error, HL_ERR_ARG, "gpt: the model is NULL");
        return false;
    }
    if (run && (run->n_patches < 0 || (run->n_patches > 0 && !run->patches))) {
        hl_error_set(&g->error, HL_ERR_ARG, "gpt: %d patches at %s", run->n_patches,
                     run->patches ? "patches" : "NULL");
        return false;
    }
    for (int i = 0; run && i < run->n_patches; i++)
        if (run->patches[i].layer < 0 || run->patches[i].layer >= m->cfg.n_layers ||
            run->patches[i].act < 0 || run->patches[i].act >= HL_ACTS) {
            hl_error_set(&g->error, HL_ERR_ARG, "gpt: patch %d names layer %d, activation %d "
                         "(layers 0..%d, activations 0..%d)", i, run->patches[i].layer,
                         (int)run->patches[i].act, m->cfg.n_layers - 1, HL_ACTS - 1);
            return false;
        }
    return true;
}

/* Block l on the residual stream x: x = x + attn(norm1(x)), then
 * x = x + mlp(norm2(x)) (with a parallel residual, x = x + attn(norm1(x)) +
 * mlp(norm2(x))). Each addition is left to the next norm's fused add-norm
 * op (add_normalize): on entry and exit *h is the stream without *branch,
 * the output still to be added (NULL: none). A patch of this layer (mine,
 * n) needs the sum itself, so with patches the additions are made here. */
static void block(hl_graph *g, const hl_gpt *m, int l, const hl_gpt_run *run,
                  const hl_act_patch *mine, int n, hl_tensor **h, hl_tensor **branch)
{
    const hl_gpt_block *b = &m->blocks[l];
    const hl_real p = (hl_real)m->cfg.dropout;
    *h = hl_act_patch_apply(g, *h, HL_ACT_RESID_PRE, mine, n);
    hl_tensor *a = add_normalize(g, m, h, *branch, b->ln1_w, b->ln1_b);
    if (run && run->resid)
        run->resid[l] = *h;
    const hl_mha_masks causal = {.causal = true, .doc_ids = run ? run->doc_ids : NULL};
    hl_mha_run hooks = {0};
    if (run)
        hooks = (hl_mha_run){.gate = run->gate[l], .head_offset = run->head_offset[l],
                             .trace = run->trace ? &run->trace[l] : NULL,
                             .patches = mine, .n_patches = n};
    hl_tensor *y = hl_mha_forward(g, &b->attn, a, a, a, &causal, run ? &hooks : NULL);
    *branch = p > 0 ? hl_dropout(g, y, p) : y;
    if (b->fc_w && m->cfg.parallel_residual) { /* the MLP reads the block's input too */
        y = mlp(g, m, b, hl_gpt_normalize(g, m, *h, b->ln2_w, b->ln2_b));
        *branch = hl_add(g, *branch, p > 0 ? hl_dropout(g, y, p) : y);
    } else if (b->fc_w) {
        y = mlp(g, m, b, add_normalize(g, m, h, *branch, b->ln2_w, b->ln2_b));
        *branch = p > 0 ? hl_dropout(g, y, p) : y;
    }
    if (mine) { /* patches: the sum now, for RESID_POST and the next RESID_PRE */
        *h = hl_act_patch_apply(g, hl_add(g, *h, *branch), HL_ACT_RESID_POST, mine, n);
        *branch = NULL;
    }
}

/* Blocks first..n_layers-1 on the residual stream *h, as block() leaves it:
 * the stream in *h, the last output still to be added in *branch. */
static void run_blocks(hl_graph *g, const hl_gpt *m, int first, const hl_gpt_run *run,
                       hl_tensor **h, hl_tensor **branch)
{
    hl_act_patch *mine = run && run->n_patches
                             ? hl_graph_alloc(g, sizeof *mine * (size_t)run->n_patches)
                             : NULL;
    *branch = NULL;
    for (int l = first; l < m->cfg.n_layers; l++) {
        int n = 0; /* this layer's patches */
        for (int i = 0; mine && i < run->n_patches; i++)
            if (run->patches[i].layer == l)
                mine[n++] = run->patches[i];
        block(g, m, l, run, mine, n, h, branch);
    }
}

hl_tensor *hl_gpt_embed(hl_graph *g, const hl_gpt *m, const int32_t *tokens, int B, int T)
{
    if (hl_graph_failed(g))
        return &g->poison;
    if (!m || !tokens) {
        hl_error_set(&g->error, HL_ERR_ARG, "gpt: %s NULL", m ? "the tokens are" : "the model is");
        return &g->poison;
    }
    if (B < 1 || T < 1 || T > m->cfg.n_ctx) {
        hl_error_set(&g->error, HL_ERR_SHAPE,
                     "gpt: tokens (%d,%d) must be (B,T) with 1 <= T <= n_ctx %d", B, T,
                     m->cfg.n_ctx);
        return &g->poison;
    }
    int32_t *positions = hl_graph_alloc(g, (size_t)B * T * sizeof *positions);
    if (!positions)
        return &g->poison;
    for (size_t i = 0; i < (size_t)B * T; i++)
        positions[i] = (int32_t)(i % (size_t)T);
    hl_tensor *h = hl_embedding(g, m->tok_emb, tokens, 2, (int[]){B, T});
    hl_tensor *pos = m->pos_emb ? m->pos_emb : m->pos_table; /* NULL: rotary or none */
    if (pos)
        h = hl_add(g, h, hl_embedding(g, pos, positions, 2, (int[]){B, T}));
    const hl_real p = (hl_real)m->cfg.dropout;
    return p > 0 ? hl_dropout(g, h, p) : h;
}

hl_tensor *hl_gpt_forward(hl_graph *g, const hl_gpt *m, const int32_t *tokens, int B, int T,
                          const hl_gpt_run *run)
{
    if (hl_graph_failed(g) || !run_valid(g, m, run))
        return &g->poison;
    hl_tensor *h = hl_gpt_embed(g, m, tokens, B, T), *branch;
    run_blocks(g, m, 0, run, &h, &branch);
    hl_tensor *x = add_normalize(g, m, &h, branch, m->lnf_w, m->lnf_b);
    if (run && run->resid)
        run->resid[m->cfg.n_layers] = h;
    hl_tensor *logits = hl_linear(g, x, m->head_w, m->head_b);
    if (!hl_graph_failed(g))
        hl_tensor_set_name(logits, "logits");
    return hl_graph_failed(g) ? &g->poison : logits;
}

hl_tensor *hl_gpt_forward_from(hl_graph *g, const hl_gpt *m, hl_tensor *h, int first,
                               const hl_gpt_run *run)
{
    if (hl_graph_failed(g) || !run_valid(g, m, run))
        return &g->poison;
    if (first < 0 || first >= m->cfg.n_layers || !h || h->rank != 3 ||
        h->shape[2] != m->cfg.d_model || h->shape[1] > m->cfg.n_ctx) {
        hl_error_set(&g->error, HL_ERR_SHAPE,
                     "gpt: forward from layer %d of 0..%d needs a residual stream (B,T,%d) "
                     "with T <= n_ctx %d", first, m->cfg.n_layers - 1, m->cfg.d_model,
                     m->cfg.n_ctx);
        return &g->poison;
    }
    hl_tensor *branch;
    run_blocks(g, m, first, run, &h, &branch);
    if (branch)
        h = hl_add(g, h, branch);
    if (run && run->resid)
        run->resid[m->cfg.n_layers] = h;
    return hl_graph_failed(g) ? &g->poison : h;
}

hl_tensor *hl_gpt_loss(hl_graph *g, const hl_gpt *m, hl_tensor *logits, const int32_t *targets,
                       int32_t ignore_index)
{
    if (m->cfg.softcap > 0)
        return hl_cross_entropy_softcap(g, logits, targets, ignore_index,
                                        (hl_real)m->cfg.softcap);
    return hl_cross_entropy(g, logits, targets, ignore_index);
}

hl_real hl_gpt_logit(const hl_gpt_config *cfg, hl_real z)
{
    if (!(cfg->softcap > 0))
        return z;
    return (hl_real)(cfg->softcap * tanh((double)z / cfg->softcap));
}

int hl_gpt_layer_heads(const hl_gpt_config *cfg, int l)
{
    return cfg->layer_heads[l] ? cfg->layer_heads[l] : cfg->n_heads;
}

int hl_gpt_layer_kv_heads(const hl_gpt_config *cfg, int l)
{
    if (!cfg->n_kv_heads || cfg->n_kv_heads == cfg->n_heads) /* one per query head */
        return hl_gpt_layer_heads(cfg, l);
    return cfg->layer_kv_heads[l] ? cfg->layer_kv_heads[l] : cfg->n_kv_heads;
}

double hl_gpt_norm_eps(const hl_gpt_config *cfg)
{
    return cfg->norm_eps > 0 ? cfg->norm_eps : HL_GPT_LN_EPS;
}

int hl_gpt_total_heads(const hl_gpt_config *cfg)
{
    int n = 0;
    for (int l = 0; l < cfg->n_layers; l++)
        n += hl_gpt_layer_heads(cfg, l);
    return n;
}

int hl_gpt_head_index(const hl_gpt_config *cfg, int l, int h)
{
    int n = 0;
    for (int k = 0; k < l; k++)
        n += hl_gpt_layer_heads(cfg, k);
    return n + h;
}

static const char *const pos_names[] = {"learned", "sinusoidal", "rope", "none"};
static const char *const norm_names[] = {"none", "layernorm", "rmsnorm"};
static const char *const mlp_names[] = {"none", "gelu", "swiglu", "gelu_tanh", "relu2"};
_Static_assert(sizeof pos_names / sizeof *pos_names == HL_GPT_POS_KINDS, "a name per pos");
_Static_assert(sizeof norm_names / sizeof *norm_names == HL_GPT_NORM_KINDS, "a name per norm");
_Static_assert(sizeof mlp_names / sizeof *mlp_names == HL_GPT_MLP_KINDS, "a name per mlp");

static int find_name(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (!strcmp(names[i], name))
            return i;
    return -1;
}

const char *hl_gpt_pos_name(hl_gpt_pos pos)
{
    return (unsigned)pos < HL_GPT_POS_KINDS ? pos_names[pos] : "?";
}
const char *hl_gpt_norm_name(hl_gpt_norm norm)
{
    return (unsigned)norm < HL_GPT_NORM_KINDS ? norm_names[norm] : "?";
}
const char *hl_gpt_mlp_name(hl_gpt_mlp mlp)
{
    return (unsigned)mlp < HL_GPT_MLP_KINDS ? mlp_names[mlp] : "?";
}
int hl_gpt_pos_parse(const char *name) { return find_name(pos_names, HL_GPT_POS_KINDS, name); }
int hl_gpt_norm_parse(const char *name) { return find_name(norm_names, HL_GPT_NORM_KINDS, name); }
int hl_gpt_mlp_parse(const char *name) { return find_name(mlp_names, HL_GPT_MLP_KINDS, name); }

/* mlp= and layernorm= keep their old places and meanings for 0 and 1 (2 is
 * SwiGLU and RMSNorm); the later options follow layer_heads by name. */
int hl_gpt_config_format(const hl_gpt_config *c, char *buf, size_t size)
{
    int n = snprintf(buf, size,
                     "vocab_in=%d vocab_out=%d n_ctx=%d d_model=%d n_heads=%d n_layers=%d "
                     "mlp=%d layernorm=%d dropout=%.17g emb_std=%.17g layer_heads=",
                     c->vocab_in, c->vocab_out, c->n_ctx, c->d_model, c->n_heads, c->n_layers,
                     (int)c->mlp, (int)c->norm, c->dropout, c->emb_std);
    for (int l = 0; l < c->n_layers && n >= 0 && (size_t)n < size; l++)
        n += snprintf(buf + n, size - (size_t)n, l ? ",%d" : "%d", hl_gpt_layer_heads(c, l));
    if (n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, " pos=%s rope_base=%.17g tie=%d smear=%d",
                      hl_gpt_pos_name(c->pos), c->rope_base, c->tie_embeddings, c->smear_keys);
    /* The options of pretrained architectures and of the training recipe
     * (qk_norm, softcap), only where they differ from
     * the defaults, so that a model without them keeps its config string. */
#define APPEND(...)                                                                     \
    do {                                                                                \
        if (n >= 0 && (size_t)n < size)                                                 \
            n += snprintf(buf + n, size - (size_t)n, __VA_ARGS__);                      \
    } while (0)
    if (c->n_kv_heads)
        APPEND(" kv_heads=%d", c->n_kv_heads);
    for (int l = 0; l < c->n_layers; l++)
        if (c->layer_kv_heads[l]) {
            for (int k = 0; k < c->n_layers; k++)
                APPEND(k ? ",%d" : " layer_kv_heads=%d", hl_gpt_layer_kv_heads(c, k));
            break;
        }
    if (c->rotary_dims)
        APPEND(" rotary_dims=%d", c->rotary_dims);
    if (c->mlp_width)
        APPEND(" mlp_width=%d", c->mlp_width);
    if (c->norm_eps > 0)
        APPEND(" norm_eps=%.17g", c->norm_eps);
    if (c->parallel_residual)
        APPEND(" parallel=1");
    if (c->no_qkv_bias || c->no_out_bias || c->no_mlp_bias || c->no_head_bias)
        APPEND(" no_bias=%s%s%s%s", c->no_qkv_bias ? "q" : "", c->no_out_bias ? "o" : "",
               c->no_mlp_bias ? "m" : "", c->no_head_bias ? "h" : "");
    if (c->qk_norm)
        APPEND(" qk_norm=1");
    if (c->softcap > 0)
        APPEND(" softcap=%.17g", c->softcap);
#undef APPEND
    return n;
}

/* "4,3,..." into n_layers values 1..max; false for anything else. */
static bool parse_counts(const char *value, int n_layers, int max, int *out)
{
    const char *p = value;
    for (int l = 0; l < n_layers; l++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || *p == '-' || *p == '+' || v < 1 || v > max || (l + 1 < n_layers ? *end != ',' : *end != 0))
            return false;
        out[l] = (int)v;
        p = end + 1;
    }
    return true;
}

/* A whole number >= 1 into *out; false for anything else. */
static bool parse_positive(const char *value, int *out)
{
    char *end;
    long v = strtol(value, &end, 10);
    if (end == value || *end || v < 1 || v > INT_MAX)
        return false;
    *out = (int)v;
    return true;
}

/* The letters of no_bias= (q, o, m, h, each at most once and in that order). */
static bool parse_no_bias(const char *value, hl_gpt_config *c)
{
    const char *p = value;
    bool *flags[4] = {&c->no_qkv_bias, &c->no_out_bias, &c->no_mlp_bias, &c->no_head_bias};
    for (int i = 0; i < 4; i++)
        if (*p == "qomh"[i]) {
            *flags[i] = true;
            p++;
        }
    return p != value && !*p;
}

/* One " key=value" of the options after layer_heads; false for anything else. */
static bool parse_option(const char **p, hl_gpt_config *c)
{
    char key[16], value[1600];
    int used = 0;
    if (sscanf(*p, " %15[a-z_]=%1599s%n", key, value, &used) != 2)
        return false;
    char *end;
    if (!strcmp(key, "pos")) {
        const int pos = hl_gpt_pos_parse(value);
        if (pos < 0)
            return false;
        c->pos = (hl_gpt_pos)pos;
    } else if (!strcmp(key, "rope_base")) {
        c->rope_base = strtod(value, &end);
        if (*end || !(c->rope_base == 0 || (c->rope_base > 1 && c->rope_base <= HL_REAL_MAX)))
            return false;
    } else if (!strcmp(key, "tie") || !strcmp(key, "smear") || !strcmp(key, "parallel") ||
               !strcmp(key, "qk_norm")) {
        if (strcmp(value, "0") && strcmp(value, "1"))
            return false;
        *(!strcmp(key, "tie")        ? &c->tie_embeddings
          : !strcmp(key, "smear")    ? &c->smear_keys
          : !strcmp(key, "parallel") ? &c->parallel_residual
                                     : &c->qk_norm) = value[0] == '1';
    } else if (!strcmp(key, "kv_heads")) {
        if (!parse_positive(value, &c->n_kv_heads))
            return false;
    } else if (!strcmp(key, "layer_kv_heads")) {
        if (!parse_counts(value, c->n_layers, HL_HEADS_MAX, c->layer_kv_heads))
            return false;
    } else if (!strcmp(key, "rotary_dims")) {
        if (!parse_positive(value, &c->rotary_dims))
            return false;
    } else if (!strcmp(key, "mlp_width")) {
        if (!parse_positive(value, &c->mlp_width))
            return false;
    } else if (!strcmp(key, "norm_eps")) {
        c->norm_eps = strtod(value, &end);
        if (*end || !(c->norm_eps >= HL_REAL_MIN && c->norm_eps < 1))
            return false;
    } else if (!strcmp(key, "softcap")) {
        c->softcap = strtod(value, &end);
        if (*end || !(c->softcap > 0 && isfinite(c->softcap)))
            return false;
    } else if (!strcmp(key, "no_bias")) {
        if (!parse_no_bias(value, c))
            return false;
    } else {
        return false;
    }
    *p += used;
    return true;
}

hl_status hl_gpt_config_parse(const char *text, hl_gpt_config *c, hl_error *err)
{
    int mlp, norm, used = 0;
    memset(c, 0, sizeof *c);
    if (!text ||
        sscanf(text,
               "vocab_in=%d vocab_out=%d n_ctx=%d d_model=%d n_heads=%d n_layers=%d mlp=%d "
               "layernorm=%d dropout=%lg emb_std=%lg%n",
               &c->vocab_in, &c->vocab_out, &c->n_ctx, &c->d_model, &c->n_heads, &c->n_layers,
               &mlp, &norm, &c->dropout, &c->emb_std, &used) != 10 ||
        c->n_layers < 1 || c->n_layers > HL_GPT_MAX_LAYERS || mlp < 0 ||
        mlp >= HL_GPT_MLP_KINDS || norm < 0 || norm >= HL_GPT_NORM_KINDS)
        return hl_error_set(err, HL_ERR_FORMAT, "gpt: cannot parse the model config \"%s\"",
                            text ? text : "(missing)");
    c->mlp = (hl_gpt_mlp)mlp;
    c->norm = (hl_gpt_norm)norm;
    /* Optional: " layer_heads=4,3" (written by every version that can prune). */
    const char *p = text + used;
    if (!strncmp(p, " layer_heads=", 13)) {
        p += 13;
        for (int l = 0; l < c->n_layers; l++) {
            char *end;
            long h = strtol(p, &end, 10);
            if (end == p || h < 1 || h > c->n_heads || (*end != ',' && l + 1 < c->n_layers))
                return hl_error_set(err, HL_ERR_FORMAT,
                                    "gpt: bad layer_heads in the model config \"%s\"", text);
            c->layer_heads[l] = (int)h;
            p = end + (*end == ',');
        }
    }
    /* Optional, by name, each once: pos, rope_base, tie, smear and the
     * options of pretrained architectures (older files have none: learned
     * positions, untied, no smearing, ...). */
    enum { MAX_OPTIONS = 16 };
    const char *seen[MAX_OPTIONS] = {0};
    int n_seen = 0;
    for (p += strspn(p, " \t\r\n"); *p; p += strspn(p, " \t\r\n")) {
        const char *at = p;
        const size_t key = strcspn(at, "=");
        for (int i = 0; i < n_seen; i++)
            if (!strncmp(seen[i], at, key + 1))
                return hl_error_set(err, HL_ERR_FORMAT, "gpt: option \"%.*s\" given twice in "
                                    "the model config", (int)key, at);
        if (n_seen == MAX_OPTIONS || !parse_option(&p, c))
            return hl_error_set(err, HL_ERR_FORMAT,
                                "gpt: bad option \"%.40s\" in the model config", at);
        seen[n_seen++] = at;
    }
    return HL_OK;
}

void hl_gpt_head_at(const hl_gpt_config *cfg, int i, int *l, int *h)
{
    *l = 0;
    while (*l + 1 < cfg->n_layers && i >= hl_gpt_layer_heads(cfg, *l))
        i -= hl_gpt_layer_heads(cfg, (*l)++);
    *h = i;
}
