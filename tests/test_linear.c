/* Tests for ops/linear.c: x (...,K) · w (N,K)ᵀ + b (N). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

static hl_tensor *build_linear_bias(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear(g, in[0], in[1], in[2]);
}

static hl_tensor *build_linear_nobias(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear(g, in[0], in[1], NULL);
}

/* x · xᵀ + b: the input and weight gradients land in one buffer and must add up. */
static hl_tensor *build_linear_self(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear(g, in[0], in[0], in[1]);
}

/* x (K,K) is the input of the inner linear and the weight of the outer one, and
 * b is used by both: the inner backward runs last and must add to, not
 * overwrite, what the outer one left in x's and b's gradients. */
static hl_tensor *build_linear_chain(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear(g, hl_linear(g, in[0], in[1], in[2]), in[0], in[2]);
}

/* ctx NULL: the exact GELU; otherwise its tanh form. */
static hl_tensor *build_gelu_of_linear(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    hl_tensor *y = hl_linear(g, in[0], in[1], in[2]);
    return ctx ? hl_gelu_tanh(g, y) : hl_gelu(g, y);
}

static hl_tensor *build_linear_gelu(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return ctx ? hl_linear_gelu_tanh(g, in[0], in[1], in[2])
               : hl_linear_gelu(g, in[0], in[1], in[2]);
}

/* The ctx that picks the tanh form. */
static bool tanh_form = true;

/* y (rows,N) = x (rows,K) · wᵀ + b, in double. */
static void check_forward(const hl_tensor *x, const hl_tensor *w, const hl_tensor *b,
                          const hl_tensor *y)
{
    const int N = w->shape[0], K = w->shape[1];
    const size_t rows = x->numel / (size_t)K;
    ck_assert_uint_eq(y->numel, rows * (size_t)N);
    for (size_t r = 0; r < rows; r++)
        for (int j = 0; j < N; j++) {
            double s = b ? b->data[j] : 0;
            for (int k = 0; k < K; k++)
                s += (double)x->data[r * K + k] * w->data[j * K + k];
            ck_assert_msg(fabs(y->data[r * N + j] - s) <= 1e-5 * (1 + fabs(s)),
                          "y[%zu][%d] = %.9g, expected %.9g", r, j, (double)y->data[r * N + j],
                          s);
        }
}

START_TEST(test_linear_forward)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 3, (int[]){2, 3, 17}, false, 1, -1, 1);
    hl_tensor *w = tu_random("w", 2, (int[]){65, 17}, false, 2, -1, 1);
    hl_tensor *b = tu_random("b", 1, (int[]){65}, false, 3, -1, 1);
    hl_tensor *y = hl_linear(g, x, w, b);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->rank, 3);
    ck_assert_int_eq(y->shape[0], 2);
    ck_assert_int_eq(y->shape[1], 3);
    ck_assert_int_eq(y->shape[2], 65);
    ck_assert(!y->requires_grad);
    check_forward(x, w, b, y);
    check_forward(x, w, NULL, hl_linear(g, x, w, NULL));
    /* A rank-1 input is one row. */
    hl_tensor *v = tu_random("v", 1, (int[]){17}, false, 4, -1, 1);
    hl_tensor *yv = hl_linear(g, v, w, b);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(yv->rank, 1);
    ck_assert_int_eq(yv->shape[0], 65);
    check_forward(v, w, b, yv);
    hl_tensor_free(x);
    hl_tensor_free(w);
    hl_tensor_free(b);
    hl_tensor_free(v);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_linear_gradients)
{
    hl_tensor *x = tu_random("x", 3, (int[]){3, 1, 17}, true, 5, -1, 1);
    hl_tensor *w = tu_random("w", 2, (int[]){5, 17}, true, 6, -1, 1);
    hl_tensor *b = tu_random("b", 1, (int[]){5}, true, 7, -1, 1);
    hl_tensor *with_bias[] = {x, w, b};
    tu_gradcheck("linear", build_linear_bias, NULL, with_bias, 3);
    tu_gradcheck("linear (no bias)", build_linear_nobias, NULL, with_bias, 2);
    hl_tensor *sq = tu_random("x", 2, (int[]){3, 17}, true, 22, -1, 1);
    hl_tensor *bsq = tu_random("b", 1, (int[]){3}, true, 23, -1, 1);
    tu_gradcheck("linear (x as weight)", build_linear_self, NULL, (hl_tensor *[]){sq, bsq}, 2);
    hl_tensor *xc = tu_random("x", 2, (int[]){3, 3}, true, 24, -1, 1);
    hl_tensor *wc = tu_random("w", 2, (int[]){3, 3}, true, 25, -1, 1);
    tu_gradcheck("linear (chain)", build_linear_chain, NULL, (hl_tensor *[]){xc, wc, bsq}, 3);

    /* One output feature, one input feature, and only some inputs needing grad. */
    hl_tensor *x1 = tu_random("x", 2, (int[]){17, 1}, true, 8, -1, 1);
    hl_tensor *w1 = tu_random("w", 2, (int[]){1, 1}, false, 9, -1, 1);
    hl_tensor *b1 = tu_random("b", 1, (int[]){1}, true, 10, -1, 1);
    tu_gradcheck("linear (1x1 weight)", build_linear_bias, NULL, (hl_tensor *[]){x1, w1, b1}, 3);
    hl_tensor *x2 = tu_random("x", 4, (int[]){2, 3, 1, 3}, false, 11, -1, 1);
    hl_tensor *w2 = tu_random("w", 2, (int[]){17, 3}, true, 12, -1, 1);
    tu_gradcheck("linear (weight only)", build_linear_nobias, NULL, (hl_tensor *[]){x2, w2}, 2);

    hl_tensor_free(x);
    hl_tensor_free(w);
    hl_tensor_free(b);
    hl_tensor_free(x1);
    hl_tensor_free(w1);
    hl_tensor_free(b1);
    hl_tensor_free(x2);
    hl_tensor_free(w2);
    hl_tensor_free(sq);
    hl_tensor_free(bsq);
    hl_tensor_free(xc);
    hl_tensor_free(wc);
}
END_TEST

