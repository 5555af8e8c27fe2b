/* Tests for ops/gather_heads.c: heads gathered against a naive copy, the
 * backward's sum over the heads that share a source, grouped-query attention
 * through the fused and the composed path, gradients, thread independence
 * and errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"
#include "tests/testutil.h"

typedef struct {
    const int *src;
    int heads;
} gather;

static hl_tensor *build_gather(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const gather *c = ctx;
    return hl_gather_heads(g, in[0], c->src, c->heads);
}

START_TEST(test_gather_heads_forward)
{
    const int B = 2, H_kv = 3, S = 5, D = 7, heads = 5;
    const int src[] = {2, 0, 0, 1, 2};
    hl_tensor *x = tu_random("x", 4, (int[]){B, H_kv, S, D}, false, 1, -2, 2);
    hl_graph *g = hl_graph_new(0);
    int caller_src[5];
    memcpy(caller_src, src, sizeof src);
    hl_tensor *y = hl_gather_heads(g, x, caller_src, heads);
    memset(caller_src, 0, sizeof caller_src); /* the op keeps its own copy */
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    ck_assert_int_eq(y->rank, 4);
    const int want_shape[4] = {B, heads, S, D};
    ck_assert_mem_eq(y->shape, want_shape, sizeof want_shape);
    const size_t block = (size_t)S * D;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++)
            ck_assert_msg(!memcmp(y->data + ((size_t)b * heads + h) * block,
                                  x->data + ((size_t)b * H_kv + src[h]) * block,
                                  block * sizeof(hl_real)),
                          "batch %d head %d is not head %d", b, h, src[h]);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

/* dx[b,j] = Σ dy[b,h] over src[h] = j, added in h order; a head nobody reads
 * gets zeros. Checked bit for bit against the sums in that order, stored and
 * added to an earlier gradient. */
START_TEST(test_gather_heads_backward)
{
    const int B = 2, H_kv = 4, S = 3, D = 5, heads = 6;
    const int src[] = {1, 0, 1, 3, 1, 0}; /* head 2 unread */
    hl_tensor *x = tu_random("x", 4, (int[]){B, H_kv, S, D}, true, 2, -2, 2);
    hl_tensor *dy = tu_random("dy", 4, (int[]){B, heads, S, D}, false, 3, -1, 1);
    const size_t block = (size_t)S * D;
    for (int twice = 0; twice <= 1; twice++) {
        hl_graph *g = hl_graph_new(0);
        hl_tensor *y = hl_gather_heads(g, x, src, heads);
        if (twice) /* x's gradient already holds the direct path's */
            y = hl_add(g, y, hl_gather_heads(g, x, (int[]){0, 1, 2, 3, 0, 1}, heads));
        ck_assert_int_eq(hl_graph_backward_from(g, y, dy->data), HL_OK);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H_kv; j++)
                for (size_t i = 0; i < block; i++) {
                    hl_real want = 0;
                    if (twice) /* the second gather's backward runs first */
                        want = dy->data[((size_t)b * heads + j) * block + i] +
                               (j < 2 ? dy->data[((size_t)b * heads + 4 + j) * block + i] : 0);
                    for (int h = 0; h < heads; h++)
                        if (src[h] == j)
                            want += dy->data[((size_t)b * heads + h) * block + i];
                    const hl_real got = x->grad[((size_t)b * H_kv + j) * block + i];
                    ck_assert_msg(!memcmp(&got, &want, sizeof got),
                                  "twice %d, batch %d head %d [%zu]: %.9g, want %.9g", twice, b,
                                  j, i, (double)got, (double)want);
                }
        hl_graph_free(g);
        hl_tensor_zero_grad(x);
    }
    hl_tensor_free(x);
    hl_tensor_free(dy);
}
END_TEST

/* Grouped-query attention, as Llama's repeat_kv: query head h reads key/value
 * head h / (heads / Hkv). The fused attention and the composed ops take the
 * gathered k and v; each head's output equals attention on its own head. */
