/* Tests for ops/residual.c and the fused add + norm ops it serves
 * (hl_add_layernorm, hl_add_rmsnorm): the same bits as hl_add followed by the
 * norm, forward and backward, whichever of the two outputs reach the loss;
 * gradients against finite differences; thread independence; errors. */
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

/* How a build function uses the junction: the inputs are a, b, gamma (and
 * beta for LayerNorm); in[1] is left out when the add is a + a. */
typedef enum {
    USE_BOTH,     /* out = norm + 0.7·sum, as a block's norm and the next residual add */
    USE_NORM,     /* out = norm: the sum has no other reader */
    USE_SUM,      /* out = 0.7·sum: the norm's output does not reach the loss */
    USE_SELF_ADD, /* as USE_BOTH on a + a */
    USE_A_AGAIN,  /* as USE_BOTH plus 0.3·a: a's gradient is under way when the junction's
                   * backward runs */
} junction_use;

typedef struct {
    bool rms, fused, retain_sum;
    junction_use use;
} junction;

static hl_tensor *build_junction(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const junction *j = ctx;
    /* a is an intermediate, as the residual stream is, so that backward may
     * hand it the sum's gradient buffer; b is a leaf with its own. */
    hl_tensor *a = hl_scale(g, in[0], (hl_real)1.3);
    hl_tensor *b = j->use == USE_SELF_ADD ? a : in[1];
    hl_tensor *gamma = in[2], *beta = j->rms ? NULL : in[3];
    const hl_real eps = (hl_real)1e-5;
    hl_tensor *sum, *norm;
    if (j->fused) {
        norm = j->rms ? hl_add_rmsnorm(g, a, b, gamma, eps, &sum)
                      : hl_add_layernorm(g, a, b, gamma, beta, eps, &sum);
    } else {
        sum = hl_add(g, a, b);
        norm = j->rms ? hl_rmsnorm(g, sum, gamma, eps) : hl_layernorm(g, sum, gamma, beta, eps);
    }
    if (j->retain_sum)
        hl_tensor_retain_grad(sum);
    switch (j->use) {
    case USE_NORM:
        return norm;
    case USE_SUM:
        return hl_scale(g, sum, (hl_real)0.7);
    case USE_A_AGAIN:
        return hl_add(g, hl_add(g, norm, hl_scale(g, sum, (hl_real)0.7)),
                      hl_scale(g, a, (hl_real)0.3));
    default:
        return hl_add(g, norm, hl_scale(g, sum, (hl_real)0.7));
    }
}

static const char *use_name[] = {"norm + sum", "norm", "sum", "a + a", "a again"};

/* The fused op against the composition, bitwise, on one shape. */
static void check_same_bits(bool rms, int rank, const int *shape, uint64_t seed)
{
    const int cols = shape[rank - 1];
    hl_tensor *a = tu_random("a", rank, shape, true, seed, -2, 2);
    hl_tensor *b = tu_random("b", rank, shape, true, seed + 1, -2, 2);
    hl_tensor *gamma = tu_random("gamma", 1, &cols, true, seed + 2, 0.5, 1.5);
    hl_tensor *beta = tu_random("beta", 1, &cols, true, seed + 3, -1, 1);
    hl_tensor *frozen = tu_random("b", rank, shape, false, seed + 4, -2, 2);
    hl_tensor *in[4] = {a, b, gamma, beta};
    for (int use = USE_BOTH; use <= USE_A_AGAIN; use++)
        for (int variant = 0; variant < 3; variant++) {
            /* variant 1: the sum's gradient retained; 2: b needs no gradient */
            in[1] = variant == 2 ? frozen : b;
            junction j = {.rms = rms, .retain_sum = variant == 1, .use = (junction_use)use};
            size_t n_fused, n_composed;
            j.fused = true;
            hl_real *fused = tu_forward_backward(build_junction, &j, in, rms ? 3 : 4, &n_fused);
            j.fused = false;
            hl_real *composed =
                tu_forward_backward(build_junction, &j, in, rms ? 3 : 4, &n_composed);
            ck_assert_uint_eq(n_fused, n_composed);
            ck_assert_msg(memcmp(fused, composed, n_fused * sizeof *fused) == 0,
                          "add_%s (%s, variant %d, %d columns): fused and composed differ",
                          rms ? "rmsnorm" : "layernorm", use_name[use], variant, cols);
            free(fused);
            free(composed);
        }
    hl_tensor *all[] = {a, b, gamma, beta, frozen};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        hl_tensor_free(all[i]);
}

START_TEST(test_add_norm_equals_composition)
{
    for (int rms = 0; rms <= 1; rms++) {
        check_same_bits(rms, 2, (int[]){3, 17}, 10);
        check_same_bits(rms, 3, (int[]){2, 5, 1}, 20);
        /* Above the parallel threshold, so rows split over a team. */
        check_same_bits(rms, 3, (int[]){4, 64, 130}, 30);
    }
}
END_TEST

