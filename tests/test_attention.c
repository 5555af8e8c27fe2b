/* Tests for ops/attention.c: the fused op against the composed ops (matmul,
 * scale, masks, softmax, matmul) on odd shapes and every mask, the gradient
 * check, thread-count identity, memory and the error paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h" /* HL_PARALLEL_MIN_WORK */
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define FUSED_TOL 1e-12
#else
#define FUSED_TOL 2e-5
#endif

/* What one comparison runs: a shape (B,H,T,S,D) and its masks. */
typedef struct {
    int B, H, T, S, D;
    hl_real scale;
    hl_attention_masks masks;
} attn_case;

static hl_tensor *build_fused(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const attn_case *c = ctx;
    return hl_attention(g, in[0], in[1], in[2], c->scale, &c->masks);
}

static hl_tensor *build_composed(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const attn_case *c = ctx;
    const hl_attention_masks *m = &c->masks;
    hl_tensor *s = hl_scale(g, hl_matmul(g, in[0], in[1], HL_TRANS_B), c->scale);
    if (m->causal)
        s = hl_mask_causal(g, s);
    if (m->key_padding)
        s = hl_mask_key_padding(g, s, m->key_padding);
    if (m->blocked)
        s = hl_mask_blocked(g, s, m->blocked);
    if (m->additive)
        s = hl_mask_additive(g, s, m->additive);
    if (m->doc_ids)
        s = hl_mask_documents(g, s, m->doc_ids);
    return hl_matmul(g, hl_softmax(g, s), in[2], 0);
}

/* q, k, v of a case, U(-1,1) from seeds; they require grad. */
static void make_qkv(const attn_case *c, uint64_t seed, hl_tensor **qkv)
{
    qkv[0] = tu_random("q", 4, (int[]){c->B, c->H, c->T, c->D}, true, seed, -1, 1);
    qkv[1] = tu_random("k", 4, (int[]){c->B, c->H, c->S, c->D}, true, seed + 1, -1, 1);
    qkv[2] = tu_random("v", 4, (int[]){c->B, c->H, c->S, c->D}, true, seed + 2, -1, 1);
}

static void free_qkv(hl_tensor **qkv)
{
    for (int i = 0; i < 3; i++)
        hl_tensor_free(qkv[i]);
}

/* A 0/1 mask where each entry is 1 with probability p. */
static hl_tensor *random_bits(const char *name, int rank, const int *shape, uint64_t seed,
                              double p)
{
    hl_tensor *m = tu_random(name, rank, shape, false, seed, 0, 1);
    for (size_t i = 0; i < m->numel; i++)
        m->data[i] = m->data[i] < p;
    return m;
}

/* An additive bias U(-1,1) with -inf at probability p. */
static hl_tensor *random_bias(int rank, const int *shape, uint64_t seed, double p)
{
    hl_tensor *m = tu_random("bias", rank, shape, false, seed, -1, 1);
    hl_tensor *hide = random_bits("hide", rank, shape, seed + 7, p);
    for (size_t i = 0; i < m->numel; i++)
        if (hide->data[i] != 0)
            m->data[i] = -INFINITY;
    hl_tensor_free(hide);
    return m;
}

/* Appends "<real> <what> <part> <max diff>" to $HL_ATTN_LOG when set. */
static void log_diff(const char *what, const char *part, double diff)
{
    const char *path = getenv("HL_ATTN_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s %s %s %.3e\n", HL_REAL_NAME, what, part, diff);
        fclose(f);
    }
}

