/* Tests for ops/dropout.c: the drop rate, scaling, determinism under a seed,
 * the identity in evaluation, gradients, thread independence and errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

static hl_tensor *build_dropout(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_dropout(g, in[0], *(const hl_real *)ctx);
}

static hl_tensor *build_dropout_eval(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_graph_set_training(g, false);
    return hl_dropout(g, in[0], (hl_real)0.5);
}

START_TEST(test_dropout_rate)
{
    /* 2^17 elements, p = 0.3: the dropped fraction has std
     * sqrt(p(1-p)/n) = 1.27e-3; allow 5 std. */
    const int n = 1 << 17;
    const double p = 0.3, tol = 5 * sqrt(p * (1 - p) / n);
    hl_graph *g = hl_graph_new(0);
    hl_graph_seed(g, 5);
    /* Inputs in [1, 2): an output of 0 can only mean dropped. */
    hl_tensor *x = tu_random("x", 2, (int[]){256, n / 256}, false, 1, 1, 2);
    hl_tensor *y = hl_dropout(g, x, (hl_real)p);
    ck_assert(!hl_graph_failed(g));
    ck_assert(y != x);
    const hl_real scale = (hl_real)(1 / (1 - (double)(hl_real)p));
    size_t dropped = 0;
    for (size_t i = 0; i < x->numel; i++) {
        if (y->data[i] == 0)
            dropped++;
        else
            ck_assert_msg(y->data[i] == x->data[i] * scale, "element %zu: %.9g is not %.9g/(1-p)",
                          i, (double)y->data[i], (double)x->data[i]);
    }
    double frac = (double)dropped / (double)x->numel;
    ck_assert_msg(fabs(frac - p) <= tol, "dropped %.5f, expected %.2f +- %.5f", frac, p, tol);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

/* A copy of dropout(x, p) on a graph seeded with seed (caller frees). */
static hl_real *mask_of(const hl_tensor *x, uint64_t seed, hl_real p)
{
    hl_graph *g = hl_graph_new(0);
    hl_graph_seed(g, seed);
    hl_tensor *y = hl_dropout(g, (hl_tensor *)x, p);
    ck_assert(!hl_graph_failed(g));
    hl_real *copy = malloc(y->numel * sizeof *copy);
    memcpy(copy, y->data, y->numel * sizeof *copy);
    hl_graph_free(g);
    return copy;
}

START_TEST(test_dropout_seeded)
{
    hl_tensor *x = tu_random("x", 2, (int[]){17, 33}, false, 2, 1, 2);
    const size_t bytes = x->numel * sizeof(hl_real);
    hl_real *a = mask_of(x, 7, (hl_real)0.5), *b = mask_of(x, 7, (hl_real)0.5);
    hl_real *c = mask_of(x, 8, (hl_real)0.5);
    ck_assert_msg(memcmp(a, b, bytes) == 0, "same seed, different masks");
    ck_assert_msg(memcmp(a, c, bytes) != 0, "different seeds, same mask");
    /* Two calls on one graph draw different masks: the RNG moves on. */
    hl_graph *g = hl_graph_new(0);
    hl_graph_seed(g, 7);
    hl_tensor *y1 = hl_dropout(g, x, (hl_real)0.5), *y2 = hl_dropout(g, x, (hl_real)0.5);
    ck_assert(!hl_graph_failed(g));
    ck_assert(memcmp(y1->data, a, bytes) == 0);
    ck_assert(memcmp(y2->data, a, bytes) != 0);
    free(a);
    free(b);
    free(c);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_dropout_identity)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 3, (int[]){2, 3, 5}, true, 3, -1, 1);
    /* p = 0 in training, and any p in evaluation: x itself, untouched. */
    ck_assert_ptr_eq(hl_dropout(g, x, 0), x);
    hl_graph_set_training(g, false);
    ck_assert_ptr_eq(hl_dropout(g, x, (hl_real)0.9), x);
    ck_assert(!hl_graph_failed(g));
    ck_assert_uint_eq(g->n_nodes, 0);
    /* Gradients pass through unchanged. */
    tu_gradcheck("dropout (eval)", build_dropout_eval, NULL, &x, 1);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_dropout_gradient)
{
    /* The gradcheck restores the graph's RNG before every evaluation, so each
     * sees the same mask; the gradient is mask/(1-p) and exactly 0 elsewhere. */
    hl_real p = (hl_real)0.4;
    hl_tensor *x = tu_random("x", 3, (int[]){3, 1, 17}, true, 4, -1, 1);
    tu_gradcheck("dropout", build_dropout, &p, &x, 1);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_dropout(g, x, p);
    hl_tensor_zero_grad(x);
    hl_real *ones = malloc(y->numel * sizeof *ones);
    for (size_t i = 0; i < y->numel; i++)
        ones[i] = 1;
    ck_assert_int_eq(hl_graph_backward_from(g, y, ones), HL_OK);
    for (size_t i = 0; i < x->numel; i++)
        ck_assert(x->grad[i] == (y->data[i] == 0 ? 0 : (hl_real)(1 / (1 - (double)p))));
    free(ones);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_dropout_threads)
{
    hl_real p = (hl_real)0.25;
    hl_tensor *x = tu_random("x", 2, (int[]){129, 257}, true, 5, -1, 1);
    tu_check_threads_bitwise("dropout", build_dropout, &p, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_dropout_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 4}, false, 6, -1, 1);
    tu_expect_error(g, hl_dropout(g, x, 1), "dropout", "p 1 ", "[0, 1)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_dropout(g, x, (hl_real)-0.1), "dropout", "p -0.1", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_dropout(g, x, (hl_real)NAN), "dropout", "nan", NULL);
    hl_graph_reset(g);
    /* Checked in evaluation mode too, where p is otherwise unused. */
    hl_graph_set_training(g, false);
    tu_expect_error(g, hl_dropout(g, x, 2), "dropout", "p 2 ", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_dropout(g, NULL, (hl_real)0.1), "dropout", "NULL", NULL);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

Suite *dropout_suite(void)
{
    Suite *s = suite_create("dropout");
    TCase *tc = tcase_create("dropout");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dropout_rate);
    tcase_add_test(tc, test_dropout_seeded);
    tcase_add_test(tc, test_dropout_identity);
    tcase_add_test(tc, test_dropout_gradient);
    tcase_add_test(tc, test_dropout_threads);
    tcase_add_test(tc, test_dropout_errors);
    suite_add_tcase(s, tc);
    return s;
}
