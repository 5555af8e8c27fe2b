/* Scaled dot-product attention as one op, flash-attention style (Dao et al.
 * 2022, with FlashAttention-2's loop order): softmax(scale·q·kᵀ + masks)·v
 * tile by tile, so the (T,S) scores never exist whole.
 *
 * Forward, per (batch, head, tile of TILE_Q queries): for each tile of TILE_K
 * keys, the scores S = q·kᵀ go through scale and masks, then an online
 * softmax keeps each row's running max m and sum l, rescales the output rows
 * accumulated so far by exp(m_old - m_new) and adds exp(S - m_new)·v. At the
 * end the rows are divided by l; one log-sum-exp per row, lse = m + log l, is
 * all backward needs besides q, k, v and the output.
 *
 * Backward recomputes each tile's probabilities P = exp(S - lse) and, with
 * D_t = Σ_d dO_td·O_td (= Σ_s P_ts·dP_ts), dS = P ∘ (dO·vᵀ - D):
 *   pass 1, per query tile:  dq += scale·dS·k  (and D for pass 2);
 *   pass 2, per key tile:    dv += Pᵀ·dO,  dk += scale·dSᵀ·q.
 * Each pass owns the rows it writes, so no two threads ever add into the same
 * element and 1 and N threads give bitwise identical results. (FlashAttention-2
 * does both in one pass with atomic adds into dq, which costs determinism.)
 *
 * The tile products are hl_gemm calls, which run on one thread inside the
 * parallel region; the score tiles live on the stack, the log-sum-exps and D
 * in the graph's arena. */
#include <math.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/internal.h"

/* Queries and keys per tile: a 64×64 score tile is 16 KiB in float, and with
 * a key tile of k and v (D ≤ 64) it stays in L1/L2. */
enum { TILE_Q = 64, TILE_K = 64 };

/* What forward and backward share: dims, data and masks of one call. */
typedef struct attn_ctx {
    int B, H, T, S, D;
    hl_real scale;
    const hl_real *q, *k, *v; /* (B,H,T,D), (B,H,S,D), (B,H,S,D) */
    hl_attention_masks masks;
    size_t blocked_batch_stride, additive_batch_stride; /* T·S for (B,T,S), 0 for (T,S) */
} attn_ctx;

/* What a recorded node keeps (n->saved); q, k, v and the output are the node's. */
typedef struct attn_saved {
    attn_ctx ctx;
    double *lse; /* (B,H,T): log Σ_s exp(score); -inf for a fully masked row */
} attn_saved;

static int min_int(int a, int b) { return a < b ? a : b; }

/* x[j] = exp(x[j] - shift), the shift subtracted in double so that a large
 * log-sum-exp loses no precision. The one place attention calls exp: a
 * vectorised exp replaces this loop. exp(-inf) = 0 keeps masked entries out. */
static void exp_shifted(hl_real *x, int n, double shift)
{
    for (int j = 0; j < n; j++)
        x[j] = HL_EXP((hl_real)((double)x[j] - shift));
}

/* Keys of query t that causal masking keeps in a tile starting at key s0. */
static int causal_keys(const attn_ctx *c, int t, int s0, int nk)
{
    if (!c->masks.causal)
        return nk;
    return t < s0 ? 0 : min_int(nk, t - s0 + 1);
}

/* One row of scores (batch b, query t, keys s0..s0+nk-1): scaled, then every
 * mask as ops/mask.c applies it (a hidden entry is -inf; the additive bias is
 * added where it is not -inf, and blocks where it is). */
