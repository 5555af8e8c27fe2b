/* Tests for ops/op_common.c: the input checks every op shares, and the
 * gradient buffers ops write or add to. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

START_TEST(test_uncommitted_parameter_is_an_error)
{
    /* A parameter has no data until hl_params_commit: using it is an error on
     * the graph, not a crash. */
    hl_graph *g = hl_graph_new(0);
    hl_params *p = hl_params_new();
    hl_tensor *w = hl_params_add(p, "fc.weight", 2, (int[]){4, 4});
    hl_tensor *x = tu_random("x", 2, (int[]){3, 4}, false, 1, -1, 1);
    ck_assert_ptr_null(w->data);
    tu_expect_error(g, hl_linear(g, x, w, NULL), "linear: input 1 (fc.weight) has no data",
                    "hl_params_commit", NULL);
    ck_assert_int_eq(hl_graph_status(g), HL_ERR_STATE);
    hl_graph_reset(g);
    const int32_t ids[2] = {0, 1};
    tu_expect_error(g, hl_embedding(g, w, ids, 1, (int[]){2}), "embedding", "fc.weight",
                    "no data", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_add(g, x, w), "add: input 1 (fc.weight) has no data", NULL);
    /* Committed, the same call works. */
    ck_assert_int_eq(hl_params_commit(p), HL_OK);
    hl_graph_reset(g);
    ck_assert(!hl_tensor_is_poison(hl_linear(g, x, w, NULL)));
    hl_tensor_free(x);
    hl_params_free(p);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_null_and_poisoned_inputs)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 1, (int[]){3}, false, 1, -1, 1);
    tu_expect_error(g, hl_add(g, x, NULL), "add: input 1 is NULL", NULL);
    hl_tensor *poison = &g->poison;
    hl_graph_reset(g);
    tu_expect_error(g, hl_scale(g, poison, 2), "scale: input 0 is a poisoned tensor", NULL);
    /* An output's place NULL (they wrote through it); the tensor helpers
     * take NULL as hl_tensor_free does. */
    hl_graph_reset(g);
    hl_tensor *w = tu_random("w", 1, (int[]){3}, false, 1, -1, 1);
    tu_expect_error(g, hl_add_layernorm(g, x, x, w, NULL, (hl_real)1e-5, NULL),
                    "add_layernorm: sum must point to a place", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_add_rmsnorm(g, x, x, w, (hl_real)1e-5, NULL),
                    "add_rmsnorm: sum must point to a place", NULL);
    hl_graph_reset(g);
    hl_tensor *qkv = tu_random("qkv", 3, (int[]){1, 2, 6}, false, 1, -1, 1), *k;
    tu_expect_error(g, hl_qkv_heads(g, qkv, 1, 0, &k, NULL), "qkv_heads: k and v must point",
                    NULL);
    ck_assert(hl_tensor_is_poison(k));
    hl_tensor_fill(NULL, 1);
    hl_tensor_zero_grad(NULL);
    hl_tensor_set_name(NULL, "x");
    hl_tensor_free(qkv);
    hl_tensor_free(w);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

/* The ops whose backward writes an intermediate's first gradient instead of
 * adding it to zeros; each maps (2,3,4,6) to a differentiable output. */
typedef enum {
    FIRST_SCALE,
    FIRST_ADD,
    FIRST_ADD_BROADCAST,
    FIRST_MUL,
    FIRST_MASK,
    FIRST_DROPOUT,
    FIRST_MEAN,
    FIRST_RESHAPE,
    FIRST_PERMUTE,
    FIRST_NARROW,
    FIRST_OPS
} first_op;

static const char *const first_names[FIRST_OPS] = {
    "scale", "add", "add (broadcast b)", "mul", "mask", "dropout",
    "mean",  "reshape", "permute", "narrow"};

