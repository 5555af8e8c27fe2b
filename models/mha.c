/* Multi-head attention, composed of ops: see mha.h. */
#include "models/mha.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops.h"

static hl_tensor *declare(hl_params *p, const char *prefix, const char *name, int rank,
                          const int *shape)
{
    char full[HL_NAME_MAX];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return hl_params_add(p, full, rank, shape);
}

hl_status hl_mha_declare(hl_mha *m, hl_params *p, const char *prefix,
                         const hl_mha_config *cfg, hl_error *err)
{
    memset(m, 0, sizeof *m);
    if (!cfg || cfg->embed_dim < 1 || cfg->num_heads < 1 || cfg->kdim < 0 || cfg->vdim < 0 ||
        cfg->head_dim < 0)
        return hl_error_set(err, HL_ERR_ARG, "mha: embed_dim and num_heads must be positive");
    if (!(cfg->qk_norm_eps == 0 || (cfg->qk_norm_eps >= HL_REAL_MIN && cfg->qk_norm_eps < 1)))
        return hl_error_set(err, HL_ERR_ARG,
                            "mha: qk_norm_eps %g must be 0 (the default) or a normal %s below 1",
                            cfg->qk_norm_eps, HL_REAL_NAME);
    /* The base is used as an hl_real: one beyond its range would be inf. */
    if (!(cfg->rotary_base == 0 || (cfg->rotary_base > 1 && cfg->rotary_base <= HL_REAL_MAX)))
        return hl_error_set(err, HL_ERR_ARG, "mha: rotary_base %g must be 0 (off) or in (1, %g]",
                            cfg->rotary_base, (double)HL_REAL_MAX);
    if (!cfg->head_dim && cfg->embed_dim % cfg->num_heads != 0)
        return hl_error_set(err, HL_ERR_ARG,
                            "mha: embed_dim %d is not divisible by num_heads %d",
                            cfg->embed_dim, cfg->num_heads);
    m->cfg = *cfg;
    const int E = cfg->embed_dim;
    m->cfg.kdim = cfg->kdim ? cfg->kdim : E;
    m->cfg.vdim = cfg->vdim ? cfg->vdim : E;
    m->cfg.head_dim = cfg->head_dim ? cfg->head_dim : E / cfg->num_heads;
    if (cfg->rotary_base > 0 && m->cfg.head_dim % 2)
        return hl_error_set(err, HL_ERR_ARG, "mha: rotary positions need an even head width, "
                            "not %d", m->cfg.head_dim);
    m->cfg.rotary_dims = cfg->rotary_dims ? cfg->rotary_dims : m->cfg.head_dim;
    if (cfg->rotary_base > 0 &&
        (m->cfg.rotary_dims < 2 || m->cfg.rotary_dims % 2 || m->cfg.rotary_dims > m->cfg.head_dim))
        return hl_error_set(err, HL_ERR_ARG, "mha: rotary_dims %d must be even and 2..%d (the "
                            "head width)", cfg->rotary_dims, m->cfg.head_dim);
    m->cfg.kv_heads = cfg->kv_heads ? cfg->kv_heads : cfg->num_heads;
    const int H = cfg->num_heads, K = m->cfg.kv_heads;
    if (K < 1 || K > H || (!cfg->kv_of && H % K))
        return hl_error_set(err, HL_ERR_ARG, "mha: %d key/value heads for %d query heads (1 to "
                            "%d, dividing it unless kv_of maps them)", K, H, H);
    for (int h = 0; cfg->kv_of && h < H; h++)
        if (cfg->kv_of[h] < 0 || cfg->kv_of[h] >= K)
            return hl_error_set(err, HL_ERR_ARG, "mha: query head %d reads key/value head %d "
                                "of %d", h, cfg->kv_of[h], K);
    const int inner = H * m->cfg.head_dim; /* E, unless heads were pruned */
    const int rows = inner + 2 * K * m->cfg.head_dim;
    m->packed = m->cfg.kdim == E && m->cfg.vdim == E;
    if (!m->packed && K != H)
        return hl_error_set(err, HL_ERR_ARG, "mha: grouped-query attention needs kdim = vdim = "
                            "embed_dim");
    prefix = prefix ? prefix : "";
    if (m->packed) {
        m->in_proj_weight = declare(p, prefix, "in_proj_weight", 2, (int[]){rows, E});
    } else {
        m->q_proj_weight = declare(p, prefix, "q_proj_weight", 2, (int[]){inner, E});
        m->k_proj_weight = declare(p, prefix, "k_proj_weight", 2, (int[]){inner, m->cfg.kdim});
        m->v_proj_weight = declare(p, prefix, "v_proj_weight", 2, (int[]){inner, m->cfg.vdim});
    }
    if (cfg->bias)
        m->in_proj_bias = declare(p, prefix, "in_proj_bias", 1, (int[]){rows});
    m->out_proj_weight = declare(p, prefix, "out_proj.weight", 2, (int[]){E, inner});
    if (cfg->bias && !cfg->no_out_bias)
        m->out_proj_bias = declare(p, prefix, "out_proj.bias", 1, (int[]){E});
    if (cfg->smear_keys)
        m->smear = declare(p, prefix, "smear", 1, (int[]){cfg->num_heads});
    if (cfg->qk_norm) {
        m->q_norm = declare(p, prefix, "q_norm.weight", 1, &m->cfg.head_dim);
        m->k_norm = declare(p, prefix, "k_norm.weight", 1, &m->cfg.head_dim);
        m->cfg.qk_norm_eps = cfg->qk_norm_eps > 0 ? cfg->qk_norm_eps : HL_MHA_QK_NORM_EPS;
    }
    if (hl_error_failed(hl_params_error(p)))
        return hl_error_set(err, hl_params_error(p)->status, "%s", hl_params_error(p)->message);
    return HL_OK;
}

