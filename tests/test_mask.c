/* Tests for ops/mask.c: causal, key-padding, blocked and additive masks. */
#include <math.h>
#include <stdlib.h>

#include "tests/testutil.h"
#include "ops/internal.h"

/* Which mask to apply, and its mask tensor (NULL for causal). */
typedef struct mask_case {
    hl_op op;
    const hl_tensor *mask;
} mask_case;

static hl_tensor *apply_mask(hl_graph *g, hl_tensor *x, const mask_case *c)
{
    switch (c->op) {
    case HL_OP_MASK_CAUSAL:
        return hl_mask_causal(g, x);
    case HL_OP_MASK_KEY_PADDING:
        return hl_mask_key_padding(g, x, c->mask);
    case HL_OP_MASK_BLOCKED:
        return hl_mask_blocked(g, x, c->mask);
    default:
        return hl_mask_additive(g, x, c->mask);
    }
}

static hl_tensor *build_mask(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return apply_mask(g, in[0], ctx);
}

/* Gradient checks go through a softmax: the raw mask output holds -inf, and a
 * loss Σ w·y that contains -inf has no finite differences. */
static hl_tensor *build_mask_softmax(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_softmax(g, apply_mask(g, in[0], ctx));
}

/* A mask of zeros with about a fraction p of nonzero entries (1 or -2: any
 * nonzero value blocks). */
static hl_tensor *random_mask(int rank, const int *shape, uint64_t seed, double p)
{
    hl_tensor *m = tu_random("mask", rank, shape, false, seed, 0, 1);
    for (size_t i = 0; i < m->numel; i++)
        m->data[i] = m->data[i] < p ? (i % 2 ? 1 : -2) : 0;
    return m;
}

/* A bias with finite values and, with probability p, -inf entries. */
static hl_tensor *random_bias(int rank, const int *shape, uint64_t seed, double p)
{
    hl_tensor *m = tu_random("bias", rank, shape, false, seed, -1, 1);
    for (size_t i = 0; i < m->numel; i++)
        if (fabs((double)m->data[i]) < p)
            m->data[i] = -INFINITY;
    return m;
}

/* The reference: loops over (b, h, t, s) of scores (B,H,T,S) or (B,T,S). */
static void naive_mask(const mask_case *c, const hl_tensor *x, hl_real *y)
{
    const int rank = x->rank, B = x->shape[0], H = rank == 4 ? x->shape[1] : 1;
    const int T = x->shape[rank - 2], S = x->shape[rank - 1];
    const hl_tensor *m = c->mask;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int s = 0; s < S; s++) {
                    size_t i = (((size_t)b * H + h) * T + t) * S + s;
                    size_t mi = m && m->rank == 3 ? ((size_t)b * T + t) * S + s
                                                  : (size_t)t * S + s;
                    hl_real v = x->data[i];
                    switch (c->op) {
                    case HL_OP_MASK_CAUSAL:
                        y[i] = s > t ? -INFINITY : v;
                        break;
                    case HL_OP_MASK_KEY_PADDING:
                        y[i] = m->data[(size_t)b * S + s] != 0 ? -INFINITY : v;
                        break;
                    case HL_OP_MASK_BLOCKED:
                        y[i] = m->data[mi] != 0 ? -INFINITY : v;
                        break;
                    default:
                        y[i] = v + m->data[mi];
                        break;
                    }
                }
}

static void assert_mask_forward(const mask_case *c, const hl_tensor *x)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = apply_mask(g, (hl_tensor *)x, c);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    ck_assert(hl_tensor_same_shape(x, y));
    hl_real *want = malloc(x->numel * sizeof *want);
    naive_mask(c, x, want);
    size_t n_masked = 0;
    for (size_t i = 0; i < x->numel; i++) {
        ck_assert_msg(y->data[i] == want[i], "%s: element %zu: %g vs %g",
                      hl_op_get(c->op)->name, i, (double)y->data[i], (double)want[i]);
        n_masked += want[i] == -INFINITY;
    }
    /* The case must exercise both kinds of entries. */
    ck_assert_uint_gt(n_masked, 0);
    ck_assert_uint_lt(n_masked, x->numel);
    free(want);
    hl_graph_free(g);
}