static void mask_row(const attn_ctx *c, int b, int t, int s0, int nk, hl_real *row)
{
    const hl_attention_masks *m = &c->masks;
    const size_t ts = (size_t)t * c->S + s0;
    const hl_real *pad = m->key_padding ? m->key_padding->data + (size_t)b * c->S + s0 : NULL;
    const hl_real *blk = m->blocked ? m->blocked->data + b * c->blocked_batch_stride + ts : NULL;
    const hl_real *add = m->additive ? m->additive->data + b * c->additive_batch_stride + ts
                                     : NULL;
    const int kept = causal_keys(c, t, s0, nk);
    /* One simple loop per mask, so each vectorises. */
    for (int j = 0; j < kept; j++)
        row[j] *= c->scale;
    for (int j = kept; j < nk; j++)
        row[j] = -INFINITY;
    for (int j = 0; pad && j < kept; j++)
        row[j] = pad[j] != 0 ? -INFINITY : row[j];
    for (int j = 0; blk && j < kept; j++)
        row[j] = blk[j] != 0 ? -INFINITY : row[j];
    for (int j = 0; add && j < kept; j++)
        row[j] = add[j] == -INFINITY ? -INFINITY : row[j] + add[j];
}

/* The masked, scaled scores of nq queries from t0 against nk keys from s0 of
 * head bh = b·H + h, into s (row stride TILE_K). */
static void score_tile(const attn_ctx *c, int bh, int t0, int nq, int s0, int nk, hl_real *s)
{
    const size_t D = (size_t)c->D;
    hl_gemm(false, true, nq, nk, c->D, 1, c->q + ((size_t)bh * c->T + t0) * D, c->D,
            c->k + ((size_t)bh * c->S + s0) * D, c->D, 0, s, TILE_K);
    for (int i = 0; i < nq; i++)
        mask_row(c, bh / c->H, t0 + i, s0, nk, s + (size_t)i * TILE_K);
}

/* The keys a tile of queries t0..t0+nq-1 can see at all: causal masking hides
 * every key after the last query, so those tiles are skipped whole. */
static int key_end(const attn_ctx *c, int t0, int nq)
{
    return c->masks.causal ? min_int(c->S, t0 + nq) : c->S;
}

/* The online-softmax step of one row: folds scores row[0..nk) into the
 * running max *m and sum *l, rescales the output row o accumulated so far,
 * and leaves exp(row - m) in row for the product with v. */
static void online_softmax_row(hl_real *row, int nk, hl_real *m, double *l, hl_real *o, int D)
{
    hl_real max = *m;
    for (int j = 0; j < nk; j++)
        if (row[j] > max)
            max = row[j];
    if (max == -INFINITY) { /* nothing visible yet: exp(-inf - -inf) would be NaN */
        memset(row, 0, (size_t)nk * sizeof *row);
        return;
    }
    if (max != *m && *m != -INFINITY) {
        hl_real alpha = *m;
        exp_shifted(&alpha, 1, max);
        *l *= alpha;
        for (int d = 0; d < D; d++)
            o[d] *= alpha;
    }
    *m = max;
    exp_shifted(row, nk, max);
    double sum = 0;
    for (int j = 0; j < nk; j++)
        sum += (double)row[j];
    *l += sum;
}

/* Forward of one query tile of head bh: its output rows o (nq×D, written
 * whole) and, when lse is not NULL, their log-sum-exps. */
static void forward_tile(const attn_ctx *c, int bh, int t0, int nq, hl_real *o, double *lse)
{
    hl_real s[TILE_Q * TILE_K], m[TILE_Q];
    double l[TILE_Q];
    const int D = c->D, end = key_end(c, t0, nq);
    for (int i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
    }
    memset(o, 0, (size_t)nq * D * sizeof *o);
    for (int s0 = 0; s0 < end; s0 += TILE_K) {
        const int nk = min_int(TILE_K, c->S - s0);
        score_tile(c, bh, t0, nq, s0, nk, s);
        for (int i = 0; i < nq; i++)
            online_softmax_row(s + (size_t)i * TILE_K, nk, &m[i], &l[i], o + (size_t)i * D, D);
        hl_gemm(false, false, nq, D, nk, 1, s, TILE_K, c->v + ((size_t)bh * c->S + s0) * D, D, 1,
                o, D);
    }
    for (int i = 0; i < nq; i++) {
        /* A fully masked row has l = 0 and o still all zeros: as hl_softmax. */
        if (l[i] > 0) {
            const double inv = 1.0 / l[i];
            for (int d = 0; d < D; d++)
                o[(size_t)i * D + d] = (hl_real)((double)o[(size_t)i * D + d] * inv);
        }
        if (lse)
            lse[i] = l[i] > 0 ? (double)m[i] + log(l[i]) : -INFINITY;
    }
}

