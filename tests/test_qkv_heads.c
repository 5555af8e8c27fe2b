/* Tests for ops/qkv_heads.c: the packed projection split into heads (and
 * rotated) in one op gives the same bits as hl_narrow, hl_reshape, hl_permute
 * and hl_rope (hl_rope_partial), forward and backward, whichever outputs
 * reach the loss, also with fewer key/value heads than query heads;
 * gradients against finite differences; thread independence; errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

typedef struct {
    int heads;
    hl_real base; /* 0: no rotation */
    bool fused;
    unsigned parts; /* which of q (1), k (2), v (4) reach the output */
    bool grouped;   /* fused: hl_qkv_heads_grouped with the two below */
    int kv_heads;   /* 0: heads */
    int rot;        /* rot_dims; 0: all of D */
} split;

/* The composition the op replaces: MHA's path before it. */
static void composed_heads(hl_graph *g, hl_tensor *qkv, const split *s, hl_tensor **out)
{
    const int kv = s->kv_heads ? s->kv_heads : s->heads;
    const int B = qkv->shape[0], T = qkv->shape[1], D = qkv->shape[2] / (s->heads + 2 * kv);
    const int heads[3] = {s->heads, kv, kv}, start[3] = {0, s->heads * D, (s->heads + kv) * D};
    for (int p = 0; p < 3; p++) {
        hl_tensor *part = hl_narrow(g, qkv, -1, start[p], heads[p] * D);
        hl_tensor *x = hl_reshape(g, part, 4, (int[]){B, T, heads[p], D});
        out[p] = hl_permute(g, x, (int[]){0, 2, 1, 3});
        if (s->base != 0 && p < 2)
            out[p] = s->rot ? hl_rope_partial(g, out[p], s->base, s->rot)
                            : hl_rope(g, out[p], s->base);
    }
}

/* The chosen parts, weighted apart (q + 0.5·k + 0.25·v), with the input made
 * an intermediate (as the projection's output is) by a scale. */
static hl_tensor *build_split(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const split *s = ctx;
    hl_tensor *qkv = hl_scale(g, in[0], (hl_real)1.5), *out[3];
    if (s->fused && s->grouped)
        out[0] = hl_qkv_heads_grouped(g, qkv, s->heads, s->kv_heads ? s->kv_heads : s->heads,
                                      s->base, s->rot, &out[1], &out[2]);
    else if (s->fused)
        out[0] = hl_qkv_heads(g, qkv, s->heads, s->base, &out[1], &out[2]);
    else
        composed_heads(g, qkv, s, out);
    const hl_real weight[3] = {1, 0.5, 0.25};
    /* With fewer key/value heads the parts' shapes differ: each is weighted
     * element by element and summed instead. */
    const bool shapes_differ = s->kv_heads && s->kv_heads != s->heads;
    hl_tensor *sum = NULL;
    for (int p = 0; p < 3; p++) {
        if (!(s->parts & (1u << p)))
            continue;
        hl_tensor *term = p ? hl_scale(g, out[p], weight[p]) : out[p];
        if (shapes_differ) {
            hl_tensor *w = hl_graph_tensor_uninit(g, "w", 4, out[p]->shape);
            if (!w)
                return &g->poison;
            for (size_t i = 0; i < w->numel; i++)
                w->data[i] = (hl_real)sin(0.7 * (double)i + p);
            term = hl_sum(g, hl_mul(g, term, w));
        }
        sum = sum ? hl_add(g, sum, term) : term;
    }
    return sum;
}

