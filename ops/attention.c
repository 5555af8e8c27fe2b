/* Scaled dot-product attention as one op, flash-attention style (Dao et al.
 * 2022, with FlashAttention-2's loop order): softmax(scale·q·kᵀ + masks)·v
 * tile by tile; past 256×256 scores a head, the (T,S) scores never exist
 * whole.
 *
 * Forward, per (batch, head, tile of TILE_Q queries): for each tile of TILE_K
 * keys, the scores S = q·kᵀ go through scale and masks, then an online
 * softmax keeps each row's running max m and sum l, rescales the output rows
 * accumulated so far by exp(m_old - m_new) and adds exp(S - m_new)·v. At the
 * end the rows are divided by l; one log-sum-exp per row, lse = m + log l, is
 * all backward needs besides q, k, v and the output.
 *
 * Backward recomputes each tile's probabilities P = exp(S - lse) and, with
 * D_t = Σ_d dO_td·O_td (= Σ_s P_ts·dP_ts), dS = P ∘ (dO·vᵀ - D), then
 *   dv += Pᵀ·dO,  dq += scale·dS·k,  dk += scale·dSᵀ·q
 * in one pass over the tiles of a (batch, head), key tiles outside and query
 * tiles inside as in FlashAttention-2. One thread owns a whole (batch, head),
 * so no two threads ever add into the same element and every sum runs in one
 * fixed order: 1 and N threads give bitwise identical results.
 * (FlashAttention-2 splits a head's key tiles over threads and adds into dq
 * atomically, which costs determinism.) A head's key tiles fall into at most
 * KEY_GROUPS groups, fixed by S alone; dq is the sum over groups, in group
 * order, of each group's part, so with at most half as many heads as
 * threads the (head, group) pairs can go to threads, each group's part of dq
 * kept apart and added in afterwards: the same sums in the same order.
 *
 * Short contexts take whole rows instead (WHOLE_ROWS_MAX): a query tile's
 * scores against every key at once and an ordinary softmax per row, then
 * o = P·v. Under training the probabilities are kept for backward, as the
 * composed ops keep them, and backward reads them instead of recomputing
 * q·kᵀ and its exponentials: six tile products instead of seven, one pass
 * of exponentials instead of two. Long contexts keep O(T) per head.
 *
 * The tile products are ops/kernels/tile_gemm.c's, read in place on the calling
 * thread; so that q·kᵀ and dO·vᵀ read rows, forward first transposes every
 * head's keys, tile by tile (as many values as k), and backward each key
 * tile's keys and values into per-thread scratch. Scratch, transposed keys,
 * log-sum-exps, kept probabilities and D live in the graph's arena. */
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/internal.h"
#include "ops/tile_gemm.h"
#include "ops/vmath.h"

/* Queries and keys per tile: a 64×64 score tile is 16 KiB in float, and with
 * a key tile of k and v (D ≤ 64) it stays in L1/L2. */
enum { TILE_Q = 64, TILE_K = 64 };

/* The most groups a head's key tiles fall into for backward (see the top):
 * work for 8 threads a head, and at most 7 parts of dq (T×D each) kept apart. */
enum { KEY_GROUPS = 8 };

/* Heads of at most this many scores (T·S) take whole rows: 256×256 scores
 * are 256 KiB in float, one L2 cache, and the (B,H,T,S) probabilities a
 * training step keeps are then no more than the composed ops keep. */
#define WHOLE_ROWS_MAX (256 * 256)

/* One thread's scratch: two score tiles and the transposed key and value
 * tiles (D rows of TILE_K). */
typedef struct attn_scratch {
    hl_real *s, *ds, *kt, *vt;
    hl_real *rows;    /* whole rows not kept: a query tile's probabilities (TILE_Q×S) */
    hl_real *dq_part; /* backward by heads: one key group's part of a head's dq (T×D) */
} attn_scratch;

/* What forward and backward share: dims, data and masks of one call. */
typedef struct attn_ctx {
    int B, H, T, S, D;
    bool whole_rows; /* T·S <= WHOLE_ROWS_MAX */
    bool merged;     /* the output (and its gradient) is (B,T,H·D), not (B,H,T,D) */
    size_t ldo;      /* the output's row stride: H·D merged, D otherwise */
    hl_real scale;
    const hl_real *q, *k, *v; /* (B,H,T,D), (B,H,S,D), (B,H,S,D) */
    hl_attention_masks masks;
    size_t blocked_batch_stride, additive_batch_stride; /* T·S for (B,T,S), 0 for (T,S) */
} attn_ctx;

