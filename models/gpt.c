/* A small GPT-style decoder composed of ops: see gpt.h. */
#include "models/gpt.h"

#include <inttypes.h>
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
    const int d = m->cfg.d_model;
    hl_gpt_block *b = &m->blocks[l];
    hl_params *p = m->params;
    char name[HL_NAME_MAX], prefix[HL_NAME_MAX];
#define NAME(suffix) (snprintf(name, sizeof name, "blocks.%d." suffix, l), name)
    if (m->cfg.layernorm) {
        b->ln1_w = declare(p, NAME("ln1.weight"), 1, &d);
        b->ln1_b = declare(p, NAME("ln1.bias"), 1, &d);
    }
    snprintf(prefix, sizeof prefix, "blocks.%d.attn.", l);
    hl_mha_config attn = {.embed_dim = d, .num_heads = hl_gpt_layer_heads(&m->cfg, l),
                          .head_dim = d / m->cfg.n_heads, .bias = true};
    if (hl_mha_declare(&b->attn, p, prefix, &attn, err) != HL_OK)
        return;
    if (m->cfg.mlp) {
        if (m->cfg.layernorm) {
            b->ln2_w = declare(p, NAME("ln2.weight"), 1, &d);
            b->ln2_b = declare(p, NAME("ln2.bias"), 1, &d);
        }
        b->fc_w = declare(p, NAME("mlp.fc.weight"), 2, (int[]){4 * d, d});
        b->fc_b = declare(p, NAME("mlp.fc.bias"), 1, (int[]){4 * d});
        b->proj_w = declare(p, NAME("mlp.proj.weight"), 2, (int[]){d, 4 * d});
        b->proj_b = declare(p, NAME("mlp.proj.bias"), 1, &d);
    }
#undef NAME
}

