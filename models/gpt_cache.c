/* Generation with a key/value cache: see gpt_cache.h. */
#include "models/gpt_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* A linear layer's weight transposed, (in,out): a product with one row of
 * input reads it in place, where the (out,in) weight would be packed first
 * at every token (ops/gemm.c reads an untransposed B in place for few rows). */
typedef struct {
    hl_tensor *wt;
    hl_tensor *b;
} cached_linear;

/* Every linear of a block, transposed. */
typedef struct {
    cached_linear qkv, out, fc, proj;
} cached_block;

struct hl_gpt_cache {
    const hl_gpt *m;
    int capacity;       /* positions it holds, at most n_ctx */
    cached_block blocks[HL_GPT_MAX_LAYERS];
    cached_linear head;
    int len;            /* positions cached */
    hl_graph *g;        /* each feed's ops, reset at the next */
    /* Per layer, per query head: keys as attention reads them and values,
     * (H_l, n_ctx, D) each, and the last raw key (smeared keys mix it in). */
    hl_real *keys[HL_GPT_MAX_LAYERS], *values[HL_GPT_MAX_LAYERS], *last_key[HL_GPT_MAX_LAYERS];
    hl_real *scratch;   /* (H, n_ctx + D): each head's scores and rotated query */
};

/* w (out,in) and b as a cached_linear; false when out of memory. */
static bool transpose_linear(hl_tensor *w, hl_tensor *b, cached_linear *out)
{
    out->b = b;
    if (!w)
        return true;
    const int rows = w->shape[0], cols = w->shape[1];
    if (!(out->wt = hl_tensor_new("wt", 2, (int[]){cols, rows}, false)))
        return false;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            out->wt->data[(size_t)c * rows + r] = w->data[(size_t)r * cols + c];
    return true;
}

static bool transpose_weights(hl_gpt_cache *c, const hl_gpt *m)
{
    bool ok = transpose_linear(m->head_w, m->head_b, &c->head);
    for (int l = 0; ok && l < m->cfg.n_layers; l++) {
        const hl_gpt_block *b = &m->blocks[l];
        cached_block *t = &c->blocks[l];
        ok = transpose_linear(b->attn.in_proj_weight, b->attn.in_proj_bias, &t->qkv) &&
             transpose_linear(b->attn.out_proj_weight, b->attn.out_proj_bias, &t->out) &&
             transpose_linear(b->fc_w, b->fc_b, &t->fc) &&
             transpose_linear(b->proj_w, b->proj_b, &t->proj);
    }
    return ok;
}

/* x·w + b with the transposed weight. */
static hl_tensor *linear(hl_graph *g, hl_tensor *x, const cached_linear *l)
{
    hl_tensor *y = hl_matmul(g, x, l->wt, 0);
    return l->b ? hl_add(g, y, l->b) : y;
}

hl_gpt_cache *hl_gpt_cache_new(const hl_gpt *m, int capacity, hl_error *err)
{
    if (capacity < 0 || capacity > m->cfg.n_ctx) {
        hl_error_set(err, HL_ERR_ARG, "gpt cache: %d positions; the model has %d", capacity,
                     m->cfg.n_ctx);
        return NULL;
    }
    capacity = capacity ? capacity : m->cfg.n_ctx;
    hl_gpt_cache *c = calloc(1, sizeof *c);
    const int D = m->cfg.d_model / m->cfg.n_heads;
    bool ok = c && (c->g = hl_graph_new(0)) &&
              (c->scratch = malloc((size_t)m->cfg.n_heads * (capacity + D) *
                                   sizeof *c->scratch));
    for (int l = 0; ok && l < m->cfg.n_layers; l++) {
        const size_t per_head = (size_t)capacity * D, H = hl_gpt_layer_heads(&m->cfg, l);
        ok = (c->keys[l] = malloc(H * per_head * sizeof(hl_real))) &&
             (c->values[l] = malloc(H * per_head * sizeof(hl_real))) &&
             (c->last_key[l] = calloc(H * D, sizeof(hl_real)));
    }
    if (!ok || !transpose_weights(c, m)) {
        hl_gpt_cache_free(c);
        hl_error_set(err, HL_ERR_NOMEM, "gpt cache: out of memory");
        return NULL;
    }
    c->m = m;
    c->capacity = capacity;
    hl_graph_set_grad_enabled(c->g, false);
    return c;
}