/* What a recorded node keeps (n->saved); q, k, v and the output are the node's. */
typedef struct attn_saved {
    attn_ctx ctx;
    double *lse;    /* online rows (B,H,T): log Σ_s exp(score); -inf fully masked */
    hl_real *probs; /* whole rows (B,H,T,S): the probabilities */
} attn_saved;

static int min_int(int a, int b) { return a < b ? a : b; }

/* Where row t of head bh starts in the output or its gradient. */
static size_t out_at(const attn_ctx *c, int bh, int t)
{
    if (!c->merged)
        return ((size_t)bh * c->T + (size_t)t) * (size_t)c->D;
    const size_t b = (size_t)(bh / c->H), h = (size_t)(bh % c->H);
    return (b * (size_t)c->T + (size_t)t) * c->ldo + h * (size_t)c->D;
}

/* exp(x - shift) of one value (the running rescale), the difference in double. */
static hl_real exp_shifted(hl_real x, double shift)
{
    return HL_EXP((hl_real)((double)x - shift));
}

/* Keys of query t that causal masking keeps in a tile starting at key s0. */
static int causal_keys(const attn_ctx *c, int t, int s0, int nk)
{
    if (!c->masks.causal)
        return nk;
    return t < s0 ? 0 : min_int(nk, t - s0 + 1);
}

/* One row of scores, already scaled (batch b, query t, keys s0..s0+nk-1):
 * every mask as ops/mask.c applies it (a hidden entry is -inf; the additive
 * bias is added where it is not -inf, and blocks where it is). */
static void mask_row(const attn_ctx *c, int b, int t, int s0, int nk, hl_real *row)
{
    const hl_attention_masks *m = &c->masks;
    const size_t ts = (size_t)t * c->S + s0;
    const hl_real *pad = m->key_padding ? m->key_padding->data + (size_t)b * c->S + s0 : NULL;
    const hl_real *blk = m->blocked ? m->blocked->data + b * c->blocked_batch_stride + ts : NULL;
    const hl_real *add = m->additive ? m->additive->data + b * c->additive_batch_stride + ts
                                     : NULL;
    const hl_real *doc = m->doc_ids ? m->doc_ids->data + (size_t)b * c->S : NULL;
    const int kept = causal_keys(c, t, s0, nk);
    /* One simple loop per mask, so each vectorises. */
    for (int j = kept; j < nk; j++)
        row[j] = -INFINITY;
    for (int j = 0; pad && j < kept; j++)
        row[j] = pad[j] != 0 ? -INFINITY : row[j];
    for (int j = 0; blk && j < kept; j++)
        row[j] = blk[j] != 0 ? -INFINITY : row[j];
    for (int j = 0; doc && j < kept; j++)
        row[j] = doc[s0 + j] != doc[t] ? -INFINITY : row[j];
    for (int j = 0; add && j < kept; j++)
        row[j] = add[j] == -INFINITY ? -INFINITY : row[j] + add[j];
}

/* rows (n×D, row stride D) transposed into out (D×TILE_K), by the kernel
 * set's packing transpose with alpha 1: an exact copy, in vector blocks.
 * Every query tile transposes every key tile it sees; a value at a time,
 * that was a tenth of one head's forward over 1,024 keys. */
static void transpose_tile(const hl_real *rows, int n, int D, hl_real *out)
{
    hl_kernels()->gemm_pack_transposed(n, n, D, 1, rows, (size_t)D, out, TILE_K);
}

/* Whether no mask hides or shifts any score of the tile (queries from t0,
 * keys s0..s0+nk-1): no mask but causal, and every key at or before the
 * tile's first query. */
static bool tile_unmasked(const attn_ctx *c, int t0, int s0, int nk)
{
    const hl_attention_masks *m = &c->masks;
    return !m->key_padding && !m->blocked && !m->additive && !m->doc_ids &&
           (!m->causal || s0 + nk - 1 <= t0);
}

/* The masked, scaled scores of nq queries from t0 against the nk keys from s0
 * of head bh = b·H + h, whose transpose is kt, into s (row stride lds). */
static void score_tile(const attn_ctx *c, int bh, int t0, int nq, int s0, int nk,
                       const hl_real *kt, hl_real *s, size_t lds)
{
    hl_tile_gemm_scaled(nq, nk, c->D, c->q + ((size_t)bh * c->T + t0) * c->D, (size_t)c->D, 1,
                        kt, TILE_K, c->scale, s, lds);
    if (tile_unmasked(c, t0, s0, nk))
        return;
    for (int i = 0; i < nq; i++)
        mask_row(c, bh / c->H, t0 + i, s0, nk, s + (size_t)i * lds);
}