/* a·b and a·b·c, saturating at UINT64_MAX. */
static uint64_t mul(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
static uint64_t product(uint64_t a, uint64_t b, uint64_t c) { return mul(mul(a, b), c); }

static uint64_t sum(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* The parameter values cfg asks for (saturating), from dims already checked >= 1. */
static uint64_t parameter_count(const hl_gpt_config *cfg)
{
    const uint64_t d = (uint64_t)cfg->d_model, head_dim = d / (uint64_t)cfg->n_heads;
    uint64_t n = sum(product(cfg->vocab_in, d, 1), product(cfg->n_ctx, d, 1));
    n = sum(n, product(cfg->vocab_out, d + 1, 1));
    if (cfg->layernorm)
        n = sum(n, 2 * d);
    for (int l = 0; l < cfg->n_layers; l++) {
        const uint64_t inner = product((uint64_t)hl_gpt_layer_heads(cfg, l), head_dim, 1);
        n = sum(n, sum(product(4, inner, d), 3 * inner + d)); /* in- and out-projections */
        if (cfg->layernorm)
            n = sum(n, product(cfg->mlp ? 4 : 2, d, 1));
        if (cfg->mlp)
            n = sum(n, sum(product(8, d, d), 5 * d));
    }
    return n;
}

/* Limits of fixed-size records and of memory, checked before anything is
 * allocated (and before any dim is multiplied in int arithmetic). */
static bool size_ok(const hl_gpt_config *cfg, hl_error *err)
{
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

hl_gpt *hl_gpt_new(const hl_gpt_config *cfg, hl_error *err)
{
    if (!cfg || cfg->vocab_in < 1 || cfg->vocab_out < 1 || cfg->n_ctx < 1 || cfg->d_model < 1 ||
        cfg->n_heads < 1 || cfg->n_layers < 1 || cfg->n_layers > HL_GPT_MAX_LAYERS ||
        !(cfg->dropout >= 0 && cfg->dropout < 1) || !(cfg->emb_std > 0)) {
        hl_error_set(err, HL_ERR_ARG,
                     "gpt: bad config (vocab_in, vocab_out, n_ctx, d_model, n_heads >= 1; "
                     "1 <= n_layers <= %d; 0 <= dropout < 1; emb_std > 0)",
                     HL_GPT_MAX_LAYERS);
        return NULL;
    }
    for (int l = 0; l < cfg->n_layers; l++)
        if (cfg->layer_heads[l] < 0 || cfg->layer_heads[l] > cfg->n_heads) {
            hl_error_set(err, HL_ERR_ARG, "gpt: layer %d has %d heads; it may have 1 to %d", l,
                         cfg->layer_heads[l], cfg->n_heads);
            return NULL;
        }
    if (cfg->d_model % cfg->n_heads) {
        hl_error_set(err, HL_ERR_ARG, "gpt: d_model %d is not divisible by n_heads %d",
                     cfg->d_model, cfg->n_heads);
        return NULL;
    }
    if (!size_ok(cfg, err))
        return NULL;
    hl_gpt *m = calloc(1, sizeof *m);
    if (!m || !(m->params = hl_params_new())) {
        free(m);
        hl_error_set(err, HL_ERR_NOMEM, "gpt: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    for (int l = 0; l < cfg->n_layers; l++)
        for (int h = 0; h < cfg->n_heads; h++)
            m->head_original[l][h] = (int16_t)h;
    /* A private record: err may already hold an earlier, unrelated error. */
    hl_error local = {0};
    const int d = cfg->d_model;
    m->tok_emb = declare(m->params, "tok_emb.weight", 2, (int[]){cfg->vocab_in, d});
    m->pos_emb = declare(m->params, "pos_emb.weight", 2, (int[]){cfg->n_ctx, d});
    for (int l = 0; l < cfg->n_layers && !hl_error_failed(&local); l++)
        declare_block(m, l, &local);
    if (cfg->layernorm) {
        m->lnf_w = declare(m->params, "ln_f.weight", 1, &d);
        m->lnf_b = declare(m->params, "ln_f.bias", 1, &d);
    }
    m->head_w = declare(m->params, "head.weight", 2, (int[]){cfg->vocab_out, d});
    m->head_b = declare(m->params, "head.bias", 1, &cfg->vocab_out);
    if (!hl_error_failed(&local) && hl_params_commit(m->params) != HL_OK)
        hl_error_set(&local, hl_params_error(m->params)->status, "gpt: %s",
                     hl_params_error(m->params)->message);
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
    hl_init_normal(m->pos_emb, rng, 0, m->cfg.emb_std);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        hl_gpt_block *b = &m->blocks[l];
        init_layernorm(b->ln1_w, b->ln1_b);
        init_linear(b->attn.in_proj_weight, b->attn.in_proj_bias, rng);
        init_linear(b->attn.out_proj_weight, b->attn.out_proj_bias, rng);
        init_layernorm(b->ln2_w, b->ln2_b);
        if (b->fc_w) {
            init_linear(b->fc_w, b->fc_b, rng);
            init_linear(b->proj_w, b->proj_b, rng);
        }
    }
    init_layernorm(m->lnf_w, m->lnf_b);
    init_linear(m->head_w, m->head_b, rng);
}

void hl_gpt_init_positions_sinusoidal(hl_gpt *m)
{
    const int T = m->cfg.n_ctx, D = m->cfg.d_model;
    /* sin and cos of RMS 1/sqrt(2), scaled to the RMS emb_std of the token
     * embedding, so neither swamps the other in the LayerNorm. */
    const double scale = m->cfg.emb_std * sqrt(2.0);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) {
            const double angle = t * pow(10000.0, -(double)(i / 2 * 2) / D);
            m->pos_emb->data[(size_t)t * D + i] =
                (hl_real)(scale * (i % 2 ? cos(angle) : sin(angle)));
        }
}

static hl_tensor *maybe_layernorm(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b)
{
    return w ? hl_layernorm(g, x, w, b, (hl_real)HL_GPT_LN_EPS) : x;
}

hl_tensor *hl_gpt_forward(hl_graph *g, const hl_gpt *m, const int32_t *tokens, int B, int T,
                          const hl_gpt_run *run)
{
    if (hl_graph_failed(g))
        return &g->poison;
    if (!tokens || B < 1 || T < 1 || T > m->cfg.n_ctx) {
        hl_error_set(&g->error, HL_ERR_SHAPE,
                     "gpt: tokens (%d,%d) must be (B,T) with 1 <= T <= n_ctx %d", B, T,
                     m->cfg.n_ctx);
        return &g->poison;
    }
    const hl_real p = (hl_real)m->cfg.dropout;
    int32_t *positions = hl_graph_alloc(g, (size_t)B * T * sizeof *positions);
    if (!positions)
        return &g->poison;
    for (int i = 0; i < B * T; i++)
        positions[i] = i % T;
    hl_tensor *h = hl_add(g, hl_embedding(g, m->tok_emb, tokens, 2, (int[]){B, T}),
                          hl_embedding(g, m->pos_emb, positions, 2, (int[]){B, T}));
    if (p > 0)
        h = hl_dropout(g, h, p);
    for (int i = 0; run && i < run->n_patches; i++)
        if (run->patches[i].layer < 0 || run->patches[i].layer >= m->cfg.n_layers ||
            run->patches[i].act < 0 || run->patches[i].act >= HL_ACTS) {
            hl_error_set(&g->error, HL_ERR_ARG, "gpt: patch %d names layer %d, activation %d "
                         "(layers 0..%d, activations 0..%d)", i, run->patches[i].layer,
                         (int)run->patches[i].act, m->cfg.n_layers - 1, HL_ACTS - 1);
            return &g->poison;
        }
    const hl_mha_masks causal = {.causal = true};
    hl_act_patch *mine = run && run->n_patches
                             ? hl_graph_alloc(g, sizeof *mine * (size_t)run->n_patches)
                             : NULL;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const hl_gpt_block *b = &m->blocks[l];
        int n = 0; /* this layer's patches */
        for (int i = 0; mine && i < run->n_patches; i++)
            if (run->patches[i].layer == l)
                mine[n++] = run->patches[i];
        h = hl_act_patch_apply(g, h, HL_ACT_RESID_PRE, mine, n);
        if (run && run->resid)
            run->resid[l] = h;
        hl_tensor *a = maybe_layernorm(g, h, b->ln1_w, b->ln1_b);
        hl_mha_run layer = {0};
        if (run)
            layer = (hl_mha_run){.gate = run->gate[l], .head_offset = run->head_offset[l],
                                 .trace = run->trace ? &run->trace[l] : NULL,
                                 .patches = mine, .n_patches = n};
        hl_tensor *y = hl_mha_forward(g, &b->attn, a, a, a, &causal, run ? &layer : NULL);
        h = hl_add(g, h, p > 0 ? hl_dropout(g, y, p) : y);
        if (b->fc_w) {
            hl_tensor *x = maybe_layernorm(g, h, b->ln2_w, b->ln2_b);
            y = hl_linear(g, hl_gelu(g, hl_linear(g, x, b->fc_w, b->fc_b)), b->proj_w, b->proj_b);
            h = hl_add(g, h, p > 0 ? hl_dropout(g, y, p) : y);
        }
        h = hl_act_patch_apply(g, h, HL_ACT_RESID_POST, mine, n);
    }
    if (run && run->resid)
        run->resid[m->cfg.n_layers] = h;
    h = maybe_layernorm(g, h, m->lnf_w, m->lnf_b);
    hl_tensor *logits = hl_linear(g, h, m->head_w, m->head_b);
    if (!hl_graph_failed(g))
        hl_tensor_set_name(logits, "logits");
    return hl_graph_failed(g) ? &g->poison : logits;
}

int hl_gpt_layer_heads(const hl_gpt_config *cfg, int l)
{
    return cfg->layer_heads[l] ? cfg->layer_heads[l] : cfg->n_heads;
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

int hl_gpt_config_format(const hl_gpt_config *c, char *buf, size_t size)
{
    int n = snprintf(buf, size,
                     "vocab_in=%d vocab_out=%d n_ctx=%d d_model=%d n_heads=%d n_layers=%d "
                     "mlp=%d layernorm=%d dropout=%.17g emb_std=%.17g layer_heads=",
                     c->vocab_in, c->vocab_out, c->n_ctx, c->d_model, c->n_heads, c->n_layers,
                     c->mlp, c->layernorm, c->dropout, c->emb_std);
    for (int l = 0; l < c->n_layers && n >= 0 && (size_t)n < size; l++)
        n += snprintf(buf + n, size - (size_t)n, l ? ",%d" : "%d", hl_gpt_layer_heads(c, l));
    return n;
}

hl_status hl_gpt_config_parse(const char *text, hl_gpt_config *c, hl_error *err)
{
    int mlp, layernorm, used = 0;
    memset(c, 0, sizeof *c);
    if (!text ||
        sscanf(text,
               "vocab_in=%d vocab_out=%d n_ctx=%d d_model=%d n_heads=%d n_layers=%d mlp=%d "
               "layernorm=%d dropout=%lg emb_std=%lg%n",
               &c->vocab_in, &c->vocab_out, &c->n_ctx, &c->d_model, &c->n_heads, &c->n_layers,
               &mlp, &layernorm, &c->dropout, &c->emb_std, &used) != 10 ||
        c->n_layers < 1 || c->n_layers > HL_GPT_MAX_LAYERS)
        return hl_error_set(err, HL_ERR_FORMAT, "gpt: cannot parse the model config \"%s\"",
                            text ? text : "(missing)");
    c->mlp = mlp != 0;
    c->layernorm = layernorm != 0;
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
    return HL_OK;
}

void hl_gpt_head_at(const hl_gpt_config *cfg, int i, int *l, int *h)
{
    *l = 0;
    while (*l + 1 < cfg->n_layers && i >= hl_gpt_layer_heads(cfg, *l))
        i -= hl_gpt_layer_heads(cfg, (*l)++);
    *h = i;
}