START_TEST(test_mask_forward)
{
    hl_tensor *x4 = tu_random("scores", 4, (int[]){2, 3, 4, 6}, false, 1, -2, 2);
    hl_tensor *x3 = tu_random("scores", 3, (int[]){2, 5, 3}, false, 2, -2, 2);
    hl_tensor *pad4 = random_mask(2, (int[]){2, 6}, 3, 0.4);
    hl_tensor *pad3 = random_mask(2, (int[]){2, 3}, 4, 0.4);
    hl_tensor *blk4 = random_mask(2, (int[]){4, 6}, 5, 0.3);
    hl_tensor *blk4b = random_mask(3, (int[]){2, 4, 6}, 6, 0.3);
    hl_tensor *blk3b = random_mask(3, (int[]){2, 5, 3}, 7, 0.3);
    hl_tensor *bias4 = random_bias(2, (int[]){4, 6}, 8, 0.3);
    hl_tensor *bias3b = random_bias(3, (int[]){2, 5, 3}, 9, 0.3);
    const mask_case c4[] = {{HL_OP_MASK_CAUSAL, NULL},   {HL_OP_MASK_KEY_PADDING, pad4},
                            {HL_OP_MASK_BLOCKED, blk4},  {HL_OP_MASK_BLOCKED, blk4b},
                            {HL_OP_MASK_ADDITIVE, bias4}};
    const mask_case c3[] = {{HL_OP_MASK_CAUSAL, NULL},
                            {HL_OP_MASK_KEY_PADDING, pad3},
                            {HL_OP_MASK_BLOCKED, blk3b},
                            {HL_OP_MASK_ADDITIVE, bias3b}};
    for (int k = 0; k < 5; k++)
        assert_mask_forward(&c4[k], x4);
    for (int k = 0; k < 4; k++)
        assert_mask_forward(&c3[k], x3);

    /* By hand: causal with T=2 < S=3 is triu(ones(2,3), 1). */
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("scores", 3, (int[]){1, 2, 3}, false, 10, -1, 1);
    hl_tensor *y = hl_mask_causal(g, x);
    const int blocked[6] = {0, 1, 1, 0, 0, 1};
    for (int i = 0; i < 6; i++)
        ck_assert(y->data[i] == (blocked[i] ? -INFINITY : x->data[i]));
    ck_assert_ptr_ne(y->data, x->data); /* a copy */
    hl_graph_free(g);

    hl_tensor *ts[] = {x4, x3, pad4, pad3, blk4, blk4b, blk3b, bias4, bias3b, x};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        hl_tensor_free(ts[i]);
}
END_TEST

/* The backward adds dy where an entry was kept and nothing where it was masked.
 * (A softmax after the mask would hide a leak: its gradient is 0 there.) */
static void assert_mask_backward(const mask_case *c, hl_tensor *x)
{
    hl_graph *g = hl_graph_new(0);
    hl_real *want = malloc(x->numel * sizeof *want);
    hl_real *dy = malloc(x->numel * sizeof *dy);
    naive_mask(c, x, want);
    for (size_t i = 0; i < x->numel; i++) {
        dy[i] = (hl_real)(0.25 * (double)(i % 9) - 1);
        x->grad[i] = 0.5f;
    }
    hl_tensor *y = apply_mask(g, x, c);
    ck_assert_int_eq(hl_graph_backward_from(g, y, dy), HL_OK);
    for (size_t i = 0; i < x->numel; i++) {
        hl_real expect = want[i] == -INFINITY ? 0.5f : 0.5f + dy[i];
        ck_assert_msg(x->grad[i] == expect, "%s backward: element %zu: %g vs %g",
                      hl_op_get(c->op)->name, i, (double)x->grad[i], (double)expect);
    }
    free(want);
    free(dy);
    hl_graph_free(g);
}

