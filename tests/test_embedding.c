/* Tests for ops/embedding.c: row gather forward, scatter-add backward. */
#include <stdlib.h>

#include "ops/internal.h"
#include "tests/testutil.h"

typedef struct emb_case {
    const int32_t *ids;
    int rank;
    int shape[3];
} emb_case;

static hl_tensor *build_embedding(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const emb_case *c = ctx;
    return hl_embedding(g, in[0], c->ids, c->rank, c->shape);
}

/* n ids in [0, V) from a fixed seed; with n > V some must repeat. */
static int32_t *random_ids(size_t n, int V, uint64_t seed)
{
    int32_t *ids = malloc(n * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++)
        ids[i] = (int32_t)hl_rng_below(&rng, (uint32_t)V);
    return ids;
}

START_TEST(test_embedding_forward)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *w = tu_random("w", 2, (int[]){17, 3}, false, 1, -1, 1);
    int32_t ids[] = {16, 0, 5, 5, 9, 16, 2, 0, 1, 7, 7, 3};
    hl_tensor *y = hl_embedding(g, w, ids, 3, (int[]){2, 2, 3});
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->rank, 4);
    ck_assert_int_eq(y->shape[0], 2);
    ck_assert_int_eq(y->shape[1], 2);
    ck_assert_int_eq(y->shape[2], 3);
    ck_assert_int_eq(y->shape[3], 3);
    for (int t = 0; t < 12; t++)
        for (int j = 0; j < 3; j++)
            ck_assert(y->data[t * 3 + j] == w->data[ids[t] * 3 + j]);
    hl_tensor *one = hl_embedding(g, w, ids, 1, (int[]){1});
    ck_assert_int_eq(one->rank, 2);
    ck_assert_int_eq(one->shape[0], 1);
    ck_assert(one->data[2] == w->data[16 * 3 + 2]);
    hl_tensor_free(w);
    hl_graph_free(g);
}
END_TEST

/* Repeated ids sum their gradients, backward accumulates into an existing
 * gradient, and the op keeps its own copy of the ids. */
START_TEST(test_embedding_backward_repeats)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *w = tu_random("w", 2, (int[]){4, 2}, true, 2, -1, 1);
    for (int i = 0; i < 8; i++)
        w->grad[i] = (hl_real)0.5;
    int32_t ids[] = {1, 1, 3, 1};
    hl_tensor *y = hl_embedding(g, w, ids, 2, (int[]){2, 2});
    ids[0] = ids[1] = ids[2] = ids[3] = 0; /* must not affect backward */
    const hl_real dy[] = {1, 2, 10, 20, 100, 200, 1000, 2000};
    ck_assert_int_eq(hl_graph_backward_from(g, y, dy), HL_OK);
    const hl_real expect[] = {0.5, 0.5, 1011.5, 2022.5, 0.5, 0.5, 100.5, 200.5};
    tu_assert_close("dW", w->grad, expect, 8, 0);
    hl_tensor_free(w);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_embedding_gradients)
{
    hl_tensor *w = tu_random("w", 2, (int[]){17, 3}, true, 3, -1, 1);
    int32_t *ids = random_ids(3 * 7, 17, 4);
    ids[5] = ids[0] = ids[20]; /* at least one id three times */
    emb_case c = {ids, 2, {3, 7}};
    tu_gradcheck("embedding", build_embedding, &c, &w, 1);

    hl_tensor *w1 = tu_random("w", 2, (int[]){1, 1}, true, 5, -1, 1);
    const int32_t zeros[3] = {0, 0, 0};
    emb_case c1 = {zeros, 3, {1, 3, 1}};
    tu_gradcheck("embedding (V=1,E=1)", build_embedding, &c1, &w1, 1);

    hl_tensor *big = tu_random("w", 2, (int[]){100, 256}, true, 6, -1, 1);
    int32_t *big_ids = random_ids(64 * 32, 100, 7);
    emb_case cb = {big_ids, 2, {64, 32}};
    /* Forward and backward run on 2 threads only from this much work on. */
    ck_assert_uint_ge((size_t)64 * 32 * big->shape[1], HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("embedding (large)", build_embedding, &cb, &big, 1);

    free(ids);
    free(big_ids);
    hl_tensor_free(w);
    hl_tensor_free(w1);
    hl_tensor_free(big);
}
END_TEST

START_TEST(test_embedding_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *w = tu_random("w", 2, (int[]){17, 3}, true, 1, -1, 1);
    int32_t ids[] = {3, 4, 17, 2};
    tu_expect_error(g, hl_embedding(g, w, ids, 2, (int[]){2, 2}), "embedding", "id 17",
                    "position 2", "(17,3)", NULL);
    hl_graph_reset(g);
    ids[2] = -1;
    tu_expect_error(g, hl_embedding(g, w, ids, 1, (int[]){4}), "embedding", "id -1",
                    "position 2", "(17,3)", NULL);
    hl_graph_reset(g);
    hl_tensor *flat = tu_random("flat", 1, (int[]){17}, false, 2, -1, 1);
    tu_expect_error(g, hl_embedding(g, flat, ids, 1, (int[]){1}), "embedding", "(17)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_embedding(g, w, NULL, 1, (int[]){1}), "embedding", "NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_embedding(g, w, ids, 4, (int[]){1, 1, 1, 1}), "embedding", "rank 4",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_embedding(g, w, ids, 2, (int[]){2, 0}), "embedding", "dim 1 is 0",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_embedding(g, NULL, ids, 1, (int[]){1}), "embedding", "NULL", NULL);
    hl_tensor_free(w);
    hl_tensor_free(flat);
    hl_graph_free(g);
}
END_TEST

Suite *embedding_suite(void)
{
    Suite *s = suite_create("embedding");
    TCase *tc = tcase_create("embedding");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_embedding_forward);
    tcase_add_test(tc, test_embedding_backward_repeats);
    tcase_add_test(tc, test_embedding_gradients);
    tcase_add_test(tc, test_embedding_errors);
    suite_add_tcase(s, tc);
    return s;
}