static void attention_forward(const attn_ctx *c, hl_real *out, double *lse)
{
    const int q_tiles = (c->T + TILE_Q - 1) / TILE_Q;
    const int tasks = c->B * c->H * q_tiles;
    const double work = (double)c->B * c->H * c->T * c->S * c->D;
    /* Tiles differ in cost under causal masking: hand them out one by one. */
#pragma omp parallel for if (work >= HL_PARALLEL_MIN_WORK) schedule(dynamic, 1)
    for (int task = 0; task < tasks; task++) {
        const int bh = task / q_tiles, t0 = task % q_tiles * TILE_Q;
        const size_t row = (size_t)bh * c->T + t0;
        forward_tile(c, bh, t0, min_int(TILE_Q, c->T - t0), out + row * c->D,
                     lse ? lse + row : NULL);
    }
}

/* ---- the op: shape checks, forward, record ---- */

static bool qkv_ok(hl_graph *g, const hl_tensor *q, const hl_tensor *k, const hl_tensor *v)
{
    char qs[HL_SHAPE_STR_MAX], ks[HL_SHAPE_STR_MAX], vs[HL_SHAPE_STR_MAX];
    hl_shape_str(q, qs), hl_shape_str(k, ks), hl_shape_str(v, vs);
    if (q->rank != 4 || k->rank != 4 || v->rank != 4)
        hl_op_fail(g, HL_OP_ATTENTION, HL_ERR_SHAPE,
                   "q %s, k %s and v %s must have rank 4: (B,H,T,D), (B,H,S,D), (B,H,S,D)", qs,
                   ks, vs);
    else if (!hl_tensor_same_shape(k, v))
        hl_op_fail(g, HL_OP_ATTENTION, HL_ERR_SHAPE,
                   "k %s and v %s differ (both must be (B,H,S,D))", ks, vs);
    else if (q->shape[0] != k->shape[0] || q->shape[1] != k->shape[1] ||
             q->shape[3] != k->shape[3])
        hl_op_fail(g, HL_OP_ATTENTION, HL_ERR_SHAPE,
                   "q %s and k %s disagree on B, H or D (q (B,H,T,D), k (B,H,S,D))", qs, ks);
    return !hl_graph_failed(g);
}

/* A mask tensor (key_padding when per_query is false, else blocked or
 * additive) against the call's dims; fills its batch stride. */
static bool mask_ok(hl_graph *g, const attn_ctx *c, const hl_tensor *m, const char *what,
                    bool per_query, size_t *batch_stride)
{
    if (!m)
        return true;
    if (hl_tensor_is_poison(m)) {
        hl_op_fail(g, HL_OP_ATTENTION, HL_ERR_ARG, "%s is a poisoned tensor", what);
        return false;
    }
    const int r = m->rank;
    bool fits;
    if (per_query)
        fits = (r == 2 || r == 3) && m->shape[r - 2] == c->T && m->shape[r - 1] == c->S &&
               (r == 2 || m->shape[0] == c->B);
    else
        fits = r == 2 && m->shape[0] == c->B && m->shape[1] == c->S;
    if (!fits) {
        char ms[HL_SHAPE_STR_MAX];
        hl_op_fail(g, HL_OP_ATTENTION, HL_ERR_SHAPE,
                   "%s %s does not match (B,T,S) = (%d,%d,%d) of q and k (it must be %s)", what,
                   hl_shape_str(m, ms), c->B, c->T, c->S, per_query ? "(T,S) or (B,T,S)" : "(B,S)");
        return false;
    }
    if (batch_stride)
        *batch_stride = r == 3 ? (size_t)c->T * c->S : 0;
    return true;
}