START_TEST(test_mask_backward)
{
    hl_tensor *x4 = tu_random("scores", 4, (int[]){2, 3, 4, 6}, true, 11, -2, 2);
    hl_tensor *x3 = tu_random("scores", 3, (int[]){3, 5, 2}, true, 12, -2, 2);
    hl_tensor *pad = random_mask(2, (int[]){2, 6}, 13, 0.4);
    hl_tensor *blk = random_mask(3, (int[]){3, 5, 2}, 14, 0.3);
    hl_tensor *bias = random_bias(2, (int[]){4, 6}, 15, 0.3);
    assert_mask_backward(&(mask_case){HL_OP_MASK_CAUSAL, NULL}, x4);
    assert_mask_backward(&(mask_case){HL_OP_MASK_CAUSAL, NULL}, x3);
    assert_mask_backward(&(mask_case){HL_OP_MASK_KEY_PADDING, pad}, x4);
    assert_mask_backward(&(mask_case){HL_OP_MASK_BLOCKED, blk}, x3);
    assert_mask_backward(&(mask_case){HL_OP_MASK_ADDITIVE, bias}, x4);
    hl_tensor *ts[] = {x4, x3, pad, blk, bias};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        hl_tensor_free(ts[i]);
}
END_TEST

START_TEST(test_mask_causal_gradients)
{
    mask_case c = {HL_OP_MASK_CAUSAL, NULL};
    static const int shapes[][4] = {{2, 3, 4, 7}, {1, 1, 5, 3}, {3, 1, 1, 1}};
    static const int ranks[] = {4, 4, 3};
    for (int k = 0; k < 3; k++) {
        hl_tensor *x = tu_random("scores", ranks[k], shapes[k], true, 20 + (uint64_t)k, -2, 2);
        tu_gradcheck("mask_causal+softmax", build_mask_softmax, &c, &x, 1);
        hl_tensor_free(x);
    }
}
END_TEST

START_TEST(test_mask_key_padding_gradients)
{
    /* Batch element 1 pads every key: its softmax rows are zeros and its scores
     * get exactly zero gradient. The others pad some keys. */
    hl_tensor *pad = hl_tensor_new("key_is_padding", 2, (int[]){3, 7}, false);
    const int padded[3][7] = {{0, 0, 1, 0, 0, 0, 1}, {1, 1, 1, 1, 1, 1, 1},
                              {0, 0, 0, 0, 0, 1, 1}};
    for (int i = 0; i < 21; i++)
        pad->data[i] = (hl_real)padded[i / 7][i % 7];
    mask_case c = {HL_OP_MASK_KEY_PADDING, pad};
    hl_tensor *x = tu_random("scores", 4, (int[]){3, 2, 5, 7}, true, 30, -2, 2);
    tu_gradcheck("mask_key_padding+softmax", build_mask_softmax, &c, &x, 1);
    const size_t per_batch = 2 * 5 * 7;
    for (size_t i = per_batch; i < 2 * per_batch; i++)
        ck_assert_msg(x->grad[i] == 0, "fully padded batch: gradient %g at %zu",
                      (double)x->grad[i], i);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *p = build_mask_softmax(g, &x, &c);
    ck_assert(!hl_graph_failed(g));
    for (size_t i = 0; i < x->numel; i++) {
        int b = (int)(i / per_batch), s = (int)(i % 7);
        if (b == 1 || padded[b][s])
            ck_assert_msg(p->data[i] == 0, "padded probability %g at %zu", (double)p->data[i],
                          i);
        else
            ck_assert(p->data[i] > 0);
    }
    hl_graph_free(g);

    hl_tensor *x3 = tu_random("scores", 3, (int[]){3, 1, 7}, true, 31, -2, 2);
    tu_gradcheck("mask_key_padding+softmax", build_mask_softmax, &c, &x3, 1);
    hl_tensor_free(x3);
    hl_tensor_free(x);
    hl_tensor_free(pad);
}
END_TEST

START_TEST(test_mask_blocked_gradients)
{
    hl_tensor *shared = random_mask(2, (int[]){5, 3}, 40, 0.3);
    hl_tensor *x4 = tu_random("scores", 4, (int[]){2, 3, 5, 3}, true, 41, -2, 2);
    tu_gradcheck("mask_blocked(T,S)+softmax", build_mask_softmax,
                 &(mask_case){HL_OP_MASK_BLOCKED, shared}, &x4, 1);
    hl_tensor *per_batch = random_mask(3, (int[]){2, 5, 3}, 42, 0.3);
    tu_gradcheck("mask_blocked(B,T,S)+softmax", build_mask_softmax,
                 &(mask_case){HL_OP_MASK_BLOCKED, per_batch}, &x4, 1);
    hl_tensor *x3 = tu_random("scores", 3, (int[]){2, 5, 3}, true, 43, -2, 2);
    tu_gradcheck("mask_blocked(B,T,S)+softmax", build_mask_softmax,
                 &(mask_case){HL_OP_MASK_BLOCKED, per_batch}, &x3, 1);
    tu_gradcheck("mask_blocked(T,S)+softmax", build_mask_softmax,
                 &(mask_case){HL_OP_MASK_BLOCKED, shared}, &x3, 1);
    hl_tensor *ts[] = {shared, x4, per_batch, x3};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        hl_tensor_free(ts[i]);
}
END_TEST

