/* Tests for ops/matmul.c: batched op(a)·op(b) with transpose flags and a
 * shared rank-2 b. */
#include <math.h>
#include <stdio.h>

#include "tests/testutil.h"

static hl_tensor *build_matmul(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_matmul(g, in[0], in[1], *(const int *)ctx);
}

/* a · aᵀ: both gradients land in a's buffer and must add up. */
static hl_tensor *build_matmul_self(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_matmul(g, in[0], in[0], HL_TRANS_B);
}

/* a · ((a·b)·b) on square matrices: a and b each feed two products, and the
 * inner product's backward runs last, so a kernel that overwrote instead of
 * adding its gradient would drop the outer one's. */
static hl_tensor *build_matmul_chain(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const int flags = *(const int *)ctx;
    hl_tensor *h = hl_matmul(g, hl_matmul(g, in[0], in[1], flags), in[1], flags);
    return hl_matmul(g, in[0], h, flags);
}

/* A problem: batch dims (rank_batch of them, from batch[]) of M×K times K×N;
 * shared_b makes b rank 2. */
typedef struct {
    int rank_batch;
    int batch[2];
    int M, K, N;
    bool shared_b;
} mm_case;

/* Operands laid out as the flags say: a (...,M,K) or (...,K,M) with
 * HL_TRANS_A, b (...,K,N) or (...,N,K) with HL_TRANS_B. */
static void make_operands(const mm_case *c, int flags, bool requires_grad, uint64_t seed,
                          hl_tensor **a, hl_tensor **b)
{
    int as[HL_MAX_RANK], bs[HL_MAX_RANK];
    for (int i = 0; i < c->rank_batch; i++)
        as[i] = bs[i] = c->batch[i];
    int ar = c->rank_batch + 2, br = c->shared_b ? 2 : ar;
    as[ar - 2] = flags & HL_TRANS_A ? c->K : c->M;
    as[ar - 1] = flags & HL_TRANS_A ? c->M : c->K;
    bs[br - 2] = flags & HL_TRANS_B ? c->N : c->K;
    bs[br - 1] = flags & HL_TRANS_B ? c->K : c->N;
    *a = tu_random("a", ar, as, requires_grad, seed, -1, 1);
    *b = tu_random("b", br, bs, requires_grad, seed + 1, -1, 1);
}

/* y against a triple loop in double over every batch. */
static void check_forward(const mm_case *c, int flags, const hl_tensor *a, const hl_tensor *b,
                          const hl_tensor *y)
{
    const int M = c->M, K = c->K, N = c->N;
    const bool ta = flags & HL_TRANS_A, tb = flags & HL_TRANS_B;
    ck_assert_int_eq(y->rank, a->rank);
    for (int i = 0; i < c->rank_batch; i++)
        ck_assert_int_eq(y->shape[i], c->batch[i]);
    ck_assert_int_eq(y->shape[y->rank - 2], M);
    ck_assert_int_eq(y->shape[y->rank - 1], N);
    const size_t batch = a->numel / ((size_t)M * K);
    for (size_t t = 0; t < batch; t++) {
        const hl_real *A = a->data + t * M * K;
        const hl_real *B = b->data + (c->shared_b ? 0 : t * K * N);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++)
                    s += (double)(ta ? A[k * M + i] : A[i * K + k]) *
                         (tb ? B[j * K + k] : B[k * N + j]);
                double got = y->data[(t * M + i) * N + j];
                ck_assert_msg(fabs(got - s) <= 1e-5 * (1 + fabs(s)),
                              "flags %d batch %zu: y[%d][%d] = %.9g, expected %.9g", flags, t, i,
                              j, got, s);
            }
    }
}