void hl_mha_init_weights(hl_mha *m, hl_rng *rng)
{
    const int E = m->cfg.embed_dim, inner = hl_mha_inner_dim(m);
    if (m->packed) {
        hl_init_xavier_uniform(m->in_proj_weight, rng, E, m->in_proj_weight->shape[0]);
    } else {
        hl_init_xavier_uniform(m->q_proj_weight, rng, E, inner);
        hl_init_xavier_uniform(m->k_proj_weight, rng, m->cfg.kdim, inner);
        hl_init_xavier_uniform(m->v_proj_weight, rng, m->cfg.vdim, inner);
    }
    hl_init_kaiming_uniform(m->out_proj_weight, rng, inner);
    if (m->in_proj_bias)
        hl_tensor_fill(m->in_proj_bias, 0);
    if (m->out_proj_bias)
        hl_tensor_fill(m->out_proj_bias, 0);
    if (m->smear) /* σ(0) = 1/2: each key starts as the mean of itself and its predecessor */
        hl_tensor_fill(m->smear, 0);
    if (m->q_norm) {
        hl_tensor_fill(m->q_norm, 1);
        hl_tensor_fill(m->k_norm, 1);
    }
}

int hl_mha_inner_dim(const hl_mha *m) { return m->cfg.num_heads * m->cfg.head_dim; }

int hl_mha_kv_head(const hl_mha *m, int h)
{
    return m->cfg.kv_of ? m->cfg.kv_of[h] : h / (m->cfg.num_heads / m->cfg.kv_heads);
}

/* The width of k's (and v's) projection: K·D. */
static int kv_inner_dim(const hl_mha *m) { return m->cfg.kv_heads * m->cfg.head_dim; }

/* Whether query heads share key/value heads (or read them out of order). */
static bool grouped(const hl_mha *m)
{
    return m->cfg.kv_heads != m->cfg.num_heads || m->cfg.kv_of;
}