START_TEST(test_mask_additive_gradients)
{
    /* A finite bias has no -inf, so the raw mask can be checked too. */
    hl_tensor *finite = random_bias(2, (int[]){4, 5}, 50, 0);
    hl_tensor *x4 = tu_random("scores", 4, (int[]){3, 1, 4, 5}, true, 51, -2, 2);
    mask_case cf = {HL_OP_MASK_ADDITIVE, finite};
    tu_gradcheck("mask_additive", build_mask, &cf, &x4, 1);
    tu_gradcheck("mask_additive+softmax", build_mask_softmax, &cf, &x4, 1);
    hl_tensor *with_inf = random_bias(3, (int[]){3, 4, 5}, 52, 0.3);
    tu_gradcheck("mask_additive(-inf)+softmax", build_mask_softmax,
                 &(mask_case){HL_OP_MASK_ADDITIVE, with_inf}, &x4, 1);
    hl_tensor *x3 = tu_random("scores", 3, (int[]){3, 4, 5}, true, 53, -2, 2);
    tu_gradcheck("mask_additive(-inf)+softmax", build_mask_softmax,
                 &(mask_case){HL_OP_MASK_ADDITIVE, with_inf}, &x3, 1);
    hl_tensor *ts[] = {finite, x4, with_inf, x3};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        hl_tensor_free(ts[i]);
}
END_TEST

START_TEST(test_mask_without_grad)
{
    /* Nothing is recorded when no gradient is wanted, and the values are the same. */
    hl_tensor *x = tu_random("scores", 3, (int[]){2, 3, 4}, true, 60, -1, 1);
    hl_graph *g = hl_graph_new(0);
    hl_graph_set_grad_enabled(g, false);
    hl_tensor *y = hl_mask_causal(g, x);
    ck_assert(!hl_graph_failed(g));
    ck_assert_uint_eq(g->n_nodes, 0);
    ck_assert(!y->requires_grad);
    hl_real *want = malloc(x->numel * sizeof *want);
    naive_mask(&(mask_case){HL_OP_MASK_CAUSAL, NULL}, x, want);
    for (size_t i = 0; i < x->numel; i++)
        ck_assert(y->data[i] == want[i]);
    free(want);
    hl_graph_free(g);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_mask_threads)
{
    const int shape[] = {4, 8, 64, 64};
    hl_tensor *x = tu_random("scores", 4, shape, true, 70, -3, 3);
    hl_tensor *pad = random_mask(2, (int[]){4, 64}, 71, 0.3);
    hl_tensor *blk = random_mask(3, (int[]){4, 64, 64}, 72, 0.3);
    hl_tensor *bias = random_bias(2, (int[]){64, 64}, 73, 0.2);
    const mask_case cases[] = {{HL_OP_MASK_CAUSAL, NULL},
                               {HL_OP_MASK_KEY_PADDING, pad},
                               {HL_OP_MASK_BLOCKED, blk},
                               {HL_OP_MASK_ADDITIVE, bias}};
    for (int k = 0; k < 4; k++) {
        tu_check_threads_bitwise(hl_op_get(cases[k].op)->name, build_mask, (void *)&cases[k], &x,
                                 1);
        tu_check_threads_bitwise("mask+softmax", build_mask_softmax, (void *)&cases[k], &x, 1);
    }
    hl_tensor *ts[] = {x, pad, blk, bias};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        hl_tensor_free(ts[i]);
}
END_TEST

/* Document ids: every entry against the rule (kept where query t's document,
 * the id at key position t, is key s's) on (B,H,T,S) and (B,T,S) scores with
 * T < S (the gradient: gradcheck's mask_documents+softmax); and the errors. */