void hl_gpt_cache_free(hl_gpt_cache *c)
{
    if (!c)
        return;
    for (int l = 0; l < HL_GPT_MAX_LAYERS; l++) {
        hl_tensor_free(c->blocks[l].qkv.wt);
        hl_tensor_free(c->blocks[l].out.wt);
        hl_tensor_free(c->blocks[l].fc.wt);
        hl_tensor_free(c->blocks[l].proj.wt);
        free(c->keys[l]);
        free(c->values[l]);
        free(c->last_key[l]);
    }
    hl_tensor_free(c->head.wt);
    free(c->scratch);
    hl_graph_free(c->g);
    free(c);
}

int hl_gpt_cache_length(const hl_gpt_cache *c) { return c->len; }

void hl_gpt_cache_reset(hl_gpt_cache *c) { c->len = 0; }

/* x (D values) rotated in place at position t over its first R dims, as
 * hl_rope's table: θ_i = t·base^(-2i/R), cos and sin rounded to hl_real. */
static void rotate(hl_real *x, int R, int t, double base)
{
    const int half = R / 2;
    for (int i = 0; i < half; i++) {
        const double angle = t * pow(base, -2.0 * i / R);
        const hl_real cs = (hl_real)cos(angle), sn = (hl_real)sin(angle);
        const hl_real a = x[i], b = x[i + half];
        x[i] = a * cs - b * sn;
        x[i + half] = b * cs + a * sn;
    }
}

/* x (D values) RMS-normalised in place with the gain (D), as hl_rmsnorm:
 * the mean square and each scaling in double. */
static void rms_normalize(hl_real *x, const hl_real *gain, int D, double eps)
{
    double sum = 0;
    for (int i = 0; i < D; i++)
        sum += (double)x[i] * x[i];
    const double rstd = 1 / sqrt(sum / D + eps);
    for (int i = 0; i < D; i++)
        x[i] = (hl_real)((double)x[i] * rstd * gain[i]);
}

/* Query head h's key at position t from its projection row (raw k), smeared
 * with the head's last raw key, normalised (QK-norm) and rotated, into the
 * cache. */
static void store_key(hl_gpt_cache *c, int l, int h, int t, const hl_real *raw)
{
    const hl_gpt *m = c->m;
    const hl_mha *a = &m->blocks[l].attn;
    const int D = a->cfg.head_dim;
    hl_real *dst = c->keys[l] + ((size_t)h * c->capacity + t) * D;
    hl_real *last = c->last_key[l] + (size_t)h * D;
    if (a->smear && t > 0) {
        const hl_real s = (hl_real)(1 / (1 + exp(-(double)a->smear->data[h])));
        for (int i = 0; i < D; i++)
            dst[i] = s * raw[i] + (1 - s) * last[i];
    } else {
        memcpy(dst, raw, D * sizeof *dst);
    }
    memcpy(last, raw, D * sizeof *last);
    if (a->k_norm)
        rms_normalize(dst, a->k_norm->data, D, a->cfg.qk_norm_eps);
    if (a->cfg.rotary_base > 0)
        rotate(dst, a->cfg.rotary_dims, t, a->cfg.rotary_base);
}

/* Layer l's attention for n new positions: qkv (1,n,rows) in, the heads'
 * outputs merged (1,n,H·D) out. */