hl_tensor *hl_attention(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v, hl_real scale,
                        const hl_attention_masks *masks)
{
    hl_tensor *inputs[3] = {q, k, v};
    if (!hl_op_inputs_ok(g, HL_OP_ATTENTION, 3, inputs) || !qkv_ok(g, q, k, v))
        return &g->poison;
    attn_ctx c = {.B = q->shape[0], .H = q->shape[1], .T = q->shape[2], .S = k->shape[2],
                  .D = q->shape[3], .scale = scale, .q = q->data, .k = k->data, .v = v->data};
    if (masks)
        c.masks = *masks;
    if (!mask_ok(g, &c, c.masks.key_padding, "key_padding", false, NULL) ||
        !mask_ok(g, &c, c.masks.blocked, "blocked", true, &c.blocked_batch_stride) ||
        !mask_ok(g, &c, c.masks.additive, "additive", true, &c.additive_batch_stride))
        return &g->poison;
    hl_tensor *out = hl_op_output(g, HL_OP_ATTENTION, 4, q->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    /* The log-sum-exps are kept only when backward will need them. */
    hl_node *n = hl_op_record(g, HL_OP_ATTENTION, out, 3, inputs);
    attn_saved *saved = n ? hl_graph_alloc(g, sizeof *saved) : NULL;
    double *lse = n ? hl_graph_alloc(g, (size_t)c.B * c.H * c.T * sizeof *lse) : NULL;
    if (hl_graph_failed(g))
        return &g->poison;
    if (n) {
        *saved = (attn_saved){c, lse};
        n->saved = saved;
    }
    attention_forward(&c, out->data, lse);
    return out;
}

/* ---- backward ---- */

/* What the backward passes read and write besides the forward's context. */
typedef struct attn_grads {
    const double *lse;  /* (B,H,T), from forward */
    double *delta;      /* (B,H,T): D_t = Σ_d dO_td·O_td, written by pass 1 */
    const hl_real *o, *d_o; /* the output and its gradient, (B,H,T,D) */
    hl_real *dq, *dk, *dv;  /* NULL when that input needs no gradient */
} attn_grads;

/* The probabilities P = exp(S - lse) of a tile, recomputed from q and k; a
 * fully masked row (lse -inf) is all zeros. */
static void probs_tile(const attn_ctx *c, const double *lse, int bh, int t0, int nq, int s0,
                       int nk, hl_real *p)
{
    score_tile(c, bh, t0, nq, s0, nk, p);
    const size_t row = (size_t)bh * c->T + t0;
    for (int i = 0; i < nq; i++) {
        hl_real *pr = p + (size_t)i * TILE_K;
        if (lse[row + i] == -INFINITY)
            memset(pr, 0, (size_t)nk * sizeof *pr);
        else
            exp_shifted(pr, nk, lse[row + i]);
    }
}

/* The gradient of the scaled scores before scale, scale·P∘(dO·vᵀ - D), of a
 * tile into ds; as hl_softmax's backward, the difference is taken in double. */
static void dscores_tile(const attn_ctx *c, const attn_grads *gr, int bh, int t0, int nq,
                         int s0, int nk, const hl_real *p, hl_real *ds)
{
    const size_t D = (size_t)c->D, row = (size_t)bh * c->T + t0;
    hl_gemm(false, true, nq, nk, c->D, 1, gr->d_o + row * D, c->D,
            c->v + ((size_t)bh * c->S + s0) * D, c->D, 0, ds, TILE_K);
    for (int i = 0; i < nq; i++) {
        const double delta = gr->delta[row + i];
        const hl_real *pr = p + (size_t)i * TILE_K;
        hl_real *dr = ds + (size_t)i * TILE_K;
        for (int j = 0; j < nk; j++)
            dr[j] = c->scale * (hl_real)((double)pr[j] * ((double)dr[j] - delta));
    }
}

/* Pass 1 for one query tile: D of its rows, then dq += scale·dS·k. */
static void dq_tile(const attn_ctx *c, const attn_grads *gr, int bh, int t0, int nq)
{
    hl_real p[TILE_Q * TILE_K], ds[TILE_Q * TILE_K];
    const size_t D = (size_t)c->D, row = (size_t)bh * c->T + t0;
    for (int i = 0; i < nq; i++) {
        const hl_real *o = gr->o + (row + i) * D, *d_o = gr->d_o + (row + i) * D;
        double dot = 0;
        for (size_t d = 0; d < D; d++)
            dot += (double)d_o[d] * (double)o[d];
        gr->delta[row + i] = dot;
    }
    if (!gr->dq)
        return;
    const int end = key_end(c, t0, nq);
    for (int s0 = 0; s0 < end; s0 += TILE_K) {
        const int nk = min_int(TILE_K, c->S - s0);
        probs_tile(c, gr->lse, bh, t0, nq, s0, nk, p);
        dscores_tile(c, gr, bh, t0, nq, s0, nk, p, ds);
        hl_gemm(false, false, nq, c->D, nk, 1, ds, TILE_K, c->k + ((size_t)bh * c->S + s0) * D,
                c->D, 1, gr->dq + row * D, c->D);
    }
}

/* Pass 2 for one key tile: dv += Pᵀ·dO and dk += scale·dSᵀ·q over the query
 * tiles that can see it. */
static void dkv_tile(const attn_ctx *c, const attn_grads *gr, int bh, int s0, int nk)
{
    hl_real p[TILE_Q * TILE_K], ds[TILE_Q * TILE_K];
    const size_t D = (size_t)c->D, key_row = (size_t)bh * c->S + s0;
    /* Under causal masking queries before s0 see none of these keys. */
    const int first = c->masks.causal ? s0 / TILE_Q * TILE_Q : 0;
    for (int t0 = first; t0 < c->T; t0 += TILE_Q) {
        const int nq = min_int(TILE_Q, c->T - t0);
        const size_t row = (size_t)bh * c->T + t0;
        probs_tile(c, gr->lse, bh, t0, nq, s0, nk, p);
        if (gr->dv)
            hl_gemm(true, false, nk, c->D, nq, 1, p, TILE_K, gr->d_o + row * D, c->D, 1,
                    gr->dv + key_row * D, c->D);
        if (gr->dk) {
            dscores_tile(c, gr, bh, t0, nq, s0, nk, p, ds);
            hl_gemm(true, false, nk, c->D, nq, 1, ds, TILE_K, c->q + row * D, c->D, 1,
                    gr->dk + key_row * D, c->D);
        }
    }
}

static void attention_backward(const attn_ctx *c, const attn_grads *gr)
{
    const int q_tiles = (c->T + TILE_Q - 1) / TILE_Q, k_tiles = (c->S + TILE_K - 1) / TILE_K;
    const int bh_count = c->B * c->H;
    const int kv_tasks = gr->dk || gr->dv ? bh_count * k_tiles : 0;
    const double work = (double)bh_count * c->T * c->S * c->D;
    /* One team for both passes; the barrier between them publishes D. */
#pragma omp parallel if (work >= HL_PARALLEL_MIN_WORK)
    {
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < bh_count * q_tiles; task++) {
            const int bh = task / q_tiles, t0 = task % q_tiles * TILE_Q;
            dq_tile(c, gr, bh, t0, min_int(TILE_Q, c->T - t0));
        }
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < kv_tasks; task++) {
            const int bh = task / k_tiles, s0 = task % k_tiles * TILE_K;
            dkv_tile(c, gr, bh, s0, min_int(TILE_K, c->S - s0));
        }
    }
}

void hl_attention_backward(hl_graph *g, hl_node *n)
{
    const attn_saved *saved = n->saved;
    const attn_ctx *c = &saved->ctx;
    attn_grads gr = {.lse = saved->lse, .o = n->out->data, .d_o = n->out->grad,
                     .dq = hl_op_grad(g, n->inputs[0]), .dk = hl_op_grad(g, n->inputs[1]),
                     .dv = hl_op_grad(g, n->inputs[2])};
    if (!gr.dq && !gr.dk && !gr.dv)
        return;
    gr.delta = hl_graph_alloc(g, (size_t)c->B * c->H * c->T * sizeof *gr.delta);
    if (!gr.delta)
        return; /* out of memory, recorded on the graph */
    attention_backward(c, &gr);
}