/* Key tiles a head has. */
static int key_tiles(const attn_ctx *c) { return (c->S + TILE_K - 1) / TILE_K; }

/* Key tile s0 of head bh transposed (D×TILE_K), for forward: from keys_t,
 * where transpose_keys left it, or when keys_t is NULL transposed now into
 * the thread's scratch (kt). */
static const hl_real *forward_key_tile(const attn_ctx *c, const hl_real *keys_t, int bh, int s0,
                                       int nk, hl_real *kt)
{
    if (keys_t)
        return keys_t + ((size_t)bh * key_tiles(c) + (size_t)(s0 / TILE_K)) * c->D * TILE_K;
    transpose_tile(c->k + ((size_t)bh * c->S + s0) * c->D, nk, c->D, kt);
    return kt;
}

/* Every head's key tiles transposed into keys_t, shared out over the threads
 * of the enclosing parallel region (a barrier at the end). Every query tile
 * reads each key tile it sees transposed: done here once, not once per query
 * tile (1,024 keys of one head: 16 times fewer transposes). With one query
 * tile a head there is nothing to share, and forward transposes as it goes. */
static void transpose_keys(const attn_ctx *c, hl_real *keys_t)
{
    const int k_tiles = key_tiles(c), tasks = c->B * c->H * k_tiles;
#pragma omp for schedule(static)
    for (int task = 0; task < tasks; task++) {
        const int bh = task / k_tiles, s0 = task % k_tiles * TILE_K;
        transpose_tile(c->k + ((size_t)bh * c->S + s0) * c->D, min_int(TILE_K, c->S - s0), c->D,
                       keys_t + (size_t)task * c->D * TILE_K);
    }
}

/* The keys a tile of queries t0..t0+nq-1 can see at all: causal masking hides
 * every key after the last query, so those tiles are skipped whole. */
static int key_end(const attn_ctx *c, int t0, int nq)
{
    return c->masks.causal ? min_int(c->S, t0 + nq) : c->S;
}

/* The online-softmax step of one row, up to its exponentials: folds the
 * scores row[0..nk) into the running max *m, rescales the running sum *l and
 * the output row o accumulated so far, and returns the shift the row's
 * exponentials take (hl_vmath_exp_sum_rows then leaves exp(row - shift) in
 * row, for the product with v, and its sum for *l). */
static hl_real online_softmax_shift(const hl_real *row, int nk, hl_real *m, double *l, hl_real *o,
                                    int D)
{
    /* A NaN score makes the running max NaN (and keeps it so), and from it
     * the sum, the rescaled output and the log-sum-exp: NaN reaches the
     * output, as through hl_softmax. */
    const hl_real tile_max = hl_vmath_max(row, (size_t)nk);
    const hl_real max = tile_max > *m || isnan(tile_max) ? tile_max : *m;
    /* Nothing visible yet: every score is -inf, and a shift of 0 makes its
     * exponentials 0 where one of -inf would make them NaN. */
    if (max == -INFINITY)
        return 0;
    if (max != *m && *m != -INFINITY) {
        hl_real alpha = exp_shifted(*m, max);
        *l *= alpha;
        for (int d = 0; d < D; d++)
            o[d] *= alpha;
    }
    *m = max;
    return max;
}

/* Forward of one query tile of head bh: its output rows o (nq×D, c->ldo
 * apart, written whole) and, when lse is not NULL, their log-sum-exps. */
static void forward_tile(const attn_ctx *c, int bh, int t0, int nq, hl_real *o, double *lse,
                         const hl_real *keys_t, const attn_scratch *w)
{
    hl_real m[TILE_Q];
    double l[TILE_Q];
    const int D = c->D, end = key_end(c, t0, nq);
    const size_t ldo = c->ldo;
    for (int i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
        memset(o + i * ldo, 0, (size_t)D * sizeof *o);
    }
    for (int s0 = 0; s0 < end; s0 += TILE_K) {
        const int nk = min_int(TILE_K, c->S - s0);
        const size_t key_row = (size_t)bh * c->S + s0;
        score_tile(c, bh, t0, nq, s0, nk, forward_key_tile(c, keys_t, bh, s0, nk, w->kt), w->s,
                   TILE_K);
        hl_real shift[TILE_Q];
        double sum[TILE_Q];
        for (int i = 0; i < nq; i++)
            shift[i] = online_softmax_shift(w->s + (size_t)i * TILE_K, nk, &m[i], &l[i],
                                            o + i * ldo, D);
        hl_vmath_exp_sum_rows(w->s, TILE_K, nq, (size_t)nk, shift, sum);
        for (int i = 0; i < nq; i++)
            l[i] += sum[i];
        hl_tile_gemm(nq, D, nk, w->s, TILE_K, 1, c->v + key_row * D, (size_t)D, true, o, ldo);
    }
    for (int i = 0; i < nq; i++) {
        /* A fully masked row has l = 0 and o still all zeros: as hl_softmax.
         * A row that met a NaN has l NaN: it divides, and stays NaN. */
        if (l[i] != 0)
            hl_vmath_mul_double(o + i * ldo, 1.0 / l[i], o + i * ldo, (size_t)D);
        if (lse)
            lse[i] = l[i] != 0 ? (double)m[i] + log(l[i]) : -INFINITY;
    }
}

