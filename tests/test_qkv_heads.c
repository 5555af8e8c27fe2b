/* Tests for ops/qkv_heads.c: the packed projection split into heads (and
 * rotated) in one op gives the same bits as hl_narrow, hl_reshape, hl_permute
 * and hl_rope, forward and backward, whichever outputs reach the loss;
 * gradients against finite differences; thread independence; errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

typedef struct {
    int heads;
    hl_real base; /* 0: no rotation */
    bool fused;
    unsigned parts; /* which of q (1), k (2), v (4) reach the output */
} split;

/* The composition the op replaces: MHA's path before it. */
static void composed_heads(hl_graph *g, hl_tensor *qkv, const split *s, hl_tensor **out)
{
    const int B = qkv->shape[0], T = qkv->shape[1], E = qkv->shape[2] / 3;
    for (int p = 0; p < 3; p++) {
        hl_tensor *part = hl_narrow(g, qkv, -1, p * E, E);
        hl_tensor *x = hl_reshape(g, part, 4, (int[]){B, T, s->heads, E / s->heads});
        out[p] = hl_permute(g, x, (int[]){0, 2, 1, 3});
        if (s->base != 0 && p < 2)
            out[p] = hl_rope(g, out[p], s->base);
    }
}

/* The chosen parts, weighted apart (q + 0.5·k + 0.25·v), with the input made
 * an intermediate (as the projection's output is) by a scale. */
static hl_tensor *build_split(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const split *s = ctx;
    hl_tensor *qkv = hl_scale(g, in[0], (hl_real)1.5), *out[3];
    if (s->fused)
        out[0] = hl_qkv_heads(g, qkv, s->heads, s->base, &out[1], &out[2]);
    else
        composed_heads(g, qkv, s, out);
    const hl_real weight[3] = {1, 0.5, 0.25};
    hl_tensor *sum = NULL;
    for (int p = 0; p < 3; p++) {
        if (!(s->parts & (1u << p)))
            continue;
        hl_tensor *term = p ? hl_scale(g, out[p], weight[p]) : out[p];
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
    suite_add_tcase(s, tc);
    return s;
}