START_TEST(test_gather_heads_grouped_attention)
{
    const int B = 2, heads = 4, H_kv = 2, T = 7, D = 6;
    const int src[] = {0, 0, 1, 1};
    hl_tensor *q = tu_random("q", 4, (int[]){B, heads, T, D}, false, 4, -1, 1);
    hl_tensor *k = tu_random("k", 4, (int[]){B, H_kv, T, D}, false, 5, -1, 1);
    hl_tensor *v = tu_random("v", 4, (int[]){B, H_kv, T, D}, false, 6, -1, 1);
    hl_graph *g = hl_graph_new(0);
    const hl_real scale = (hl_real)(1 / sqrt((double)D));
    hl_tensor *kk = hl_gather_heads(g, k, src, heads), *vv = hl_gather_heads(g, v, src, heads);
    hl_attention_masks m = {.causal = true};
    hl_tensor *fused = hl_attention(g, q, kk, vv, scale, &m);
    hl_tensor *p = hl_softmax(
        g, hl_mask_causal(g, hl_scale(g, hl_matmul(g, q, kk, HL_TRANS_B), scale)));
    hl_tensor *composed = hl_matmul(g, p, vv, 0);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    /* Head by head, against attention on that head's own key/value head. */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            hl_tensor *qh = hl_narrow(g, hl_narrow(g, q, 0, b, 1), 1, h, 1);
            hl_tensor *kh = hl_narrow(g, hl_narrow(g, k, 0, b, 1), 1, src[h], 1);
            hl_tensor *vh = hl_narrow(g, hl_narrow(g, v, 0, b, 1), 1, src[h], 1);
            hl_tensor *oh = hl_attention(g, qh, kh, vh, scale, &m);
            ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
            const size_t at = ((size_t)b * heads + h) * T * D;
            ck_assert_msg(!memcmp(oh->data, fused->data + at, (size_t)T * D * sizeof(hl_real)),
                          "batch %d head %d: the gathered attention differs", b, h);
            tu_assert_close("composed", composed->data + at, oh->data, (size_t)T * D, 1e-5);
        }
    hl_tensor_free(q);
    hl_tensor_free(k);
    hl_tensor_free(v);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_gather_heads_gradient)
{
    hl_tensor *x = tu_random("x", 4, (int[]){2, 3, 5, 3}, true, 7, -2, 2);
    tu_gradcheck("gather_heads", build_gather,
                 &(gather){.src = (const int[]){2, 0, 0, 1, 2, 2, 1}, .heads = 7}, &x, 1);
    tu_gradcheck("gather_heads, one head", build_gather,
                 &(gather){.src = (const int[]){1}, .heads = 1}, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_gather_heads_threads)
{
    hl_tensor *x = tu_random("x", 4, (int[]){3, 2, 64, 48}, true, 8, -2, 2);
    const int src[] = {0, 0, 0, 1, 1, 1};
    ck_assert(x->numel * 3 >= HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("gather_heads", build_gather, &(gather){.src = src, .heads = 6},
                             &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_gather_heads_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 4, (int[]){2, 3, 5, 4}, false, 9, -1, 1);
    hl_tensor *flat = tu_random("x", 3, (int[]){2, 3, 5}, false, 10, -1, 1);
    const int src[] = {0, 1, 2, 3};
    tu_expect_error(g, hl_gather_heads(g, x, src, 4), "gather_heads", "src[3] = 3",
                    "(2,3,5,4)", "0..2", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_gather_heads(g, x, (int[]){-1}, 1), "gather_heads", "src[0] = -1",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_gather_heads(g, flat, src, 2), "gather_heads", "(2,3,5)",
                    "(B,Hkv,S,D)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_gather_heads(g, x, src, 0), "gather_heads", "0 >= 1 heads",
                    "(2,3,5,4)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_gather_heads(g, x, NULL, 2), "gather_heads", "src NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_gather_heads(g, NULL, src, 2), "gather_heads", "NULL", NULL);
    hl_tensor_free(x);
    hl_tensor_free(flat);
    hl_graph_free(g);
}
END_TEST

Suite *gather_heads_suite(void)
{
    Suite *s = suite_create("gather_heads");
    TCase *tc = tcase_create("gather_heads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gather_heads_forward);
    tcase_add_test(tc, test_gather_heads_backward);
    tcase_add_test(tc, test_gather_heads_grouped_attention);
    tcase_add_test(tc, test_gather_heads_gradient);
    tcase_add_test(tc, test_gather_heads_threads);
    tcase_add_test(tc, test_gather_heads_errors);
    suite_add_tcase(s, tc);
    return s;
}