/* Forward of one query tile by whole rows: the probabilities of its nq
 * queries against every key tile they can see into p (row stride S), then
 * the output rows o = p·v (nq×D, c->ldo apart, written whole). Causal masking leaves the
 * key tiles past the queries' last one unwritten; backward never reads them. */
static void forward_tile_whole(const attn_ctx *c, int bh, int t0, int nq, hl_real *o,
                               hl_real *p, const hl_real *keys_t, const attn_scratch *w)
{
    const int D = c->D, end = key_end(c, t0, nq);
    const size_t S = (size_t)c->S;
    int cols = 0;
    for (int s0 = 0; s0 < end; s0 += TILE_K) {
        const int nk = min_int(TILE_K, c->S - s0);
        score_tile(c, bh, t0, nq, s0, nk, forward_key_tile(c, keys_t, bh, s0, nk, w->kt), p + s0,
                   S);
        cols = s0 + nk;
    }
    for (int i = 0; i < nq; i++)
        hl_softmax_row(p + (size_t)i * S, p + (size_t)i * S, cols);
    hl_tile_gemm(nq, D, cols, p, S, 1, c->v + (size_t)bh * S * D, (size_t)D, false, o,
                 c->ldo);
}

/* Per-thread scratch for a parallel region: threads × (2 score tiles and 2
 * transposed tiles, the rows of a query tile's probabilities when whole
 * rows are not kept, a part of dq when dq_part) from the arena, or NULL
 * (recorded on the graph). */
static size_t scratch_per_thread(const attn_ctx *c, bool prob_rows, bool dq_part)
{
    return 2 * (size_t)TILE_Q * TILE_K + 2 * (size_t)c->D * TILE_K +
           (prob_rows ? (size_t)TILE_Q * c->S : 0) + (dq_part ? (size_t)c->T * c->D : 0);
}

static int max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static hl_real *scratch_alloc(hl_graph *g, const attn_ctx *c, bool prob_rows, bool dq_part)
{
    return hl_graph_alloc(g, (size_t)max_threads() * scratch_per_thread(c, prob_rows, dq_part) *
                                 sizeof(hl_real));
}

/* The calling thread's share of the scratch, laid out s, ds, kt, vt, then
 * rows or dq_part. */
static attn_scratch scratch_of(const attn_ctx *c, hl_real *base, bool prob_rows, bool dq_part)
{
    int thread = 0;
#ifdef _OPENMP
    thread = omp_get_thread_num();
#endif
    const size_t tile = (size_t)TILE_Q * TILE_K, kv = (size_t)c->D * TILE_K;
    hl_real *mine = base + (size_t)thread * scratch_per_thread(c, prob_rows, dq_part);
    hl_real *rest = mine + 2 * tile + 2 * kv;
    return (attn_scratch){.s = mine, .ds = mine + tile, .kt = mine + 2 * tile,
                          .vt = mine + 2 * tile + kv, .rows = prob_rows ? rest : NULL,
                          .dq_part = dq_part ? rest : NULL};
}

/* The forward of query tile `task` (head task / q_tiles) on the calling
 * thread, keys_t as transpose_keys leaves it (or NULL). */
static void forward_task(const attn_ctx *c, int task, int q_tiles, hl_real *out, double *lse,
                         hl_real *probs, const hl_real *keys_t, const attn_scratch *w)
{
    const int bh = task / q_tiles, t0 = task % q_tiles * TILE_Q;
    const int nq = min_int(TILE_Q, c->T - t0);
    const size_t row = (size_t)bh * c->T + t0;
    if (c->whole_rows)
        forward_tile_whole(c, bh, t0, nq, out + out_at(c, bh, t0),
                           probs ? probs + row * c->S : w->rows, keys_t, w);
    else
        forward_tile(c, bh, t0, nq, out + out_at(c, bh, t0), lse ? lse + row : NULL, keys_t, w);
}

/* The output and, as the path takes them, the log-sum-exps (online rows)
 * or the probabilities (whole rows) for backward; either may be NULL.
 * keys_t has room for every head's transposed keys (key_tiles·D·TILE_K a
 * head), or is NULL with one query tile a head. */