static const mm_case forward_cases[] = {
    {.rank_batch = 0, .M = 3, .K = 17, .N = 5},
    {.rank_batch = 1, .batch = {3}, .M = 33, .K = 65, .N = 17},
    {.rank_batch = 2, .batch = {2, 3}, .M = 1, .K = 3, .N = 65},
    {.rank_batch = 1, .batch = {5}, .M = 17, .K = 3, .N = 33, .shared_b = true},
    {.rank_batch = 2, .batch = {2, 3}, .M = 3, .K = 17, .N = 1, .shared_b = true},
};

START_TEST(test_matmul_forward)
{
    hl_graph *g = hl_graph_new(0);
    for (int flags = 0; flags < 4; flags++)
        for (size_t i = 0; i < sizeof forward_cases / sizeof forward_cases[0]; i++) {
            hl_tensor *a, *b;
            make_operands(&forward_cases[i], flags, false, 10 * i + flags, &a, &b);
            hl_tensor *y = hl_matmul(g, a, b, flags);
            ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
            ck_assert(!y->requires_grad);
            check_forward(&forward_cases[i], flags, a, b, y);
            hl_tensor_free(a);
            hl_tensor_free(b);
            hl_graph_reset(g);
        }
    hl_graph_free(g);
}
END_TEST

static const mm_case gradient_cases[] = {
    {.rank_batch = 0, .M = 17, .K = 3, .N = 5},
    {.rank_batch = 1, .batch = {3}, .M = 3, .K = 5, .N = 1},
    {.rank_batch = 2, .batch = {2, 1}, .M = 1, .K = 17, .N = 3},
    {.rank_batch = 1, .batch = {3}, .M = 5, .K = 3, .N = 17, .shared_b = true},
    {.rank_batch = 2, .batch = {1, 3}, .M = 3, .K = 17, .N = 1, .shared_b = true},
};

START_TEST(test_matmul_gradients)
{
    for (int flags = 0; flags < 4; flags++)
        for (size_t i = 0; i < sizeof gradient_cases / sizeof gradient_cases[0]; i++) {
            const mm_case *c = &gradient_cases[i];
            hl_tensor *a, *b;
            make_operands(c, flags, true, 100 + 10 * i + flags, &a, &b);
            char what[64];
            snprintf(what, sizeof what, "matmul flags=%d%s", flags, c->shared_b ? " shared-b" : "");
            tu_gradcheck(what, build_matmul, (void *)&flags, (hl_tensor *[]){a, b}, 2);
            /* Only one side needing grad. */
            b->requires_grad = false;
            tu_gradcheck(what, build_matmul, (void *)&flags, (hl_tensor *[]){a, b}, 2);
            b->requires_grad = true;
            a->requires_grad = false;
            tu_gradcheck(what, build_matmul, (void *)&flags, (hl_tensor *[]){a, b}, 2);
            hl_tensor_free(a);
            hl_tensor_free(b);
        }
    hl_tensor *x = tu_random("a", 3, (int[]){2, 3, 17}, true, 200, -1, 1);
    tu_gradcheck("matmul a·aT", build_matmul_self, NULL, &x, 1);
    hl_tensor_free(x);
    for (int flags = 0; flags < 4; flags++)
        for (int shared = 0; shared < 2; shared++) {
            hl_tensor *a = tu_random("a", 3, (int[]){2, 3, 3}, true, 210 + flags, -1, 1);
            hl_tensor *b = shared ? tu_random("b", 2, (int[]){3, 3}, true, 220 + flags, -1, 1)
                                  : tu_random("b", 3, (int[]){2, 3, 3}, true, 230 + flags, -1, 1);
            char what[64];
            snprintf(what, sizeof what, "matmul chain flags=%d%s", flags,
                     shared ? " shared-b" : "");
            tu_gradcheck(what, build_matmul_chain, (void *)&flags, (hl_tensor *[]){a, b}, 2);
            hl_tensor_free(a);
            hl_tensor_free(b);
        }
}
END_TEST