START_TEST(test_linear_threads)
{
    /* 512 rows · 80 · 96 ≈ 3.9e6 multiply-adds forward and per gradient; the
     * bias gradient sums 512·80 values over two column blocks. */
    hl_tensor *x = tu_random("x", 3, (int[]){8, 64, 96}, true, 13, -1, 1);
    hl_tensor *w = tu_random("w", 2, (int[]){80, 96}, true, 14, -1, 1);
    hl_tensor *b = tu_random("b", 1, (int[]){80}, true, 15, -1, 1);
    hl_tensor *in[] = {x, w, b};
    tu_check_threads_bitwise("linear", build_linear_bias, NULL, in, 3);
    tu_check_threads_bitwise("linear (no bias)", build_linear_nobias, NULL, in, 2);
    hl_tensor_free(x);
    hl_tensor_free(w);
    hl_tensor_free(b);
}
END_TEST

/* The fused op against the two ops it replaces: the same output and the same
 * gradients of x, w and b, bit for bit. Shapes with partial tiles, a K of
 * more than one cache slice (so the bias is added before the first slice and
 * GELU taken after the last), no bias, and one large enough for two threads. */
START_TEST(test_linear_gelu_equals_composed)
{
    static const struct {
        int rows, N, K;
        bool bias;
    } shapes[] = {{1, 1, 1, true},     {7, 5, 17, true},   {13, 33, 300, true},
                  {20, 70, 600, false}, {64, 512, 128, true}, {256, 96, 1100, true}};
    for (size_t f = 0; f < 2 * sizeof shapes / sizeof shapes[0]; f++) {
        const size_t i = f / 2;
        void *form = f % 2 ? &tanh_form : NULL;
        const int R = shapes[i].rows, N = shapes[i].N, K = shapes[i].K;
        hl_tensor *x = tu_random("x", 2, (int[]){R, K}, true, 40 + (int)i, -2, 2);
        hl_tensor *w = tu_random("w", 2, (int[]){N, K}, true, 50 + (int)i, -0.2, 0.2);
        hl_tensor *b = tu_random("b", 1, (int[]){N}, true, 60 + (int)i, -1, 1);
        hl_tensor *in[] = {x, w, b};
        const int n_in = shapes[i].bias ? 3 : 2;
        size_t n_composed, n_fused;
        hl_real *composed = tu_forward_backward(build_gelu_of_linear, form, in, n_in, &n_composed);
        hl_real *fused = tu_forward_backward(build_linear_gelu, form, in, n_in, &n_fused);
        ck_assert_uint_eq(n_fused, n_composed);
        for (size_t j = 0; j < n_fused; j++)
            ck_assert_msg(memcmp(&fused[j], &composed[j], sizeof *fused) == 0,
                          "shape %zu%s: value %zu is %.9g fused, %.9g composed", i,
                          form ? " (tanh)" : "", j, (double)fused[j], (double)composed[j]);
        free(composed);
        free(fused);
        hl_tensor_free(x);
        hl_tensor_free(w);
        hl_tensor_free(b);
    }
}
END_TEST