static void attention_forward(const attn_ctx *c, hl_real *out, double *lse, hl_real *probs,
                              hl_real *keys_t, hl_real *scratch)
{
    const int q_tiles = (c->T + TILE_Q - 1) / TILE_Q;
    const int tasks = c->B * c->H * q_tiles;
    const bool prob_rows = c->whole_rows && !probs;
#pragma omp parallel if ((double)c->B * c->H * c->T * c->S * c->D >= HL_PARALLEL_MIN_WORK)
    {
        const attn_scratch w = scratch_of(c, scratch, prob_rows, false);
        if (keys_t)
            transpose_keys(c, keys_t);
        /* Without causal masking every tile costs the same: each thread
         * takes one contiguous run of them, so no two threads work on
         * neighbouring rows (at 2 threads 10% faster than handing tiles out
         * one by one). Under causal masking the tiles of a head differ in
         * cost: one by one. */
        if (c->masks.causal) {
#pragma omp for schedule(dynamic, 1)
            for (int task = 0; task < tasks; task++)
                forward_task(c, task, q_tiles, out, lse, probs, keys_t, &w);
        } else {
#pragma omp for schedule(static)
            for (int task = 0; task < tasks; task++)
                forward_task(c, task, q_tiles, out, lse, probs, keys_t, &w);
        }
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

/* A mask tensor (key_padding or doc_ids when per_query is false, else
 * blocked or additive) against the call's dims; fills its batch stride. */
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

static hl_tensor *attention(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v,
                            hl_real scale, const hl_attention_masks *masks, bool merged)
{
    hl_tensor *inputs[3] = {q, k, v};
    if (!hl_op_inputs_ok(g, HL_OP_ATTENTION, 3, inputs) || !qkv_ok(g, q, k, v))
        return &g->poison;
    attn_ctx c = {.B = q->shape[0], .H = q->shape[1], .T = q->shape[2], .S = k->shape[2],
                  .D = q->shape[3], .scale = scale, .q = q->data, .k = k->data, .v = v->data};
    c.whole_rows = (size_t)c.T * c.S <= WHOLE_ROWS_MAX;
    c.merged = merged;
    c.ldo = merged ? (size_t)c.H * c.D : (size_t)c.D;
    if (masks)
        c.masks = *masks;
    if (!mask_ok(g, &c, c.masks.key_padding, "key_padding", false, NULL) ||
        !mask_ok(g, &c, c.masks.blocked, "blocked", true, &c.blocked_batch_stride) ||
        !mask_ok(g, &c, c.masks.additive, "additive", true, &c.additive_batch_stride) ||
        !mask_ok(g, &c, c.masks.doc_ids, "doc_ids", false, NULL))
        return &g->poison;
    if (c.masks.doc_ids && c.T > c.S)
        return hl_op_fail(g, HL_OP_ATTENTION, HL_ERR_SHAPE,
                          "doc_ids needs T <= S (query t is at key position t), not T %d > S %d",
                          c.T, c.S);
    hl_tensor *out = merged ? hl_op_output(g, HL_OP_ATTENTION, 3, (int[]){c.B, c.T, c.H * c.D})
                            : hl_op_output(g, HL_OP_ATTENTION, 4, q->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    /* The log-sum-exps or probabilities are kept only when backward will
     * need them. */
    hl_node *n = hl_op_record(g, HL_OP_ATTENTION, out, 3, inputs);
    attn_saved *saved = n ? hl_graph_alloc(g, sizeof *saved) : NULL;
    const size_t rows = (size_t)c.B * c.H * c.T;
    double *lse = n && !c.whole_rows ? hl_graph_alloc(g, rows * sizeof *lse) : NULL;
    hl_real *probs = n && c.whole_rows ? hl_graph_alloc(g, rows * c.S * sizeof *probs) : NULL;
    if (hl_graph_failed(g))
        return &g->poison;
    if (n) {
        *saved = (attn_saved){c, lse, probs};
        n->saved = saved;
    }
    hl_real *keys_t = c.T > TILE_Q ? hl_graph_alloc(g, (size_t)c.B * c.H * key_tiles(&c) * c.D *
                                                           TILE_K * sizeof *keys_t)
                                   : NULL;
    hl_real *scratch = scratch_alloc(g, &c, c.whole_rows && !probs, false);
    if (!scratch || hl_graph_failed(g))
        return &g->poison; /* out of memory, recorded on the graph */
    attention_forward(&c, out->data, lse, probs, keys_t, scratch);
    return out;
}

hl_tensor *hl_attention(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v, hl_real scale,
                        const hl_attention_masks *masks)
{
    return attention(g, q, k, v, scale, masks, false);
}

hl_tensor *hl_attention_merged(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v,
                               hl_real scale, const hl_attention_masks *masks)
{
    return attention(g, q, k, v, scale, masks, true);
}

/* ---- backward ---- */

/* What the backward passes read and write besides the forward's context. */
typedef struct attn_grads {
    const double *lse;      /* online rows (B,H,T), from forward */
    const hl_real *probs;   /* whole rows (B,H,T,S), from forward */
    double *delta;          /* (B,H,T): D_t = Σ_d dO_td·O_td, written by pass 1 */
    const hl_real *o, *d_o; /* the output and its gradient, rows as out_at says */
    hl_real *dq, *dk, *dv;  /* NULL when that input needs no gradient */
    hl_real *dq_parts;      /* by groups: groups 1.. of each head's dq parts (T×D each) */
} attn_grads;

/* The probabilities P = exp(S - lse) of a tile into w->s, recomputed from q
 * and the transposed key tile; a fully masked row (lse -inf) is all zeros. */
static void probs_tile(const attn_ctx *c, const double *lse, int bh, int t0, int nq, int s0,
                       int nk, const attn_scratch *w)
{
    score_tile(c, bh, t0, nq, s0, nk, w->kt, w->s, TILE_K);
    const size_t row = (size_t)bh * c->T + t0;
    for (int i = 0; i < nq; i++) {
        hl_real *pr = w->s + (size_t)i * TILE_K;
        if (lse[row + i] == -INFINITY)
            memset(pr, 0, (size_t)nk * sizeof *pr);
        else /* lse in two parts, so its low bits survive the rounding to hl_real */
            hl_vmath_exp(pr, (hl_real)lse[row + i],
                         (hl_real)(lse[row + i] - (double)(hl_real)lse[row + i]), pr, (size_t)nk);
    }
}

/* The gradient of the scaled scores before scale, scale·P∘(dO·vᵀ - D), of a
 * tile into w->ds, P's rows ldp apart; as hl_softmax's backward, the
 * difference is taken in double. */
static void dscores_tile(const attn_ctx *c, const attn_grads *gr, int bh, int t0, int nq,
                         int nk, const hl_real *p, size_t ldp, const attn_scratch *w)
{
    const size_t row = (size_t)bh * c->T + t0;
    hl_tile_gemm(nq, nk, c->D, gr->d_o + out_at(c, bh, t0), c->ldo, 1, w->vt, TILE_K, false,
                 w->ds, TILE_K);
    for (int i = 0; i < nq; i++) {
        hl_real *dr = w->ds + (size_t)i * TILE_K;
        hl_vmath_softmax_grad(p + (size_t)i * ldp, dr, gr->delta[row + i], c->scale, dr,
                              (size_t)nk, true);
    }
}

/* D_t = Σ_d dO_td·O_td for the T rows of head bh, each summed in d order.
 * DELTA_LANES rows advance in lockstep, so their adds overlap instead of each
 * waiting for the one before. */
#define DELTA_LANES 8

static void deltas(const attn_ctx *c, const attn_grads *gr, int bh)
{
    const size_t first = out_at(c, bh, 0), stride = c->ldo;
    double *delta = gr->delta + (size_t)bh * c->T;
    for (int t0 = 0; t0 < c->T; t0 += DELTA_LANES) {
        const int n = min_int(DELTA_LANES, c->T - t0);
        double dot[DELTA_LANES] = {0};
        for (int d = 0; d < c->D; d++)
            for (int l = 0; l < n; l++) {
                const size_t at = first + (size_t)(t0 + l) * stride + (size_t)d;
                dot[l] += (double)gr->d_o[at] * (double)gr->o[at];
            }
        for (int l = 0; l < n; l++)
            delta[t0 + l] = dot[l];
    }
}

/* The first query tile that sees key tile s0: under causal masking queries
 * before s0 see none of its keys. */
static int first_query_tile(const attn_ctx *c, int s0)
{
    return c->masks.causal ? s0 / TILE_Q * TILE_Q : 0;
}

/* The key and value tiles of s0, transposed into w->kt (when P is to be
 * recomputed) and w->vt. */
static void transpose_key_tile(const attn_ctx *c, const attn_grads *gr, int bh, int s0, int nk,
                               const attn_scratch *w)
{
    const size_t key_row = (size_t)bh * c->S + s0;
    if (!gr->probs)
        transpose_tile(c->k + key_row * (size_t)c->D, nk, c->D, w->kt);
    transpose_tile(c->v + key_row * (size_t)c->D, nk, c->D, w->vt);
}

/* P and dS of the tile (query tile t0, key tile s0), its key tile already
 * transposed; P's rows are *ldp apart. */
static const hl_real *tile_grads(const attn_ctx *c, const attn_grads *gr, int bh, int t0, int nq,
                                 int s0, int nk, size_t *ldp, const attn_scratch *w)
{
    const size_t row = (size_t)bh * c->T + t0;
    /* P: kept whole rows, or recomputed into w->s. */
    const hl_real *p = gr->probs ? gr->probs + row * c->S + s0 : w->s;
    *ldp = gr->probs ? (size_t)c->S : TILE_K;
    if (!gr->probs)
        probs_tile(c, gr->lse, bh, t0, nq, s0, nk, w);
    if (gr->dq || gr->dk)
        dscores_tile(c, gr, bh, t0, nq, nk, p, *ldp, w);
    return p;
}

/* Key tile s0 of head bh, over the query tiles that see it: dv += Pᵀ·dO,
 * dk += scale·dSᵀ·q, and dq_part += scale·dS·k when dq_part (the head's T
 * rows of D) is given. */
static void key_tile_backward(const attn_ctx *c, const attn_grads *gr, int bh, int s0,
                              hl_real *dq_part, const attn_scratch *w)
{
    const size_t D = (size_t)c->D;
    const int nk = min_int(TILE_K, c->S - s0);
    const size_t key_row = (size_t)bh * c->S + s0;
    transpose_key_tile(c, gr, bh, s0, nk, w);
    for (int t0 = first_query_tile(c, s0); t0 < c->T; t0 += TILE_Q) {
        const int nq = min_int(TILE_Q, c->T - t0);
        const size_t row = (size_t)bh * c->T + t0;
        size_t ldp;
        const hl_real *p = tile_grads(c, gr, bh, t0, nq, s0, nk, &ldp, w);
        if (gr->dv)
            hl_tile_gemm(nk, c->D, nq, p, 1, ldp, gr->d_o + out_at(c, bh, t0), c->ldo,
                         true, gr->dv + key_row * D, D);
        if (dq_part)
            hl_tile_gemm(nq, c->D, nk, w->ds, TILE_K, 1, c->k + key_row * D, D, true,
                         dq_part + (size_t)t0 * D, D);
        if (gr->dk)
            hl_tile_gemm(nk, c->D, nq, w->ds, 1, TILE_K, c->q + row * D, D, true,
                         gr->dk + key_row * D, D);
    }
}

/* The groups of a head's key tiles, and where group g starts (S for g =
 * groups): whole tiles, as many to each as can be. */
static int key_groups(const attn_ctx *c)
{
    return min_int(KEY_GROUPS, (c->S + TILE_K - 1) / TILE_K);
}

static int group_start(const attn_ctx *c, int g, int groups)
{
    const int k_tiles = (c->S + TILE_K - 1) / TILE_K;
    return min_int(k_tiles * g / groups * TILE_K, c->S);
}

/* Group g of head bh's key tiles. Group 0 adds into dq itself; a later one
 * into its part (the head's T×D rows, zeroed first from the first query tile
 * that sees the group), which the caller adds into dq afterwards. */
static void key_group_backward(const attn_ctx *c, const attn_grads *gr, int bh, int g,
                               int groups, hl_real *part, const attn_scratch *w)
{
    const size_t D = (size_t)c->D;
    const int s_begin = group_start(c, g, groups), s_end = group_start(c, g + 1, groups);
    hl_real *dq_part = NULL;
    if (gr->dq && g == 0) {
        dq_part = gr->dq + (size_t)bh * c->T * D;
    } else if (gr->dq) {
        const int t_first = min_int(first_query_tile(c, s_begin), c->T);
        memset(part + (size_t)t_first * D, 0, (size_t)(c->T - t_first) * D * sizeof *part);
        dq_part = part;
    }
    for (int s0 = s_begin; s0 < s_end; s0 += TILE_K)
        key_tile_backward(c, gr, bh, s0, dq_part, w);
}

/* dq += group g's part, rows t0..t0+nq-1 of head bh (those the group sees). */
static void add_dq_part(const attn_ctx *c, const attn_grads *gr, int bh, int g, int groups,
                        const hl_real *part, int t0, int nq)
{
    const int t_first = first_query_tile(c, group_start(c, g, groups));
    if (t0 + nq <= t_first)
        return;
    const int from = t0 > t_first ? t0 : t_first;
    const size_t D = (size_t)c->D;
    hl_vmath_add(part + (size_t)from * D, gr->dq + ((size_t)bh * c->T + from) * D,
                 (size_t)(t0 + nq - from) * D);
}

/* Whether backward shares out (head, key group) pairs instead of heads:
 * with at most half as many heads as threads. */
static bool backward_by_groups(const attn_ctx *c)
{
    const int heads = c->B * c->H;
    return (double)heads * c->T * c->S * c->D >= HL_PARALLEL_MIN_WORK &&
           2 * heads <= max_threads() && key_groups(c) > 1;
}

/* By groups: where key group g > 0 of head bh keeps its part of dq. */
static hl_real *dq_part_of(const attn_ctx *c, const attn_grads *gr, int bh, int g, int groups)
{
    return gr->dq_parts + ((size_t)bh * (groups - 1) + g - 1) * c->T * c->D;
}

/* By heads, one thread a head: its groups one after another, each later
 * group's part of dq added in as soon as it is done. By groups: every
 * (head, group) pair a task, the parts kept in gr->dq_parts, then added in
 * group order by (head, query tile) tasks. Both add the same parts in the
 * same order. */
static void attention_backward(const attn_ctx *c, const attn_grads *gr, bool by_groups,
                               hl_real *scratch)
{
    const int heads = c->B * c->H, groups = key_groups(c);
    const int q_tiles = (c->T + TILE_Q - 1) / TILE_Q;
#pragma omp parallel if ((double)heads * c->T * c->S * c->D >= HL_PARALLEL_MIN_WORK)
    {
        const attn_scratch w = scratch_of(c, scratch, false, !by_groups && gr->dq);
        if (!by_groups) {
            /* Every head costs the same, masked or not: a contiguous run each. */
#pragma omp for schedule(static)
            for (int bh = 0; bh < heads; bh++) {
                deltas(c, gr, bh);
                for (int g = 0; g < groups; g++) {
                    key_group_backward(c, gr, bh, g, groups, w.dq_part, &w);
                    if (gr->dq && g > 0)
                        add_dq_part(c, gr, bh, g, groups, w.dq_part, 0, c->T);
                }
            }
        } else {
#pragma omp for schedule(static)
            for (int bh = 0; bh < heads; bh++)
                deltas(c, gr, bh);
            /* Under causal masking groups differ in cost: one by one. */
#pragma omp for schedule(dynamic, 1)
            for (int task = 0; task < heads * groups; task++) {
                const int bh = task / groups, g = task % groups;
                hl_real *part = g > 0 && gr->dq ? dq_part_of(c, gr, bh, g, groups) : NULL;
                key_group_backward(c, gr, bh, g, groups, part, &w);
            }
            if (gr->dq) {
#pragma omp for schedule(static)
                for (int task = 0; task < heads * q_tiles; task++) {
                    const int bh = task / q_tiles, t0 = task % q_tiles * TILE_Q;
                    for (int g = 1; g < groups; g++)
                        add_dq_part(c, gr, bh, g, groups, dq_part_of(c, gr, bh, g, groups), t0,
                                    min_int(TILE_Q, c->T - t0));
                }
            }
        }
    }
}

void hl_attention_backward(hl_graph *g, hl_node *n)
{
    const attn_saved *saved = n->saved;
    const attn_ctx *c = &saved->ctx;
    attn_grads gr = {.lse = saved->lse, .probs = saved->probs, .o = n->out->data,
                     .d_o = n->out->grad,
                     .dq = hl_op_grad(g, n->inputs[0]), .dk = hl_op_grad(g, n->inputs[1]),
                     .dv = hl_op_grad(g, n->inputs[2])};
    if (!gr.dq && !gr.dk && !gr.dv)
        return;
    /* q the same tensor as k or v (hl_attention(x, x, x)): group 0 adds into
     * dq's rows while the other groups add into the same rows as dk or dv,
     * so only one thread a head may touch them. */
    const bool dq_shared = gr.dq && (gr.dq == gr.dk || gr.dq == gr.dv);
    const bool by_groups = backward_by_groups(c) && !dq_shared;
    const size_t heads = (size_t)c->B * c->H;
    gr.delta = hl_graph_alloc(g, heads * c->T * sizeof *gr.delta);
    if (by_groups && gr.dq)
        gr.dq_parts = hl_graph_alloc(g, heads * (size_t)(key_groups(c) - 1) * c->T * c->D *
                                            sizeof *gr.dq_parts);
    hl_real *scratch = gr.delta ? scratch_alloc(g, c, false, !by_groups && gr.dq) : NULL;
    if (!scratch || (by_groups && gr.dq && !gr.dq_parts))
        return; /* out of memory, recorded on the graph */
    attention_backward(c, &gr, by_groups, scratch);
}