hl_tensor *hl_mha_ungroup(hl_graph *g, const hl_mha *m, hl_tensor *x)
{
    if (!grouped(m))
        return x;
    const int H = m->cfg.num_heads;
    int *src = hl_graph_alloc(g, (size_t)H * sizeof *src);
    if (!src)
        return &g->poison;
    for (int h = 0; h < H; h++)
        src[h] = hl_mha_kv_head(m, h);
    return hl_gather_heads(g, x, src, H);
}

/* x (B,H,T,D) with rotary positions over its first rotary_dims. */
static hl_tensor *rotate(hl_graph *g, const hl_mha *m, hl_tensor *x)
{
    return m->cfg.rotary_dims == m->cfg.head_dim
               ? hl_rope(g, x, (hl_real)m->cfg.rotary_base)
               : hl_rope_partial(g, x, (hl_real)m->cfg.rotary_base, m->cfg.rotary_dims);
}

/* (B,L,E) -> (B,H,L,D) */
static hl_tensor *split_heads(hl_graph *g, hl_tensor *x, int heads, int head_dim)
{
    hl_tensor *split = hl_reshape(g, x, 4, (int[]){x->shape[0], x->shape[1], heads, head_dim});
    return hl_permute(g, split, (int[]){0, 2, 1, 3});
}

/* (B,H,T,D) -> (B,T,H·D) */
static hl_tensor *merge_heads(hl_graph *g, hl_tensor *x)
{
    hl_tensor *merged = hl_permute(g, x, (int[]){0, 2, 1, 3});
    return hl_reshape(g, merged, 3,
                      (int[]){merged->shape[0], merged->shape[1], merged->shape[2] * merged->shape[3]});
}

/* Bias slice `part` (0 q, 1 k, 2 v) of the packed in_proj_bias, or NULL. */
static hl_tensor *bias_part(hl_graph *g, const hl_mha *m, int part)
{
    if (!m->in_proj_bias)
        return NULL;
    const int inner = hl_mha_inner_dim(m), kv = kv_inner_dim(m);
    return hl_narrow(g, m->in_proj_bias, 0, part ? inner + (part - 1) * kv : 0,
                     part ? kv : inner);
}

/* The q, k, v projections, (B,T,H·D) and (B,S,K·D) each. */
static void project(hl_graph *g, const hl_mha *m, hl_tensor *query, hl_tensor *key,
                    hl_tensor *value, hl_tensor **q, hl_tensor **k, hl_tensor **v)
{
    const int inner = hl_mha_inner_dim(m), kv = kv_inner_dim(m);
    if (m->packed && query == key && key == value) {
        /* Self-attention: one GEMM over the packed (H·D + 2·K·D,E) weight, then split. */
        hl_tensor *qkv = hl_linear(g, query, m->in_proj_weight, m->in_proj_bias);
        *q = hl_narrow(g, qkv, -1, 0, inner);
        *k = hl_narrow(g, qkv, -1, inner, kv);
        *v = hl_narrow(g, qkv, -1, inner + kv, kv);
        return;
    }
    hl_tensor *w[3];
    if (m->packed) {
        w[0] = hl_narrow(g, m->in_proj_weight, 0, 0, inner);
        w[1] = hl_narrow(g, m->in_proj_weight, 0, inner, kv);
        w[2] = hl_narrow(g, m->in_proj_weight, 0, inner + kv, kv);
    } else {
        w[0] = m->q_proj_weight;
        w[1] = m->k_proj_weight;
        w[2] = m->v_proj_weight;
    }
    *q = hl_linear(g, query, w[0], bias_part(g, m, 0));
    *k = hl_linear(g, key, w[1], bias_part(g, m, 1));
    *v = hl_linear(g, value, w[2], bias_part(g, m, 2));
}