/* The sum is handed to a as its gradient: a later reader of a adds to it,
 * and a second backward on a fresh graph gives the same values again. */
START_TEST(test_add_norm_gradients)
{
    const int shape[] = {3, 17}, cols = 17;
    hl_tensor *a = tu_random("a", 2, shape, true, 41, -2, 2);
    hl_tensor *b = tu_random("b", 2, shape, true, 42, -2, 2);
    hl_tensor *gamma = tu_random("gamma", 1, &cols, true, 43, 0.5, 1.5);
    hl_tensor *beta = tu_random("beta", 1, &cols, true, 44, -1, 1);
    hl_tensor *in[4] = {a, b, gamma, beta};
    for (int rms = 0; rms <= 1; rms++)
        for (int use = USE_BOTH; use <= USE_A_AGAIN; use++) {
            junction j = {.rms = rms, .fused = true, .use = (junction_use)use};
            char what[64];
            snprintf(what, sizeof what, "add_%s (%s)", rms ? "rmsnorm" : "layernorm",
                     use_name[use]);
            tu_gradcheck(what, build_junction, &j, in, rms ? 3 : 4);
        }
    hl_tensor *all[] = {a, b, gamma, beta};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        hl_tensor_free(all[i]);
}
END_TEST

START_TEST(test_add_norm_threads)
{
    const int shape[] = {3, 100, 257}, cols = 257;
    hl_tensor *a = tu_random("a", 3, shape, true, 51, -2, 2);
    hl_tensor *b = tu_random("b", 3, shape, true, 52, -2, 2);
    hl_tensor *gamma = tu_random("gamma", 1, &cols, true, 53, 0.5, 1.5);
    hl_tensor *beta = tu_random("beta", 1, &cols, true, 54, -1, 1);
    hl_tensor *in[4] = {a, b, gamma, beta};
    for (int rms = 0; rms <= 1; rms++)
        tu_check_threads_bitwise(rms ? "add_rmsnorm" : "add_layernorm", build_junction,
                                 &(junction){.rms = rms, .fused = true, .use = USE_BOTH}, in,
                                 rms ? 3 : 4);
    hl_tensor *all[] = {a, b, gamma, beta};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        hl_tensor_free(all[i]);
}
END_TEST

START_TEST(test_add_norm_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 2, (int[]){3, 4}, false, 61, -1, 1);
    hl_tensor *y = tu_random("y", 2, (int[]){3, 5}, false, 62, -1, 1);
    hl_tensor *v4 = tu_random("v", 1, (int[]){4}, false, 63, -1, 1);
    hl_tensor *v5 = tu_random("v", 1, (int[]){5}, false, 64, -1, 1);
    const hl_real eps = (hl_real)1e-5;
    hl_tensor *sum = NULL;
    tu_expect_error(g, hl_add_layernorm(g, x, y, v4, v4, eps, &sum), "add_layernorm", "(3,4)",
                    "(3,5)", "same shape", NULL);
    ck_assert(hl_tensor_is_poison(sum));
    hl_graph_reset(g);
    tu_expect_error(g, hl_add_rmsnorm(g, x, v4, v4, eps, &sum), "add_rmsnorm", "(3,4)", "(4)",
                    NULL);
    ck_assert(hl_tensor_is_poison(sum));
    hl_graph_reset(g);
    tu_expect_error(g, hl_add_layernorm(g, x, x, v5, NULL, eps, &sum), "add_layernorm", "gamma",
                    "(5)", NULL);
    ck_assert(hl_tensor_is_poison(sum));
    hl_graph_reset(g);
    tu_expect_error(g, hl_add_rmsnorm(g, x, x, v5, eps, &sum), "add_rmsnorm", "gamma", "(5)",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_add_rmsnorm(g, x, x, NULL, 0, &sum), "add_rmsnorm", "eps", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_add_layernorm(g, NULL, x, NULL, NULL, eps, &sum), "add_layernorm",
                    "NULL", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_add_layernorm(g, x, &g->poison, NULL, NULL, eps, &sum),
                    "add_layernorm", "poisoned", NULL);
    hl_tensor *all[] = {x, y, v4, v5};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        hl_tensor_free(all[i]);
    hl_graph_free(g);
}
END_TEST

Suite *residual_suite(void)
{
    Suite *s = suite_create("residual");
    TCase *tc = tcase_create("residual");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_add_norm_equals_composition);
    tcase_add_test(tc, test_add_norm_gradients);
    tcase_add_test(tc, test_add_norm_threads);
    tcase_add_test(tc, test_add_norm_errors);
    suite_add_tcase(s, tc);
    return s;
}