/* Fused against composed: output, dq, dk, dv within FUSED_TOL·(1 + |ref|). */
static void expect_fused_equals_composed(const char *what, attn_case *c, uint64_t seed)
{
    hl_tensor *qkv[3];
    make_qkv(c, seed, qkv);
    size_t n, n2;
    hl_real *fused = tu_forward_backward(build_fused, c, qkv, 3, &n);
    hl_real *ref = tu_forward_backward(build_composed, c, qkv, 3, &n2);
    ck_assert_uint_eq(n, n2);
    const char *parts[] = {"output", "dq", "dk", "dv"};
    const size_t ends[] = {qkv[0]->numel, 2 * qkv[0]->numel, 2 * qkv[0]->numel + qkv[1]->numel,
                           n};
    size_t i = 0;
    for (int p = 0; p < 4; p++) {
        double max_diff = 0;
        for (; i < ends[p]; i++) {
            const double d = fabs((double)fused[i] - (double)ref[i]);
            ck_assert_msg(isfinite((double)fused[i]), "%s: %s not finite", what, parts[p]);
            ck_assert_msg(d <= FUSED_TOL * (1 + fabs((double)ref[i])),
                          "%s (%d,%d,%d,%d,%d): %s[%zu] fused %.9g, composed %.9g", what, c->B,
                          c->H, c->T, c->S, c->D, parts[p], i, (double)fused[i], (double)ref[i]);
            max_diff = fmax(max_diff, d);
        }
        log_diff(what, parts[p], max_diff);
    }
    free(fused);
    free(ref);
    free_qkv(qkv);
}

/* ---- fused against composed, every mask ---- */

enum { N_MASK_SETS = 11, N_OWNED = 4 };
static const char *const mask_set_names[N_MASK_SETS] = {
    "no mask",          "causal",          "key_padding",          "blocked (T,S)",
    "blocked (B,T,S)",  "additive (T,S)",  "additive (B,T,S)",     "all four",
    "causal+additive (B,T,S)", "documents", "causal+documents+key_padding"};

/* Whether set `set` applies to c's shape: document ids need T <= S. */
static bool mask_set_fits(const attn_case *c, int set) { return set < 9 || c->T <= c->S; }

/* The masks of set `set` for c's shape; the tensors go into owned[0..N_OWNED).
 * Fully masked rows are made on purpose: the last batch element's keys all
 * padded, query 0 fully blocked, query T-1 all -inf in batch 0's bias.
 * Documents are runs of random length (a new one at each key with
 * probability 0.1), batch 0's first one a single key. */
static void make_masks(attn_case *c, int set, uint64_t seed, hl_tensor **owned)
{
    const int B = c->B, T = c->T, S = c->S;
    hl_attention_masks *m = &c->masks;
    *m = (hl_attention_masks){.causal = set == 1 || set == 7 || set == 8 || set == 10};
    if (set >= 9) {
        owned[3] = random_bits("doc_ids", 2, (int[]){B, S}, seed + 3, 0.1);
        for (int b = 0; b < B; b++) {
            hl_real *ids = owned[3]->data + (size_t)b * S;
            ids[0] = 0;
            for (int s = 1; s < S; s++)
                ids[s] = ids[s - 1] + ids[s] + (b == 0 && s == 1);
        }
        m->doc_ids = owned[3];
    }
    if (set == 10) {
        owned[0] = random_bits("key_padding", 2, (int[]){B, S}, seed, 0.2);
        m->key_padding = owned[0];
    }
    if (set == 2 || set == 7) {
        owned[0] = random_bits("key_padding", 2, (int[]){B, S}, seed, 0.3);
        for (int s = 0; B > 1 && s < S; s++)
            owned[0]->data[(size_t)(B - 1) * S + s] = 1;
        m->key_padding = owned[0];
    }
    if (set == 3 || set == 4 || set == 7) {
        const bool per_batch = set != 3;
        owned[1] = per_batch ? random_bits("blocked", 3, (int[]){B, T, S}, seed + 1, 0.3)
                             : random_bits("blocked", 2, (int[]){T, S}, seed + 1, 0.3);
        for (int s = 0; s < S; s++)
            owned[1]->data[s] = 1;
        m->blocked = owned[1];
    }
    if (set == 5 || set == 6 || set == 7 || set == 8) {
        const bool per_batch = set == 6 || set == 8;
        owned[2] = per_batch ? random_bias(3, (int[]){B, T, S}, seed + 2, 0.2)
                             : random_bias(2, (int[]){T, S}, seed + 2, 0.2);
        for (int s = 0; per_batch && s < S; s++)
            owned[2]->data[(size_t)(T - 1) * S + s] = -INFINITY;
        m->additive = owned[2];
    }
}

/* Every shape but the last takes whole rows; the last, past 256×256 scores a
 * head, the online softmax. */