static void attend(hl_gpt_cache *c, int l, const hl_tensor *qkv, hl_tensor *out, int n)
{
    const hl_gpt *m = c->m;
    const hl_mha *a = &m->blocks[l].attn;
    const int H = a->cfg.num_heads, K = a->cfg.kv_heads, D = a->cfg.head_dim;
    const int rows = qkv->shape[2], group = H / K;
    const size_t ctx = (size_t)c->capacity;
    const hl_real scale = (hl_real)(1 / sqrt(D));
    for (int i = 0; i < n; i++) {
        const int t = c->len + i;
        const hl_real *row = qkv->data + (size_t)i * rows;
        for (int h = 0; h < H; h++) {
            const int kv = a->cfg.kv_of ? a->cfg.kv_of[h] : h / group;
            store_key(c, l, h, t, row + H * D + kv * D);
            memcpy(c->values[l] + ((size_t)h * ctx + t) * D, row + (H + K + kv) * D,
                   D * sizeof(hl_real));
        }
    }
#pragma omp parallel for schedule(static) if (H > 1 && (size_t)n * c->len >= 256)
    for (int h = 0; h < H; h++) {
        hl_real *scores = c->scratch + (size_t)h * (ctx + D), *q = scores + ctx;
        for (int i = 0; i < n; i++) {
            const int t = c->len + i;
            memcpy(q, qkv->data + (size_t)i * rows + h * D, D * sizeof *q);
            if (a->q_norm)
                rms_normalize(q, a->q_norm->data, D, a->cfg.qk_norm_eps);
            if (a->cfg.rotary_base > 0)
                rotate(q, a->cfg.rotary_dims, t, a->cfg.rotary_base);
            const hl_real *keys = c->keys[l] + (size_t)h * ctx * D;
            const hl_real *values = c->values[l] + (size_t)h * ctx * D;
            hl_real top = -INFINITY, total = 0;
            for (int s = 0; s <= t; s++) {
                hl_real dot = 0;
                for (int d = 0; d < D; d++)
                    dot += q[d] * scale * keys[(size_t)s * D + d];
                scores[s] = dot;
                top = dot > top ? dot : top;
            }
            for (int s = 0; s <= t; s++)
                total += scores[s] = (hl_real)exp((double)(scores[s] - top));
            hl_real *y = out->data + (size_t)i * H * D + (size_t)h * D;
            memset(y, 0, D * sizeof *y);
            for (int s = 0; s <= t; s++)
                for (int d = 0; d < D; d++)
                    y[d] += scores[s] / total * values[(size_t)s * D + d];
        }
    }
}

/* The MLP of block l on the normalised x, as the model's forward has it. */
static hl_tensor *mlp(hl_gpt_cache *c, int l, hl_tensor *x)
{
    hl_graph *g = c->g;
    hl_tensor *fc = linear(g, x, &c->blocks[l].fc);
    const hl_gpt_mlp kind = c->m->cfg.mlp;
    hl_tensor *hidden = kind == HL_GPT_MLP_SWIGLU      ? hl_swiglu(g, fc)
                        : kind == HL_GPT_MLP_GELU_TANH ? hl_gelu_tanh(g, fc)
                        : kind == HL_GPT_MLP_RELU2     ? hl_relu2(g, fc)
                                                       : hl_gelu(g, fc);
    return linear(g, hidden, &c->blocks[l].proj);
}

/* One block on h (1,n,d): attention over the cache, then the MLP. */
static hl_tensor *block(hl_gpt_cache *c, int l, hl_tensor *h, int n)
{
    const hl_gpt *m = c->m;
    hl_graph *g = c->g;
    const hl_gpt_block *b = &m->blocks[l];
    const hl_mha *a = &b->attn;
    hl_tensor *x = hl_gpt_normalize(g, m, h, b->ln1_w, b->ln1_b);
    hl_tensor *qkv = linear(g, x, &c->blocks[l].qkv);
    const int inner = hl_mha_inner_dim(a);
    hl_tensor *heads = hl_graph_tensor_uninit(g, "heads", 3, (int[]){1, n, inner});
    if (hl_graph_failed(g))
        return &g->poison;
    attend(c, l, qkv, heads, n);
    hl_tensor *y = linear(g, heads, &c->blocks[l].out);
    if (!b->fc_w)
        return hl_add(g, h, y);
    if (m->cfg.parallel_residual)
        return hl_add(g, h, hl_add(g, y, mlp(c, l, hl_gpt_normalize(g, m, h, b->ln2_w,
                                                                   b->ln2_b))));
    h = hl_add(g, h, y);
    return hl_add(g, h, mlp(c, l, hl_gpt_normalize(g, m, h, b->ln2_w, b->ln2_b)));
}

/* The bytes of layer l's last raw keys, a row of D for each of its heads. */
static size_t last_key_bytes(const hl_gpt *m, int l)
{
    return (size_t)hl_gpt_layer_heads(&m->cfg, l) * m->blocks[l].attn.cfg.head_dim *
           sizeof(hl_real);
}