static void check_same_bits(int B, int T, int E, int heads, hl_real base, uint64_t seed)
{
    hl_tensor *x = tu_random("qkv", 3, (int[]){B, T, 3 * E}, true, seed, -2, 2);
    for (unsigned parts = 1; parts < 8; parts++) {
        split s = {.heads = heads, .base = base, .parts = parts};
        size_t n_fused, n_composed;
        s.fused = true;
        hl_real *fused = tu_forward_backward(build_split, &s, &x, 1, &n_fused);
        s.fused = false;
        hl_real *composed = tu_forward_backward(build_split, &s, &x, 1, &n_composed);
        ck_assert_uint_eq(n_fused, n_composed);
        ck_assert_msg(memcmp(fused, composed, n_fused * sizeof *fused) == 0,
                      "qkv_heads (%d,%d,%d) %d heads, base %g, parts %u: fused and composed "
                      "differ",
                      B, T, 3 * E, heads, (double)base, parts);
        free(fused);
        free(composed);
    }
    hl_tensor_free(x);
}

START_TEST(test_qkv_heads_equals_composition)
{
    check_same_bits(2, 5, 12, 2, 0, 1);
    check_same_bits(2, 5, 12, 2, 10000, 2);
    check_same_bits(1, 7, 6, 3, 100, 3);  /* D = 2 */
    check_same_bits(3, 1, 18, 1, 10000, 4); /* one position */
    /* Above the parallel threshold, D past one vector of every set. */
    check_same_bits(4, 64, 256, 4, 10000, 5);
}
END_TEST