static hl_tensor *first_apply(hl_graph *g, first_op op, hl_tensor *h, hl_tensor *c)
{
    switch (op) {
    case FIRST_SCALE:
        return hl_scale(g, h, (hl_real)0.75);
    case FIRST_ADD:
        return hl_add(g, c, h);
    case FIRST_ADD_BROADCAST: /* b (1,1,4,6), a slice of h, summed over a's (2,3) */
        return hl_add(g, c, hl_narrow(g, hl_narrow(g, h, 0, 1, 1), 1, 2, 1));
    case FIRST_MUL:
        return hl_mul(g, h, c);
    case FIRST_MASK:
        return hl_softmax(g, hl_mask_causal(g, h));
    case FIRST_DROPOUT:
        return hl_dropout(g, h, (hl_real)0.5);
    case FIRST_MEAN:
        return hl_mean(g, h);
    case FIRST_RESHAPE:
        return hl_reshape(g, h, 2, (int[]){6, 24});
    case FIRST_PERMUTE:
        return hl_permute(g, h, (int[]){2, 0, 3, 1});
    case FIRST_NARROW:
        return hl_narrow(g, h, 2, 1, 2);
    default:
        return NULL;
    }
}

/* x's gradient through y = op(h) (twice: y = op(h) + op(h)) with h = 1·x an
 * intermediate, on a graph whose arena was left full of NaN. */
static hl_real *first_grad(hl_graph *g, first_op op, hl_tensor *x, hl_tensor *c, bool twice)
{
    hl_tensor *junk = hl_graph_tensor_uninit(g, "junk", 1, (int[]){1 << 16});
    ck_assert(!hl_graph_failed(g));
    for (size_t i = 0; i < junk->numel; i++)
        junk->data[i] = NAN;
    hl_graph_reset(g);
    hl_graph_seed(g, 7);
    hl_tensor_zero_grad(x);
    hl_tensor *h = hl_scale(g, x, 1);
    hl_tensor *y = first_apply(g, op, h, c);
    if (twice) {
        hl_graph_seed(g, 7); /* the same dropout mask for both uses */
        y = hl_add(g, y, first_apply(g, op, h, c));
    }
    hl_tensor *loss = hl_sum(g, hl_mul(g, y, hl_scale(g, y, (hl_real)0.5)));
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
    hl_real *grad = malloc(x->numel * sizeof *grad);
    memcpy(grad, x->grad, x->numel * sizeof *grad);
    return grad;
}

START_TEST(test_first_gradient_overwrites_stale_memory)
{
    /* An op writes its input's first gradient into arena memory nobody zeroed:
     * every element must be written, and a second use must add to the first.
     * With loss Σ y²/2, y = 2·op(h) doubles the gradient of one use, twice. */
    hl_tensor *x = tu_random("x", 4, (int[]){2, 3, 4, 6}, true, 11, -1, 1);
    hl_tensor *c = tu_random("c", 4, (int[]){2, 3, 4, 6}, false, 12, -1, 1);
    hl_graph *g = hl_graph_new(0);
    for (int op = 0; op < FIRST_OPS; op++) {
        hl_real *once = first_grad(g, op, x, c, false);
        hl_real *both = first_grad(g, op, x, c, true);
        size_t nonzero = 0;
        for (size_t i = 0; i < x->numel; i++) {
            ck_assert_msg(isfinite(once[i]), "%s: grad[%zu] = %g: stale memory read",
                          first_names[op], i, (double)once[i]);
            ck_assert_msg(both[i] == 4 * once[i], "%s: grad[%zu] = %.9g used twice, %.9g once",
                          first_names[op], i, (double)both[i], (double)once[i]);
            nonzero += once[i] != 0;
        }
        ck_assert_msg(nonzero > 0, "%s: no gradient reached x", first_names[op]);
        free(once);
        free(both);
    }
    hl_graph_free(g);
    hl_tensor_free(x);
    hl_tensor_free(c);
}
END_TEST

Suite *op_common_suite(void)
{
    Suite *s = suite_create("op_common");
    TCase *tc = tcase_create("op_common");
    tcase_add_test(tc, test_uncommitted_parameter_is_an_error);
    tcase_add_test(tc, test_null_and_poisoned_inputs);
    tcase_add_test(tc, test_first_gradient_overwrites_stale_memory);
    suite_add_tcase(s, tc);
    return s;
}