START_TEST(test_mask_documents)
{
    hl_tensor *ids = hl_tensor_new("doc_ids", 2, (int[]){2, 7}, false);
    static const hl_real values[14] = {0, 0, 1, 1, 1, 2, 2, 5, 5, 5, 5, 5, 5, 9};
    memcpy(ids->data, values, sizeof values);
    for (int rank = 3; rank <= 4; rank++) {
        hl_tensor *x = rank == 4 ? tu_random("scores", 4, (int[]){2, 3, 5, 7}, true, 90, -1, 1)
                                 : tu_random("scores", 3, (int[]){2, 5, 7}, true, 91, -1, 1);
        hl_graph *g = hl_graph_new(0);
        hl_tensor *y = hl_mask_documents(g, x, ids);
        ck_assert(!hl_graph_failed(g));
        const int H = rank == 4 ? 3 : 1;
        for (size_t r = 0; r < x->numel / 7; r++) {
            const int b = (int)(r / (5 * (size_t)H)), t = (int)(r % 5);
            for (int k = 0; k < 7; k++) {
                const bool keep = values[b * 7 + k] == values[b * 7 + t];
                const size_t i = r * 7 + k;
                ck_assert(keep ? y->data[i] == x->data[i] : y->data[i] == -INFINITY);
            }
        }
        hl_tensor_free(x);
        hl_graph_free(g);
    }
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("scores", 4, (int[]){2, 3, 5, 7}, false, 92, -1, 1);
    hl_tensor *wide = tu_random("scores", 4, (int[]){2, 3, 8, 7}, false, 93, -1, 1);
    hl_tensor *bad = hl_tensor_new("doc_ids", 2, (int[]){2, 6}, false);
    tu_expect_error(g, hl_mask_documents(g, x, bad), "mask_documents", "(2,6)", "(2,3,5,7)",
                    "(B,S)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_mask_documents(g, wide, ids), "mask_documents", "(2,7)", "(2,3,8,7)",
                    "T <= S", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_mask_documents(g, x, NULL), "mask_documents", "doc_ids", "NULL", NULL);
    hl_tensor_free(x);
    hl_tensor_free(wide);
    hl_tensor_free(bad);
    hl_tensor_free(ids);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_mask_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_graph *other = hl_graph_new(0);
    hl_tensor *x = tu_random("scores", 4, (int[]){2, 4, 3, 6}, false, 80, -1, 1);
    hl_tensor *x2 = tu_random("scores", 2, (int[]){3, 6}, false, 81, -1, 1);
    hl_tensor *x3 = tu_random("scores", 3, (int[]){2, 3, 6}, false, 82, -1, 1);
    hl_tensor *m25 = hl_tensor_new("m", 2, (int[]){2, 5}, false);
    hl_tensor *m26 = hl_tensor_new("m", 2, (int[]){2, 6}, false);
    hl_tensor *m36 = hl_tensor_new("m", 2, (int[]){3, 6}, false);
    hl_tensor *m35 = hl_tensor_new("m", 2, (int[]){3, 5}, false);
    hl_tensor *m126 = hl_tensor_new("m", 3, (int[]){1, 2, 6}, false);
    hl_tensor *m336 = hl_tensor_new("m", 3, (int[]){3, 3, 6}, false);
    hl_tensor *m136 = hl_tensor_new("m", 3, (int[]){1, 3, 6}, false);
    hl_tensor *m1136 = hl_tensor_new("m", 4, (int[]){1, 1, 3, 6}, false);
    hl_tensor *m6 = hl_tensor_new("m", 1, (int[]){6}, false);

#define EXPECT(call, ...)                              \
    do {                                               \
        tu_expect_error(g, (call), __VA_ARGS__, NULL); \
        hl_graph_reset(g);                             \
    } while (0)

    /* Scores of the wrong rank, or missing. */
    EXPECT(hl_mask_causal(g, x2), "mask_causal: scores (3,6) must have rank 3");
    EXPECT(hl_mask_causal(g, m6), "mask_causal", "(6)", "rank");
    EXPECT(hl_mask_key_padding(g, x2, m36), "mask_key_padding", "scores (3,6)", "rank");
    EXPECT(hl_mask_blocked(g, x2, m36), "mask_blocked", "scores (3,6)", "rank");
    EXPECT(hl_mask_additive(g, x2, m36), "mask_additive", "scores (3,6)", "rank");
    EXPECT(hl_mask_causal(g, NULL), "mask_causal", "NULL");
    EXPECT(hl_mask_key_padding(g, NULL, m26), "mask_key_padding", "NULL");
    EXPECT(hl_mask_blocked(g, NULL, m36), "mask_blocked", "NULL");
    EXPECT(hl_mask_additive(g, NULL, m36), "mask_additive", "NULL");
    EXPECT(hl_mask_causal(g, &other->poison), "mask_causal", "poisoned");

    /* Missing or poisoned masks. */
    EXPECT(hl_mask_key_padding(g, x, NULL), "mask_key_padding: key_is_padding is NULL");
    EXPECT(hl_mask_blocked(g, x, NULL), "mask_blocked: is_blocked is NULL");
    EXPECT(hl_mask_additive(g, x, NULL), "mask_additive: bias is NULL");
    EXPECT(hl_mask_key_padding(g, x, &other->poison), "mask_key_padding", "poisoned");
    EXPECT(hl_mask_blocked(g, x, &other->poison), "mask_blocked", "poisoned");
    EXPECT(hl_mask_additive(g, x, &other->poison), "mask_additive", "poisoned");

    /* Masks that do not match the scores. */
    EXPECT(hl_mask_key_padding(g, x, m25),
           "mask_key_padding: key_is_padding (2,5) does not match scores (2,4,3,6)");
    EXPECT(hl_mask_key_padding(g, x, m36), "key_is_padding (3,6)", "(2,4,3,6)");
    EXPECT(hl_mask_key_padding(g, x, m126), "key_is_padding (1,2,6)", "(2,4,3,6)");
    EXPECT(hl_mask_key_padding(g, x3, m25), "key_is_padding (2,5)", "scores (2,3,6)");
    EXPECT(hl_mask_blocked(g, x, m35),
           "mask_blocked: is_blocked (3,5) does not match scores (2,4,3,6)");
    EXPECT(hl_mask_blocked(g, x, m26), "is_blocked (2,6)", "(2,4,3,6)");
    EXPECT(hl_mask_blocked(g, x, m336), "is_blocked (3,3,6)", "(2,4,3,6)");
    EXPECT(hl_mask_blocked(g, x3, m136), "is_blocked (1,3,6)", "scores (2,3,6)");
    EXPECT(hl_mask_blocked(g, x, m1136), "is_blocked (1,1,3,6)", "(2,4,3,6)");
    EXPECT(hl_mask_blocked(g, x, m6), "is_blocked (6)", "(2,4,3,6)");
    EXPECT(hl_mask_additive(g, x, m35),
           "mask_additive: bias (3,5) does not match scores (2,4,3,6)");
    EXPECT(hl_mask_additive(g, x3, m336), "bias (3,3,6)", "scores (2,3,6)");
    EXPECT(hl_mask_additive(g, x, m1136), "bias (1,1,3,6)", "(2,4,3,6)");
#undef EXPECT

    /* Sticky: after an error the next mask returns the poisoned tensor too. */
    hl_mask_causal(g, x2);
    ck_assert(hl_tensor_is_poison(hl_mask_causal(g, x)));

    hl_tensor *ts[] = {x, x2, x3, m25, m26, m36, m35, m126, m336, m136, m1136, m6};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        hl_tensor_free(ts[i]);
    hl_graph_free(other);
    hl_graph_free(g);
}
END_TEST

Suite *mask_suite(void)
{
    Suite *s = suite_create("mask");
    TCase *tc = tcase_create("mask");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_mask_forward);
    tcase_add_test(tc, test_mask_backward);
    tcase_add_test(tc, test_mask_causal_gradients);
    tcase_add_test(tc, test_mask_key_padding_gradients);
    tcase_add_test(tc, test_mask_blocked_gradients);
    tcase_add_test(tc, test_mask_additive_gradients);
    tcase_add_test(tc, test_mask_without_grad);
    tcase_add_test(tc, test_mask_threads);
    tcase_add_test(tc, test_mask_errors);
    tcase_add_test(tc, test_mask_documents);
    suite_add_tcase(s, tc);
    return s;
}