/* The three outputs themselves, against the composition. */
START_TEST(test_qkv_heads_outputs)
{
    hl_tensor *x = tu_random("qkv", 3, (int[]){2, 9, 3 * 20}, false, 11, -2, 2);
    split s = {.heads = 5, .base = 500};
    hl_graph *g = hl_graph_new(0);
    hl_tensor *fused[3], *composed[3];
    fused[0] = hl_qkv_heads(g, x, s.heads, s.base, &fused[1], &fused[2]);
    composed_heads(g, x, &s, composed);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    for (int p = 0; p < 3; p++) {
        ck_assert_int_eq(fused[p]->rank, 4);
        ck_assert(hl_tensor_same_shape(fused[p], composed[p]));
        ck_assert_msg(memcmp(fused[p]->data, composed[p]->data,
                             fused[p]->numel * sizeof(hl_real)) == 0,
                      "part %d differs", p);
    }
    hl_graph_free(g);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_qkv_heads_gradients)
{
    hl_tensor *x = tu_random("qkv", 3, (int[]){2, 5, 12}, true, 21, -2, 2);
    for (unsigned parts = 1; parts < 8; parts++)
        for (int rope = 0; rope <= 1; rope++) {
            split s = {.heads = 2, .base = rope ? 10000 : 0, .fused = true, .parts = parts};
            tu_gradcheck("qkv_heads", build_split, &s, &x, 1);
        }
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_qkv_heads_threads)
{
    hl_tensor *x = tu_random("qkv", 3, (int[]){3, 100, 3 * 96}, true, 31, -2, 2);
    tu_check_threads_bitwise("qkv_heads", build_split,
                             &(split){.heads = 4, .base = 10000, .fused = true, .parts = 7}, &x,
                             1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_qkv_heads_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("qkv", 3, (int[]){2, 3, 18}, false, 41, -1, 1);
    hl_tensor *flat = tu_random("qkv", 2, (int[]){3, 18}, false, 42, -1, 1);
    hl_tensor *k = NULL, *v = NULL;
    tu_expect_error(g, hl_qkv_heads(g, x, 4, 0, &k, &v), "qkv_heads", "(2,3,18)", "4 heads",
                    NULL);
    ck_assert(hl_tensor_is_poison(k) && hl_tensor_is_poison(v));
    hl_graph_reset(g);
    tu_expect_error(g, hl_qkv_heads(g, flat, 1, 0, &k, &v), "qkv_heads", "(3,18)", "(B,T,3E)",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_qkv_heads(g, x, 0, 0, &k, &v), "qkv_heads", "0 heads", NULL);
    hl_graph_reset(g);
    /* E = 6 over 2 heads: D = 3, odd, cannot rotate. */
    tu_expect_error(g, hl_qkv_heads(g, x, 2, 10000, &k, &v), "qkv_heads", "even", "3", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_qkv_heads(g, x, 3, (hl_real)0.5, &k, &v), "qkv_heads", "base", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_qkv_heads(g, x, 3, (hl_real)NAN, &k, &v), "qkv_heads", "base", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_qkv_heads(g, NULL, 3, 0, &k, &v), "qkv_heads", "NULL", NULL);
    hl_graph_reset(g);
    /* Valid: 3 heads of width 2. */
    hl_tensor *q = hl_qkv_heads(g, x, 3, 10000, &k, &v);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    ck_assert_int_eq(q->shape[1], 3);
    ck_assert_int_eq(v->shape[3], 2);
    hl_tensor_free(x);
    hl_tensor_free(flat);
    hl_graph_free(g);
}
END_TEST

/* The grouped form against the composition, every mix of parts. */
static void check_grouped_bits(int B, int T, int heads, int kv_heads, int D, hl_real base,
                               int rot, uint64_t seed)
{
    hl_tensor *x =
        tu_random("qkv", 3, (int[]){B, T, (heads + 2 * kv_heads) * D}, true, seed, -2, 2);
    for (unsigned parts = 1; parts < 8; parts++) {
        split s = {.heads = heads, .base = base, .parts = parts, .grouped = true,
                   .kv_heads = kv_heads, .rot = rot};
        size_t n_fused, n_composed;
        s.fused = true;
        hl_real *fused = tu_forward_backward(build_split, &s, &x, 1, &n_fused);
        s.fused = false;
        hl_real *composed = tu_forward_backward(build_split, &s, &x, 1, &n_composed);
        ck_assert_uint_eq(n_fused, n_composed);
        ck_assert_msg(memcmp(fused, composed, n_fused * sizeof *fused) == 0,
                      "qkv_heads_grouped %d heads, %d kv heads, D %d, base %g, rot %d, parts %u: "
                      "fused and composed differ",
                      heads, kv_heads, D, (double)base, rot, parts);
        free(fused);
        free(composed);
    }
    hl_tensor_free(x);
}

START_TEST(test_qkv_heads_grouped_equals_composition)
{
    check_grouped_bits(2, 5, 4, 2, 6, 10000, 0, 51);  /* grouped-query, whole rotary */
    check_grouped_bits(2, 5, 4, 1, 6, 10000, 4, 52);  /* multi-query, partial */
    check_grouped_bits(1, 7, 3, 3, 8, 100, 2, 53);    /* partial only (Pythia) */
    check_grouped_bits(2, 3, 2, 2, 5, 0, 0, 54);      /* no rotation, odd D */
    check_grouped_bits(2, 4, 2, 1, 7, 500, 6, 55);    /* odd D, even rot */
    check_grouped_bits(4, 64, 8, 2, 32, 10000, 16, 56); /* parallel, past one vector */
}
END_TEST

/* hl_qkv_heads is the grouped form with kv_heads = heads and rot_dims 0. */
START_TEST(test_qkv_heads_grouped_plain_case)
{
    hl_tensor *x = tu_random("qkv", 3, (int[]){3, 9, 3 * 20}, true, 57, -2, 2);
    for (int rope = 0; rope <= 1; rope++) {
        split plain = {.heads = 5, .base = rope ? 500 : 0, .fused = true, .parts = 7};
        split grouped = plain;
        grouped.grouped = true;
        size_t n_a, n_b;
        hl_real *a = tu_forward_backward(build_split, &plain, &x, 1, &n_a);
        hl_real *b = tu_forward_backward(build_split, &grouped, &x, 1, &n_b);
        ck_assert_uint_eq(n_a, n_b);
        ck_assert_msg(!memcmp(a, b, n_a * sizeof *a), "rope %d: plain and grouped differ", rope);
        free(a);
        free(b);
    }
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_qkv_heads_grouped_gradients)
{
    hl_tensor *x = tu_random("qkv", 3, (int[]){2, 5, 4 * 6}, true, 58, -2, 2);
    for (unsigned parts = 1; parts < 8; parts++) {
        split s = {.heads = 2, .base = 100, .fused = true, .parts = parts, .grouped = true,
                   .kv_heads = 1, .rot = 4};
        tu_gradcheck("qkv_heads_grouped", build_split, &s, &x, 1);
    }
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_qkv_heads_grouped_threads)
{
    hl_tensor *x = tu_random("qkv", 3, (int[]){3, 100, 12 * 24}, true, 59, -2, 2);
    tu_check_threads_bitwise("qkv_heads_grouped", build_split,
                             &(split){.heads = 8, .base = 10000, .fused = true, .parts = 7,
                                      .grouped = true, .kv_heads = 2, .rot = 8},
                             &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_qkv_heads_grouped_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("qkv", 3, (int[]){2, 3, 24}, false, 60, -1, 1);
    hl_tensor *k = NULL, *v = NULL;
    /* 24 = (4 + 2·2)·3, or (2 + 2·1)·6. */
    tu_expect_error(g, hl_qkv_heads_grouped(g, x, 4, 3, 0, 0, &k, &v), "qkv_heads_grouped",
                    "(2,3,24)", "4 heads", "3 kv heads", NULL);
    ck_assert(hl_tensor_is_poison(k) && hl_tensor_is_poison(v));
    hl_graph_reset(g);
    tu_expect_error(g, hl_qkv_heads_grouped(g, x, 4, 0, 0, 0, &k, &v), "qkv_heads_grouped",
                    "0 kv heads", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_qkv_heads_grouped(g, x, 4, 2, 10000, 0, &k, &v),
                    "qkv_heads_grouped", "even", "3", NULL);
    hl_graph_reset(g);
    const int bad_rot[] = {3, 8, -2, 1};
    for (int i = 0; i < 4; i++) {
        char rot[32];
        snprintf(rot, sizeof rot, "rot_dims %d", bad_rot[i]);
        tu_expect_error(g, hl_qkv_heads_grouped(g, x, 2, 1, 10000, bad_rot[i], &k, &v),
                        "qkv_heads_grouped", rot, "2..D = 6", "(2,3,24)", NULL);
        hl_graph_reset(g);
    }
    tu_expect_error(g, hl_qkv_heads_grouped(g, x, 2, 1, (hl_real)NAN, 2, &k, &v),
                    "qkv_heads_grouped", "base", NULL);
    hl_graph_reset(g);
    /* Valid: 2 query heads and 1 key/value head of width 6, 4 of it rotated. */
    hl_tensor *q = hl_qkv_heads_grouped(g, x, 2, 1, 10000, 4, &k, &v);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    ck_assert_int_eq(q->shape[1], 2);
    ck_assert_int_eq(k->shape[1], 1);
    ck_assert_int_eq(v->shape[1], 1);
    ck_assert_int_eq(v->shape[3], 6);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

Suite *qkv_heads_suite(void)
{
    Suite *s = suite_create("qkv_heads");
    TCase *tc = tcase_create("qkv_heads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_qkv_heads_equals_composition);
    tcase_add_test(tc, test_qkv_heads_outputs);
    tcase_add_test(tc, test_qkv_heads_gradients);
    tcase_add_test(tc, test_qkv_heads_threads);
    tcase_add_test(tc, test_qkv_heads_errors);
    tcase_add_test(tc, test_qkv_heads_grouped_equals_composition);
    tcase_add_test(tc, test_qkv_heads_grouped_plain_case);
    tcase_add_test(tc, test_qkv_heads_grouped_gradients);
    tcase_add_test(tc, test_qkv_heads_grouped_threads);
    tcase_add_test(tc, test_qkv_heads_grouped_errors);
    suite_add_tcase(s, tc);
    return s;
}