static bool check_inputs(hl_graph *g, const hl_mha *m, const hl_tensor *query,
                         const hl_tensor *key, const hl_tensor *value)
{
    if (hl_graph_failed(g))
        return false;
    if (!query || !key || !value || hl_tensor_is_poison(query) || hl_tensor_is_poison(key) ||
        hl_tensor_is_poison(value)) {
        hl_error_set(&g->error, HL_ERR_ARG, "mha: query, key and value must be valid tensors");
        return false;
    }
    char qs[HL_SHAPE_STR_MAX], ks[HL_SHAPE_STR_MAX], vs[HL_SHAPE_STR_MAX];
    hl_shape_str(query, qs);
    hl_shape_str(key, ks);
    hl_shape_str(value, vs);
    if (query->rank != 3 || key->rank != 3 || value->rank != 3) {
        hl_error_set(&g->error, HL_ERR_SHAPE,
                     "mha: query %s, key %s and value %s must be (B,T,E), (B,S,kdim), (B,S,vdim)",
                     qs, ks, vs);
        return false;
    }
    if (query->shape[2] != m->cfg.embed_dim || key->shape[2] != m->cfg.kdim ||
        value->shape[2] != m->cfg.vdim) {
        hl_error_set(&g->error, HL_ERR_SHAPE,
                     "mha: query %s, key %s, value %s do not match embed_dim %d, kdim %d, vdim %d",
                     qs, ks, vs, m->cfg.embed_dim, m->cfg.kdim, m->cfg.vdim);
        return false;
    }
    if (key->shape[0] != query->shape[0] || value->shape[0] != query->shape[0] ||
        key->shape[1] != value->shape[1]) {
        hl_error_set(&g->error, HL_ERR_SHAPE,
                     "mha: query %s, key %s and value %s disagree on the batch or on S", qs, ks,
                     vs);
        return false;
    }
    return true;
}

/* softmax((scale·q)·kᵀ + masks)·v (B,H,T,D) from the separate ops, keeping
 * the probabilities (B,H,T,S) in *probs: the reference, and the path that
 * can be traced. */
static hl_tensor *composed_attention(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v,
                                     hl_real scale, const hl_mha_masks *masks,
                                     const hl_mha_run *run, hl_tensor **probs)
{
    /* q is scaled before the product, as PyTorch's MHA does it: a pass over
     * (B,H,T,D) forward and backward instead of over the (B,H,T,S) scores. */
    hl_tensor *scores = hl_matmul(g, hl_scale(g, q, scale), k, HL_TRANS_B);
    if (masks && masks->causal)
        scores = hl_mask_causal(g, scores);
    if (masks && masks->doc_ids)
        scores = hl_mask_documents(g, scores, masks->doc_ids);
    if (masks && masks->key_padding)
        scores = hl_mask_key_padding(g, scores, masks->key_padding);
    if (masks && masks->blocked)
        scores = hl_mask_blocked(g, scores, masks->blocked);
    if (masks && masks->additive)
        scores = hl_mask_additive(g, scores, masks->additive);
    *probs = hl_softmax(g, scores);
    if (run)
        *probs = hl_act_patch_apply(g, *probs, HL_ACT_PATTERN, run->patches, run->n_patches);
    if (hl_graph_failed(g))
        return &g->poison;
    hl_tensor_set_name(*probs, "attn");
    return hl_matmul(g, *probs, v, 0);
}

/* The same in one op (ops/attention.c), which does not hand back the
 * probabilities; merged: the heads come out merged, (B,T,H·D). */
static hl_tensor *fused_attention(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v,
                                  hl_real scale, const hl_mha_masks *masks, bool merged)
{
    hl_attention_masks m = {0};
    if (masks)
        m = (hl_attention_masks){masks->causal, masks->key_padding, masks->blocked,
                                 masks->additive, masks->doc_ids};
    return merged ? hl_attention_merged(g, q, k, v, scale, &m)
                  : hl_attention(g, q, k, v, scale, &m);
}