START_TEST(test_matmul_threads)
{
    /* Each product is at least 64·48·64 ≈ 2e5 multiply-adds per batch. */
    static const mm_case big[] = {
        {.rank_batch = 2, .batch = {4, 8}, .M = 64, .K = 48, .N = 64},
        {.rank_batch = 1, .batch = {8}, .M = 64, .K = 96, .N = 80, .shared_b = true},
    };
    for (int flags = 0; flags < 4; flags++)
        for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
            hl_tensor *a, *b;
            make_operands(&big[i], flags, true, 300 + 10 * i + flags, &a, &b);
            char what[64];
            snprintf(what, sizeof what, "matmul flags=%d%s", flags,
                     big[i].shared_b ? " shared-b" : "");
            tu_check_threads_bitwise(what, build_matmul, (void *)&flags, (hl_tensor *[]){a, b},
                                     2);
            hl_tensor_free(a);
            hl_tensor_free(b);
        }
}
END_TEST

START_TEST(test_matmul_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *v = tu_random("v", 1, (int[]){5}, false, 1, -1, 1);
    hl_tensor *m53 = tu_random("m", 2, (int[]){5, 3}, false, 2, -1, 1);
    hl_tensor *a = tu_random("a", 3, (int[]){2, 3, 4}, false, 3, -1, 1);
    hl_tensor *b = tu_random("b", 3, (int[]){2, 5, 6}, false, 4, -1, 1);
    hl_tensor *b345 = tu_random("b", 3, (int[]){3, 4, 5}, false, 5, -1, 1);
    hl_tensor *m34 = tu_random("m", 2, (int[]){3, 4}, false, 6, -1, 1);
    hl_tensor *b4 = tu_random("b", 4, (int[]){1, 2, 4, 5}, false, 7, -1, 1);

    tu_expect_error(g, hl_matmul(g, v, m53, 0), "matmul", "a (5)", "b (5,3)", "rank 2", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_matmul(g, m53, v, 0), "matmul", "b (5)", "rank 2", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_matmul(g, a, b, HL_TRANS_B), "matmul", "inner dims", "a (2,3,4)",
                    "b (2,5,6)", "4 vs 6", "HL_TRANS_B", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_matmul(g, a, b, 0), "matmul", "(2,3,4)", "(2,5,6)", "4 vs 5",
                    "no transpose", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_matmul(g, a, b, HL_TRANS_A | HL_TRANS_B), "matmul", "3 vs 6",
                    "HL_TRANS_A|HL_TRANS_B", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_matmul(g, a, b345, 0), "matmul", "batch dims", "a (2,3,4)",
                    "b (3,4,5)", NULL);
    hl_graph_reset(g);
    /* A batched b needs a batched a of the same rank. */
    tu_expect_error(g, hl_matmul(g, m34, b345, 0), "matmul", "batch dims", "a (3,4)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_matmul(g, a, b4, 0), "matmul", "batch dims", "b (1,2,4,5)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_matmul(g, a, m34, 4), "matmul", "flags 4", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_matmul(g, a, NULL, 0), "matmul", "input 1 is NULL", NULL);
    hl_graph_reset(g);
    /* Sanity: the same operands in a valid combination work. */
    ck_assert(!hl_tensor_is_poison(hl_matmul(g, a, m34, HL_TRANS_B)));
    ck_assert(!hl_graph_failed(g));

    hl_tensor_free(v);
    hl_tensor_free(m53);
    hl_tensor_free(a);
    hl_tensor_free(b);
    hl_tensor_free(b345);
    hl_tensor_free(m34);
    hl_tensor_free(b4);
    hl_graph_free(g);
}
END_TEST

Suite *matmul_suite(void)
{
    Suite *s = suite_create("matmul");
    TCase *tc = tcase_create("matmul");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_matmul_forward);
    tcase_add_test(tc, test_matmul_gradients);
    tcase_add_test(tc, test_matmul_threads);
    tcase_add_test(tc, test_matmul_errors);
    suite_add_tcase(s, tc);
    return s;
}