START_TEST(test_linear_gelu_gradients_and_threads)
{
    hl_tensor *x = tu_random("x", 3, (int[]){3, 1, 17}, true, 70, -2, 2);
    hl_tensor *w = tu_random("w", 2, (int[]){5, 17}, true, 71, -0.5, 0.5);
    hl_tensor *b = tu_random("b", 1, (int[]){5}, true, 72, -1, 1);
    tu_gradcheck("linear_gelu", build_linear_gelu, NULL, (hl_tensor *[]){x, w, b}, 3);
    tu_gradcheck("linear_gelu (no bias)", build_linear_gelu, NULL, (hl_tensor *[]){x, w, NULL}, 2);
    hl_tensor *xl = tu_random("x", 3, (int[]){8, 64, 96}, true, 73, -1, 1);
    hl_tensor *wl = tu_random("w", 2, (int[]){80, 96}, true, 74, -0.2, 0.2);
    hl_tensor *bl = tu_random("b", 1, (int[]){80}, true, 75, -1, 1);
    tu_check_threads_bitwise("linear_gelu", build_linear_gelu, NULL, (hl_tensor *[]){xl, wl, bl},
                             3);
    tu_gradcheck("linear_gelu_tanh", build_linear_gelu, &tanh_form, (hl_tensor *[]){x, w, b}, 3);
    tu_check_threads_bitwise("linear_gelu_tanh", build_linear_gelu, &tanh_form,
                             (hl_tensor *[]){xl, wl, bl}, 3);
    hl_graph *g = hl_graph_new(0);
    tu_expect_error(g, hl_linear_gelu(g, xl, w, b), "linear_gelu", "input (8,64,96)",
                    "weight (5,17)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_linear_gelu_tanh(g, xl, w, b), "linear_gelu_tanh", "input (8,64,96)",
                    "weight (5,17)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_linear_gelu_tanh(g, x, w, (hl_tensor *)xl), "linear_gelu_tanh",
                    "bias (8,64,96)", NULL);
    hl_graph_free(g);
    hl_tensor_free(x);
    hl_tensor_free(w);
    hl_tensor_free(b);
    hl_tensor_free(xl);
    hl_tensor_free(wl);
    hl_tensor_free(bl);
}
END_TEST

START_TEST(test_linear_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 3, (int[]){8, 16, 63}, false, 16, -1, 1);
    hl_tensor *w = tu_random("w", 2, (int[]){64, 64}, false, 17, -1, 1);
    hl_tensor *w3 = tu_random("w", 3, (int[]){2, 64, 63}, false, 18, -1, 1);
    hl_tensor *b = tu_random("b", 1, (int[]){63}, false, 19, -1, 1);
    hl_tensor *b2 = tu_random("b", 2, (int[]){1, 64}, false, 20, -1, 1);
    tu_expect_error(g, hl_linear(g, x, w, NULL),
                    "linear: input (8,16,63) does not match weight (64,64)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_linear(g, x, w3, NULL), "linear", "weight (2,64,63)", "rank 2", NULL);
    hl_graph_reset(g);
    hl_tensor *x64 = tu_random("x", 2, (int[]){3, 64}, false, 21, -1, 1);
    tu_expect_error(g, hl_linear(g, x64, w, b), "linear", "bias (63)", "weight (64,64)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_linear(g, x64, w, b2), "linear", "bias (1,64)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_linear(g, NULL, w, NULL), "linear", "NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_linear(g, x64, w, &g->poison), "linear", "poisoned", NULL);
    /* The error is sticky: a valid call afterwards returns poison too. */
    tu_expect_error(g, hl_linear(g, x64, w, NULL), "linear", "poisoned", NULL);
    hl_tensor_free(x);
    hl_tensor_free(w);
    hl_tensor_free(w3);
    hl_tensor_free(b);
    hl_tensor_free(b2);
    hl_tensor_free(x64);
    hl_graph_free(g);
}
END_TEST

Suite *linear_suite(void)
{
    Suite *s = suite_create("linear");
    TCase *tc = tcase_create("linear");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_linear_forward);
    tcase_add_test(tc, test_linear_gradients);
    tcase_add_test(tc, test_linear_threads);
    tcase_add_test(tc, test_linear_errors);
    tcase_add_test(tc, test_linear_gelu_equals_composed);
    tcase_add_test(tc, test_linear_gelu_gradients_and_threads);
    suite_add_tcase(s, tc);
    return s;
}