/* The run's gate and offset applied to the head outputs (B,H,T,D). */
static hl_tensor *gate_heads(hl_graph *g, hl_tensor *heads, const hl_mha_run *run)
{
    if (!run)
        return heads;
    const int H = heads->shape[1];
    if (run->gate) {
        if (run->gate->rank != 1 || run->gate->shape[0] != H) {
            char gs[HL_SHAPE_STR_MAX];
            hl_shape_str(run->gate, gs);
            hl_error_set(&g->error, HL_ERR_SHAPE, "mha: gate %s must be (%d), one per head", gs,
                         H);
            return &g->poison;
        }
        heads = hl_mul(g, heads, hl_reshape(g, run->gate, 3, (int[]){H, 1, 1}));
    }
    if (run->head_offset)
        heads = hl_add(g, heads, (hl_tensor *)run->head_offset); /* read, never written */
    return heads;
}

hl_tensor *hl_act_patch_apply(hl_graph *g, hl_tensor *act, hl_act kind,
                              const hl_act_patch *patches, int n_patches)
{
    for (int i = 0; i < n_patches && !hl_graph_failed(g); i++) {
        const hl_act_patch *p = &patches[i];
        if (p->act != kind)
            continue;
        if (!p->value || !hl_tensor_same_shape(p->value, act)) {
            char want[HL_SHAPE_STR_MAX], got[HL_SHAPE_STR_MAX] = "NULL";
            hl_shape_str(act, want);
            if (p->value)
                hl_shape_str(p->value, got);
            hl_error_set(&g->error, HL_ERR_SHAPE, "patch: the value %s must have the "
                         "activation's shape %s", got, want);
            return &g->poison;
        }
        /* Read, never written: the graph records it as an input. */
        hl_tensor *value = (hl_tensor *)p->value;
        if (!p->where) {
            act = value;
            continue;
        }
        /* act - act·where + value·where: exactly value where 1, act where 0. */
        hl_tensor *where = (hl_tensor *)p->where;
        hl_tensor *kept = hl_add(g, act, hl_scale(g, hl_mul(g, act, where), -1));
        act = hl_add(g, kept, hl_mul(g, value, where));
    }
    return hl_graph_failed(g) ? &g->poison : act;
}

/* Whether a run replaces the attention pattern (which needs the composed ops). */
static bool patches_pattern(const hl_mha_run *run)
{
    for (int i = 0; run && i < run->n_patches; i++)
        if (run->patches[i].act == HL_ACT_PATTERN)
            return true;
    return false;
}

/* Whether this pass takes hl_attention (see mha.h). */
static bool takes_fused(const hl_mha_run *run)
{
    return !(run && (run->trace || run->path == HL_MHA_COMPOSED || patches_pattern(run)));
}