hl_status hl_gpt_cache_feed(hl_gpt_cache *c, const int32_t *tokens, int n,
                            const hl_real **logits, hl_error *err)
{
    const hl_gpt *m = c->m;
    if (n < 1 || n > c->capacity - c->len)
        return hl_error_set(err, HL_ERR_ARG, "gpt cache: %d more tokens after %d would pass its "
                            "%d positions", n, c->len, c->capacity);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.vocab_in)
            return hl_error_set(err, HL_ERR_ARG, "gpt cache: token %d at %d is outside the "
                                "vocabulary (0..%d)", tokens[i], i, m->cfg.vocab_in - 1);
    hl_graph *g = c->g;
    hl_graph_reset(g);
    hl_graph_set_grad_enabled(g, false);
    int32_t *positions = hl_graph_alloc(g, (size_t)n * sizeof *positions);
    if (!positions)
        return hl_error_set(err, HL_ERR_NOMEM, "gpt cache: out of memory");
    for (int i = 0; i < n; i++)
        positions[i] = c->len + i;
    hl_tensor *h = hl_embedding(g, m->tok_emb, tokens, 2, (int[]){1, n});
    hl_tensor *pos = m->pos_emb ? m->pos_emb : m->pos_table;
    if (pos)
        h = hl_add(g, h, hl_embedding(g, pos, positions, 2, (int[]){1, n}));
    /* The raw keys smearing reads next, as they were: a feed that fails
     * leaves the cache as it found it. */
    const size_t key_row = (size_t)m->cfg.n_heads * m->blocks[0].attn.cfg.head_dim;
    hl_real *last_keys = hl_graph_alloc(g, (size_t)m->cfg.n_layers * key_row * sizeof *last_keys);
    if (!last_keys)
        return hl_error_set(err, HL_ERR_NOMEM, "gpt cache: out of memory");
    for (int l = 0; l < m->cfg.n_layers; l++)
        memcpy(last_keys + l * key_row, c->last_key[l], last_key_bytes(m, l));
    for (int l = 0; l < m->cfg.n_layers && !hl_graph_failed(g); l++)
        h = block(c, l, h, n);
    hl_tensor *last = hl_narrow(g, h, 1, n - 1, 1);
    hl_tensor *out = linear(g, hl_gpt_normalize(g, m, last, m->lnf_w, m->lnf_b), &c->head);
    if (hl_graph_failed(g)) {
        for (int l = 0; l < m->cfg.n_layers; l++)
            memcpy(c->last_key[l], last_keys + l * key_row, last_key_bytes(m, l));
        return hl_error_set(err, g->error.status, "%s", g->error.message);
    }
    c->len += n;
    if (m->cfg.softcap > 0) /* the logits the model was trained on */
        for (int v = 0; v < m->cfg.vocab_out; v++)
            out->data[v] = hl_gpt_logit(&m->cfg, out->data[v]);
    *logits = out->data;
    return HL_OK;
}

static int descending(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

int32_t hl_gpt_sample(const hl_real *logits, int V, double temperature, int top_k, hl_rng *rng)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best])
            best = v;
    if (!(temperature > 0))
        return best;
    /* The k-th largest logit is the smallest kept (ties at it are kept too). */
    double least = -INFINITY;
    double *sorted = top_k > 0 && top_k < V ? malloc((size_t)V * sizeof *sorted) : NULL;
    if (sorted) {
        for (int v = 0; v < V; v++)
            sorted[v] = logits[v];
        qsort(sorted, (size_t)V, sizeof *sorted, descending);
        least = sorted[top_k - 1];
        free(sorted);
    }
    double total = 0;
    for (int v = 0; v < V; v++)
        if (logits[v] >= least)
            total += exp((logits[v] - logits[best]) / temperature);
    double r = hl_rng_uniform(rng) * total;
    int last = best;
    for (int v = 0; v < V; v++) {
        if (!(logits[v] >= least))
            continue;
        last = v;
        r -= exp((logits[v] - logits[best]) / temperature);
        if (r < 0)
            return v;
    }
    return last; /* rounding left r >= 0: the last token kept */
}