static const int shapes[][5] = {
    {2, 3, 5, 7, 3},    {1, 2, 67, 130, 17}, {2, 1, 1, 9, 8},    {2, 2, 9, 1, 5},
    {1, 1, 130, 67, 16}, {2, 2, 64, 64, 17},  {1, 1, 70, 200, 3}, {1, 1, 260, 257, 5},
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

START_TEST(test_attention_matches_composed)
{
    const int *sh = shapes[_i];
    for (int set = 0; set < N_MASK_SETS; set++) {
        /* 1/√D, and a larger scale on odd shapes for sharper distributions. */
        attn_case c = {sh[0], sh[1], sh[2], sh[3], sh[4], (hl_real)(_i % 2 ? 1.7 : 1 / sqrt(sh[4])),
                       {0}};
        if (!mask_set_fits(&c, set))
            continue;
        hl_tensor *owned[N_OWNED] = {NULL};
        make_masks(&c, set, 100 + (uint64_t)(10 * _i + set), owned);
        expect_fused_equals_composed(mask_set_names[set], &c, 200 + (uint64_t)(10 * _i + set));
        for (int i = 0; i < N_OWNED; i++)
            hl_tensor_free(owned[i]);
    }
}
END_TEST

/* hl_attention then the heads merged by permute and reshape: what
 * hl_attention_merged does in one op. */
static hl_tensor *build_then_merge(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    hl_tensor *o = build_fused(g, in, ctx);
    hl_tensor *m = hl_permute(g, o, (int[]){0, 2, 1, 3});
    return hl_reshape(g, m, 3, (int[]){m->shape[0], m->shape[1], m->shape[2] * m->shape[3]});
}

static hl_tensor *build_merged(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const attn_case *c = ctx;
    return hl_attention_merged(g, in[0], in[1], in[2], c->scale, &c->masks);
}

/* The merged output, and every gradient through it, bit for bit as the heads
 * merged after hl_attention: on every shape (whole rows and the online
 * softmax) and every mask set. */
START_TEST(test_attention_merged_same_bits)
{
    const int *sh = shapes[_i];
    for (int set = 0; set < N_MASK_SETS; set++) {
        attn_case c = {sh[0], sh[1], sh[2], sh[3], sh[4], (hl_real)(1 / sqrt(sh[4])), {0}};
        if (!mask_set_fits(&c, set))
            continue;
        hl_tensor *owned[N_OWNED] = {NULL};
        make_masks(&c, set, 300 + (uint64_t)(10 * _i + set), owned);
        hl_tensor *qkv[3];
        make_qkv(&c, 400 + 3 * (uint64_t)(10 * _i + set), qkv);
        size_t n_merged, n_then;
        hl_real *merged = tu_forward_backward(build_merged, &c, qkv, 3, &n_merged);
        hl_real *then = tu_forward_backward(build_then_merge, &c, qkv, 3, &n_then);
        ck_assert_uint_eq(n_merged, n_then);
        ck_assert_msg(memcmp(merged, then, n_merged * sizeof *merged) == 0,
                      "attention_merged (%d,%d,%d,%d,%d), %s: differs from attention + merge",
                      sh[0], sh[1], sh[2], sh[3], sh[4], mask_set_names[set]);
        free(merged);
        free(then);
        free_qkv(qkv);
        for (int i = 0; i < N_OWNED; i++)
            hl_tensor_free(owned[i]);
    }
}
END_TEST

/* A fully masked query row gives exactly zeros and passes exactly zero
 * gradient: batch 1's keys are all padding, and in batch 0 query 2 is blocked
 * from every key. */
START_TEST(test_attention_fully_masked_rows)
{
    attn_case c = {2, 2, 5, 70, 3, 0.6f, {0}};
    hl_tensor *pad = hl_tensor_new("key_padding", 2, (int[]){2, 70}, false);
    hl_tensor *blk = hl_tensor_new("blocked", 3, (int[]){2, 5, 70}, false);
    for (int s = 0; s < 70; s++)
        pad->data[70 + s] = blk->data[2 * 70 + s] = 1;
    c.masks = (hl_attention_masks){.key_padding = pad, .blocked = blk};
    hl_tensor *qkv[3];
    make_qkv(&c, 7, qkv);
    size_t n;
    hl_real *r = tu_forward_backward(build_fused, &c, qkv, 3, &n);
    const size_t half = qkv[0]->numel / 2; /* one batch element of q and of the output */
    for (size_t i = 0; i < half; i++) {
        ck_assert(r[half + i] == 0);                    /* output, batch 1 */
        ck_assert(qkv[0]->grad[half + i] == 0);         /* dq, batch 1 */
    }
    for (int h = 0; h < 2; h++)
        for (int d = 0; d < 3; d++) {
            ck_assert(r[(h * 5 + 2) * 3 + d] == 0);     /* output, batch 0, query 2 */
            ck_assert(qkv[0]->grad[(h * 5 + 2) * 3 + d] == 0);
        }
    for (size_t i = qkv[1]->numel / 2; i < qkv[1]->numel; i++)
        ck_assert(qkv[1]->grad[i] == 0 && qkv[2]->grad[i] == 0); /* dk, dv, batch 1 */
    free(r);
    free_qkv(qkv);
    hl_tensor_free(pad);
    hl_tensor_free(blk);
}
END_TEST

/* ---- gradient check, threads, memory ---- */

START_TEST(test_attention_gradients)
{
    hl_tensor *pad = hl_tensor_new("key_padding", 2, (int[]){2, 7}, false);
    pad->data[3] = 1;
    for (int s = 0; s < 7; s++)
        pad->data[7 + s] = 1; /* batch 1 fully padded: zero output, zero gradient */
    hl_tensor *blk = random_bits("blocked", 2, (int[]){3, 4}, 1, 0.3);
    hl_tensor *add = random_bias(3, (int[]){1, 3, 4}, 2, 0.2);
    for (int s = 0; s < 4; s++)
        blk->data[s] = 0; /* keep query 0 partly visible */
    attn_case cases[] = {
        {2, 2, 5, 7, 3, 0.577f, {.causal = true, .key_padding = pad}},
        {1, 2, 3, 4, 17, 0.25f, {.blocked = blk, .additive = add}},
        {1, 1, 70, 130, 3, 0.9f, {.causal = true}}, /* across tiles: T, S > 64 */
        {1, 1, 67, 66, 2, 0.9f, {0}},
        {2, 1, 1, 1, 5, 0.45f, {0}},
        {1, 1, 257, 260, 2, 0.9f, {.causal = true}}, /* online softmax: T·S > 256² */
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        hl_tensor *qkv[3];
        make_qkv(&cases[i], 40 + 3 * (uint64_t)i, qkv);
        char what[64];
        snprintf(what, sizeof what, "attention case %d", i);
        tu_gradcheck(what, build_fused, &cases[i], qkv, 3);
        free_qkv(qkv);
    }
    hl_tensor_free(pad);
    hl_tensor_free(blk);
    hl_tensor_free(add);
}
END_TEST

START_TEST(test_attention_threads)
{
    attn_case c = {2, 4, 130, 150, 32, 0.18f, {0}};
    /* Large enough that forward and backward really run on 2 threads. */
    ck_assert((double)c.B * c.H * c.T * c.S * c.D >= HL_PARALLEL_MIN_WORK);
    hl_tensor *owned[3] = {NULL, NULL, NULL};
    make_masks(&c, 7, 50, owned);
    hl_tensor *qkv[3];
    make_qkv(&c, 60, qkv);
    tu_check_threads_bitwise("attention, all masks", build_fused, &c, qkv, 3);
    c.masks = (hl_attention_masks){0};
    tu_check_threads_bitwise("attention, no mask", build_fused, &c, qkv, 3);
    free_qkv(qkv);
    /* The online softmax, past 256×256 scores a head. */
    attn_case online = {1, 2, 300, 260, 8, 0.18f, {.causal = true}};
    make_qkv(&online, 61, qkv);
    tu_check_threads_bitwise("attention, online softmax", build_fused, &online, qkv, 3);
    free_qkv(qkv);
    for (int i = 0; i < 3; i++)
        hl_tensor_free(owned[i]);
}
END_TEST

/* One head on 2 threads: backward by (head, key group) pairs, each group's
 * part of dq added in afterwards (2·heads <= threads), against the groups one
 * after another on 1 thread. */
START_TEST(test_attention_one_head_by_groups)
{
    hl_tensor *owned[3] = {NULL, NULL, NULL}, *qkv[3];
    attn_case rows = {1, 1, 130, 150, 32, 0.18f, {0}};
    make_masks(&rows, 7, 52, owned);
    make_qkv(&rows, 62, qkv);
    tu_check_threads_bitwise("attention, one head, all masks", build_fused, &rows, qkv, 3);
    free_qkv(qkv);
    const attn_case online[] = {{1, 1, 300, 260, 8, 0.18f, {.causal = true}},
                                {1, 1, 260, 300, 16, 0.18f, {0}}};
    for (int i = 0; i < 2; i++) {
        make_qkv(&online[i], 63 + i, qkv);
        tu_check_threads_bitwise(i ? "attention, one head, online" :
                                     "attention, one head, online, causal",
                                 build_fused, (void *)&online[i], qkv, 3);
        free_qkv(qkv);
    }
    for (int i = 0; i < 3; i++)
        hl_tensor_free(owned[i]);
}
END_TEST

/* ctx: an attn_case; in[0] is q, k and v at once. */
static hl_tensor *build_self(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const attn_case *c = ctx;
    return hl_attention(g, in[0], in[0], in[0], c->scale, &c->masks);
}

/* q, k and v one tensor (hl_attention(x, x, x)): the gradients of the three
 * add into one buffer, which key groups on several threads raced on (lost
 * updates, another result each run). Backward then takes one thread a head:
 * the bits of 1 thread at 8, run after run, and the composed ops' result. */
START_TEST(test_attention_same_tensor_thrice)
{
    attn_case c = {1, 1, 700, 700, 16, 0.25f, {0}};
    hl_tensor *x = tu_random("x", 4, (int[]){1, 1, 700, 16}, true, 70, -1, 1);
    size_t n, m;
    hl_real *composed = tu_forward_backward(
        build_composed, &c, (hl_tensor *const[]){x, x, x}, 3, &n);
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    hl_real *one = tu_forward_backward(build_self, &c, &x, 1, &n);
    tu_assert_close("x, x, x against the composed ops", one, composed, n, 1e-4);
#ifdef _OPENMP
    omp_set_num_threads(8);
    for (int run = 0; run < 4; run++) {
        hl_real *eight = tu_forward_backward(build_self, &c, &x, 1, &m);
        ck_assert_msg(m == n && !memcmp(one, eight, n * sizeof *one),
                      "x, x, x: 8 threads, run %d, differ from 1", run);
        free(eight);
    }
    omp_set_num_threads(saved);
#endif
    free(one);
    free(composed);
    hl_tensor_free(x);
}
END_TEST

/* Forward and backward keep O(T) per head in the arena, never the (T,S)
 * scores, past 256×256 scores a head; without grad mode nothing is recorded
 * and the output is the same. */
START_TEST(test_attention_memory)
{
    attn_case c = {1, 2, 512, 512, 16, 0.25f, {.causal = true}};
    hl_tensor *qkv[3];
    make_qkv(&c, 70, qkv);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = build_fused(g, qkv, &c);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq((int)g->n_nodes, 1);
    const size_t rows = (size_t)c.B * c.H * c.T, scores = rows * c.S * sizeof(hl_real);
    ck_assert_int_eq(hl_graph_backward_from(g, y, qkv[0]->data), HL_OK);
    /* output and its gradient, a log-sum-exp and a D per row, a little more;
     * forward's transposed keys, as many as k (S a whole number of 64-key
     * tiles here); in forward and in backward each thread's tiles: two of
     * 64×64 scores and the transposed key and value tiles (D×64), whatever T
     * and S; and the parts of dq summed apart, T×D each: one a thread, or at
     * most 7 a head (a head's key tiles in at most 8 groups) */
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    const size_t tiles = 2 * (size_t)threads * (2 * 64 * 64 + 2 * (size_t)c.D * 64);
    const size_t part = (size_t)c.T * c.D, heads = (size_t)c.B * c.H;
    const size_t dq_parts = threads * part > 7 * heads * part ? threads * part : 7 * heads * part;
    const size_t bound = (2 * y->numel + qkv[1]->numel) * sizeof(hl_real) +
                         2 * rows * sizeof(double) + (tiles + dq_parts) * sizeof(hl_real) + 4096;
    ck_assert_msg(g->arena.used <= bound, "arena %zu bytes, bound %zu (scores: %zu)",
                  g->arena.used, bound, scores);
    hl_graph *eval = hl_graph_new(0);
    hl_graph_set_grad_enabled(eval, false);
    hl_tensor *y2 = build_fused(eval, qkv, &c);
    ck_assert_int_eq((int)eval->n_nodes, 0);
    ck_assert(memcmp(y->data, y2->data, y->numel * sizeof *y->data) == 0);
    hl_graph_free(eval);
    hl_graph_free(g);
    free_qkv(qkv);
}
END_TEST

/* Whole rows: training keeps the (B,H,T,S) probabilities, evaluation only a
 * query tile's rows per thread, and both give the same output bits. */
START_TEST(test_attention_whole_rows_eval_same)
{
    attn_case c = {4, 4, 100, 200, 16, 0.25f, {.causal = true}};
    hl_tensor *qkv[3];
    make_qkv(&c, 71, qkv);
    hl_graph *g = hl_graph_new(0), *eval = hl_graph_new(0);
    hl_graph_set_grad_enabled(eval, false);
    hl_tensor *y = build_fused(g, qkv, &c), *y2 = build_fused(eval, qkv, &c);
    ck_assert(!hl_graph_failed(g) && !hl_graph_failed(eval));
    const size_t probs = (size_t)c.B * c.H * c.T * c.S * sizeof(hl_real);
    ck_assert_uint_ge(g->arena.used, probs);
    /* the transposed keys (each head's S rounded up to whole 64-key tiles),
     * each thread's tiles and one query tile's rows of probabilities: at 16
     * threads more than this small case's whole probabilities, so the bound
     * counts threads rather than comparing with probs */
    size_t threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    const size_t per_thread = 2 * 64 * 64 + 2 * (size_t)c.D * 64 + 64 * (size_t)c.S;
    const size_t keys_t = (size_t)c.B * c.H * ((c.S + 63) / 64 * 64) * c.D;
    const size_t bound = (y->numel + keys_t + threads * per_thread) * sizeof(hl_real) + 4096;
    ck_assert_msg(eval->arena.used <= bound, "evaluation's arena %zu bytes, bound %zu at %zu "
                  "threads (probabilities: %zu)", eval->arena.used, bound, threads, probs);
    ck_assert(memcmp(y->data, y2->data, y->numel * sizeof *y->data) == 0);
    hl_graph_free(eval);
    hl_graph_free(g);
    free_qkv(qkv);
}
END_TEST

/* ---- errors ---- */

/* One NaN in q, k, v or the additive mask reaches the output on the fused
 * path where it reaches it on the composed one (the rows that see it), and
 * leaves the other rows equal to the composed ones: one tile (T 3) and
 * several (T 130). */
START_TEST(test_attention_nan_reaches_output)
{
    static const int sizes[] = {3, 130};
    for (int si = 0; si < 2; si++)
        for (int where = 0; where < 4; where++) {
            const int T = sizes[si];
            hl_tensor *bias = hl_tensor_new("bias", 2, (int[]){T, T}, false);
            attn_case c = {.B = 1, .H = 1, .T = T, .S = T, .D = 16, .scale = (hl_real)0.25,
                           .masks = {.causal = where == 3, .additive = bias}};
            hl_tensor *qkv[3];
            make_qkv(&c, 900 + (uint64_t)where, qkv);
            /* q row 1, k row 1, v row 1, or the bias entry (1, 1) */
            if (where < 3)
                qkv[where]->data[1 * c.D + 2] = NAN;
            else
                bias->data[1 * T + 1] = NAN;
            hl_graph *g = hl_graph_new(0);
            hl_tensor *fused = hl_attention(g, qkv[0], qkv[1], qkv[2], c.scale, &c.masks);
            hl_tensor *composed = build_composed(g, qkv, &c);
            ck_assert(!hl_graph_failed(g));
            int nans = 0;
            for (int t = 0; t < T; t++) {
                const hl_real *f = fused->data + (size_t)t * c.D, *k = composed->data + (size_t)t * c.D;
                for (int d = 0; d < c.D; d++)
                    ck_assert_msg(isnan((double)k[d]) ? (nans++, isnan((double)f[d]))
                                                      : fabs((double)f[d] - (double)k[d]) < 1e-5,
                                  "T %d, NaN in %s: row %d dim %d: fused %g, composed %g", T,
                                  (const char *[]){"q", "k", "v", "additive"}[where], t, d,
                                  (double)f[d], (double)k[d]);
            }
            /* The NaN reached the output: q's row 1, k's every row that sees
             * key 1, v's one column of those rows, the bias's row 1. */
            ck_assert_int_ge(nans, 1);
            hl_graph_free(g);
            free_qkv(qkv);
            hl_tensor_free(bias);
        }
}
END_TEST

/* Packed documents: the gradient of the fused op with causal and document
 * masks against central differences, and each document's output the same as
 * attending over that document alone (to rounding). */
START_TEST(test_attention_documents)
{
    attn_case c = {2, 2, 9, 9, 3, 0.7f, {0}};
    hl_tensor *owned[N_OWNED] = {NULL};
    make_masks(&c, 10, 77, owned);
    hl_tensor_free(owned[0]); /* documents and causal only */
    owned[0] = NULL;
    c.masks.key_padding = NULL;
    hl_tensor *qkv[3];
    make_qkv(&c, 78, qkv);
    tu_gradcheck("attention (documents)", build_fused, &c, qkv, 3);
    /* Batch 0 alone, document by document, against the whole (B,H,T,D). */
    hl_graph *g = hl_graph_new(0);
    hl_tensor *all = hl_attention(g, qkv[0], qkv[1], qkv[2], c.scale, &c.masks);
    const hl_real *ids = owned[3]->data;
    for (int s0 = 0; s0 < c.T;) {
        int s1 = s0 + 1;
        while (s1 < c.T && ids[s1] == ids[s0])
            s1++;
        for (int h = 0; h < c.H; h++) {
            /* q, k, v of this head and document: (1,1,len,D). */
            const int len = s1 - s0;
            hl_tensor *part[3];
            for (int i = 0; i < 3; i++) {
                part[i] = hl_tensor_new("part", 4, (int[]){1, 1, len, c.D}, false);
                memcpy(part[i]->data, qkv[i]->data + ((size_t)h * c.T + s0) * c.D,
                       (size_t)len * c.D * sizeof(hl_real));
            }
            hl_attention_masks causal = {.causal = true};
            hl_tensor *one = hl_attention(g, part[0], part[1], part[2], c.scale, &causal);
            for (int i = 0; i < len * c.D; i++)
                ck_assert(fabs((double)one->data[i] -
                               (double)all->data[((size_t)h * c.T + s0) * c.D + i]) <= 1e-6);
            for (int i = 0; i < 3; i++)
                hl_tensor_free(part[i]);
        }
        s0 = s1;
    }
    hl_graph_free(g);
    free_qkv(qkv);
    for (int i = 0; i < N_OWNED; i++)
        hl_tensor_free(owned[i]);
}
END_TEST

START_TEST(test_attention_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *q = hl_tensor_new("q", 4, (int[]){2, 3, 5, 4}, true);
    hl_tensor *k = hl_tensor_new("k", 4, (int[]){2, 3, 7, 4}, true);
    hl_tensor *v = hl_tensor_new("v", 4, (int[]){2, 3, 7, 4}, true);
    hl_tensor *q3 = hl_tensor_new("q", 3, (int[]){2, 5, 4}, true);
    hl_tensor *v6 = hl_tensor_new("v", 4, (int[]){2, 3, 6, 4}, true);
    hl_tensor *kb = hl_tensor_new("k", 4, (int[]){1, 3, 7, 4}, true);
    hl_tensor *kd = hl_tensor_new("k", 4, (int[]){2, 3, 7, 5}, true);
    hl_tensor *vd = hl_tensor_new("v", 4, (int[]){2, 3, 7, 5}, true);
    hl_tensor *pad = hl_tensor_new("pad", 2, (int[]){2, 5}, false);
    hl_tensor *blk = hl_tensor_new("blk", 3, (int[]){3, 5, 7}, false);
    hl_tensor *add = hl_tensor_new("add", 2, (int[]){5, 8}, false);
    hl_tensor *docs = hl_tensor_new("docs", 2, (int[]){2, 6}, false);
    hl_tensor *k3 = hl_tensor_new("k", 4, (int[]){2, 3, 3, 4}, true);
    hl_tensor *docs3 = hl_tensor_new("docs", 2, (int[]){2, 3}, false);
    tu_expect_error(g, hl_attention(g, q3, k, v, 1, NULL), "attention", "(2,5,4)", "rank 4",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_attention(g, q, k, v6, 1, NULL), "attention", "(2,3,7,4)", "(2,3,6,4)",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_attention(g, q, kb, kb, 1, NULL), "attention", "(2,3,5,4)",
                    "(1,3,7,4)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_attention(g, q, kd, vd, 1, NULL), "attention", "(2,3,7,5)",
                    "disagree", NULL);
    hl_graph_reset(g);
    hl_attention_masks m = {.key_padding = pad};
    tu_expect_error(g, hl_attention(g, q, k, v, 1, &m), "attention", "key_padding", "(2,5)",
                    "(B,S)", NULL);
    hl_graph_reset(g);
    m = (hl_attention_masks){.blocked = blk};
    tu_expect_error(g, hl_attention(g, q, k, v, 1, &m), "attention", "blocked", "(3,5,7)",
                    "(2,5,7)", NULL);
    hl_graph_reset(g);
    m = (hl_attention_masks){.additive = add};
    tu_expect_error(g, hl_attention(g, q, k, v, 1, &m), "attention", "additive", "(5,8)",
                    "(T,S) or (B,T,S)", NULL);
    hl_graph_reset(g);
    hl_graph *other = hl_graph_new(0);
    m = (hl_attention_masks){.additive = &other->poison};
    tu_expect_error(g, hl_attention(g, q, k, v, 1, &m), "attention", "additive", "poisoned",
                    NULL);
    hl_graph_reset(g);
    m = (hl_attention_masks){.doc_ids = docs};
    tu_expect_error(g, hl_attention(g, q, k, v, 1, &m), "attention", "doc_ids", "(2,6)",
                    "(B,S)", NULL);
    hl_graph_reset(g);
    m = (hl_attention_masks){.doc_ids = docs3};
    tu_expect_error(g, hl_attention(g, q, k3, k3, 1, &m), "attention", "doc_ids",
                    "T 5 > S 3", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_attention(g, q, NULL, v, 1, NULL), "attention", "NULL", NULL);
    hl_graph_free(other);
    hl_graph_free(g);
    hl_tensor *all[] = {q, k, v, q3, v6, kb, kd, vd, pad, blk, add, docs, k3, docs3};
    for (int i = 0; i < (int)(sizeof all / sizeof all[0]); i++)
        hl_tensor_free(all[i]);
}
END_TEST

Suite *attention_suite(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_attention_matches_composed, 0, N_SHAPES);
    tcase_add_loop_test(tc, test_attention_merged_same_bits, 0, N_SHAPES);
    tcase_add_test(tc, test_attention_fully_masked_rows);
    tcase_add_test(tc, test_attention_gradients);
    tcase_add_test(tc, test_attention_threads);
    tcase_add_test(tc, test_attention_one_head_by_groups);
    tcase_add_test(tc, test_attention_same_tensor_thrice);
    tcase_add_test(tc, test_attention_memory);
    tcase_add_test(tc, test_attention_whole_rows_eval_same);
    tcase_add_test(tc, test_attention_nan_reaches_output);
    tcase_add_test(tc, test_attention_documents);
    tcase_add_test(tc, test_attention_errors);
    suite_add_tcase(s, tc);
    return s;
}