hl_tensor *hl_mha_forward(hl_graph *g, const hl_mha *m, hl_tensor *query, hl_tensor *key,
                          hl_tensor *value, const hl_mha_masks *masks, const hl_mha_run *run)
{
    hl_mha_trace *trace = run ? run->trace : NULL;
    if (trace)
        *trace = (hl_mha_trace){&g->poison, &g->poison, &g->poison, &g->poison, &g->poison};
    if (!check_inputs(g, m, query, key, value))
        return &g->poison;
    if (run && ((unsigned)run->path > HL_MHA_FUSED || run->n_patches < 0 ||
                (run->n_patches > 0 && !run->patches))) {
        hl_error_set(&g->error, HL_ERR_ARG, "mha: the run's path %d (0..%d) or its %d patches "
                     "at %p", (int)run->path, HL_MHA_FUSED, run->n_patches,
                     (const void *)run->patches);
        return &g->poison;
    }
    const int H = m->cfg.num_heads, K = m->cfg.kv_heads, D = m->cfg.head_dim;
    hl_tensor *qh, *kh, *vh, *q_seen = NULL, *k_seen = NULL;
    if (m->packed && query == key && key == value && !m->smear && !m->q_norm &&
        !(run && (run->n_patches || run->trace))) {
        /* Self-attention with nothing to see or change between the
         * projection and the heads: split and rotate in one op. (Smeared
         * keys and QK-norm take the split ops below: they come before the
         * rotation.) */
        hl_tensor *qkv = hl_linear(g, query, m->in_proj_weight, m->in_proj_bias);
        const double base = m->cfg.rotary_base > 0 ? m->cfg.rotary_base : 0;
        /* 0: all of D rotated, or none without a base (an odd D then too) */
        const int rot = base > 0 && m->cfg.rotary_dims != D ? m->cfg.rotary_dims : 0;
        if (K == H && rot == 0)
            qh = hl_qkv_heads(g, qkv, H, (hl_real)base, &kh, &vh);
        else
            qh = hl_qkv_heads_grouped(g, qkv, H, K, (hl_real)base, rot, &kh, &vh);
        kh = hl_mha_ungroup(g, m, kh);
        vh = hl_mha_ungroup(g, m, vh);
    } else {
        hl_tensor *q, *k, *v;
        project(g, m, query, key, value, &q, &k, &v);
        qh = split_heads(g, q, H, D);
        kh = hl_mha_ungroup(g, m, split_heads(g, k, K, D));
        vh = hl_mha_ungroup(g, m, split_heads(g, v, K, D));
        if (run && run->n_patches) {
            qh = hl_act_patch_apply(g, qh, HL_ACT_Q, run->patches, run->n_patches);
            kh = hl_act_patch_apply(g, kh, HL_ACT_K, run->patches, run->n_patches);
            vh = hl_act_patch_apply(g, vh, HL_ACT_V, run->patches, run->n_patches);
        }
        q_seen = qh; /* what a trace shows: hook_q, hook_k */
        k_seen = kh;
        if (m->smear) /* within each document: its first key mixes in none before it */
            kh = hl_smear_docs(g, kh, m->smear, masks ? masks->doc_ids : NULL);
        if (m->q_norm) { /* before rotation, as modded-nanogpt: the gain scales unrotated dims */
            const hl_real eps = (hl_real)m->cfg.qk_norm_eps;
            qh = hl_rmsnorm(g, qh, m->q_norm, eps);
            kh = hl_rmsnorm(g, kh, m->k_norm, eps);
        }
        if (m->cfg.rotary_base > 0) {
            qh = rotate(g, m, qh);
            kh = rotate(g, m, kh);
        }
    }

    const hl_real scale = (hl_real)(1 / sqrt(D));
    hl_tensor *probs = NULL;
    if (hl_graph_failed(g))
        return &g->poison;
    if (takes_fused(run) && !(run && (run->gate || run->head_offset || run->n_patches))) {
        /* Nothing reads or changes the heads apart: they come out merged. */
        hl_tensor *merged = fused_attention(g, qh, kh, vh, scale, masks, true);
        hl_tensor *out = hl_linear(g, merged, m->out_proj_weight, m->out_proj_bias);
        if (hl_graph_failed(g))
            return &g->poison;
        hl_tensor_set_name(merged, "heads");
        return out;
    }
    hl_tensor *heads = takes_fused(run)
                           ? fused_attention(g, qh, kh, vh, scale, masks, false)
                           : composed_attention(g, qh, kh, vh, scale, masks, run, &probs);
    if (hl_graph_failed(g))
        return &g->poison;
    heads = gate_heads(g, heads, run);
    if (run && run->n_patches)
        heads = hl_act_patch_apply(g, heads, HL_ACT_Z, run->patches, run->n_patches);
    hl_tensor *out = hl_linear(g, merge_heads(g, heads), m->out_proj_weight, m->out_proj_bias);
    if (hl_graph_failed(g))
        return &g->poison;
    hl_tensor_set_name(heads, "heads");
    if (trace)
        *trace = (hl_mha_trace){probs, heads, q_seen, k_seen, vh};
    return out;
}
