/* Tests for train/step.c: one training step updates the weights as the
 * optimizer says, and a non-finite loss or gradient stops it with a message
 * naming the step and the first op that went bad, the weights untouched. */
#include <math.h>
#include <string.h>

#include "tests/testutil.h"

typedef struct {
    hl_params *params;
    hl_tensor *w;     /* (3,4) */
    hl_tensor *x;     /* (2,4), no grad */
    int32_t targets[2];
} tiny;

static void tiny_make(tiny *t)
{
    t->params = hl_params_new();
    t->w = hl_params_add(t->params, "w", 2, (int[]){3, 4});
    ck_assert_int_eq(hl_params_commit(t->params), HL_OK);
    hl_rng rng;
    hl_rng_seed(&rng, 3);
    hl_init_uniform(t->w, &rng, -1, 1);
    t->x = tu_random("x", 2, (int[]){2, 4}, false, 4, -1, 1);
    t->targets[0] = 2;
    t->targets[1] = 0;
}

static void tiny_free(tiny *t)
{
    hl_tensor_free(t->x);
    hl_params_free(t->params);
}

static hl_tensor *tiny_loss(hl_graph *g, void *ctx)
{
    tiny *t = ctx;
    return hl_cross_entropy(g, hl_linear(g, t->x, t->w, NULL), t->targets, -1);
}

START_TEST(test_step_sgd)
{
    tiny t;
    tiny_make(&t);
    hl_error err = {0};
    hl_optim *opt = hl_optim_new(t.params, &(hl_optim_config){.kind = HL_OPTIM_SGD, .lr = 0.5},
                                 &err);
    ck_assert_ptr_nonnull(opt);
    hl_graph *g = hl_graph_new(0);
    /* The expected update, by one forward and backward done by hand. */
    hl_params_zero_grad(t.params);
    hl_tensor *loss = tiny_loss(g, &t);
    ck_assert_int_eq(hl_graph_backward(g, loss), HL_OK);
    double want_loss = loss->data[0], norm = 0;
    hl_real before[12], want[12];
    for (int i = 0; i < 12; i++) {
        before[i] = t.w->data[i];
        want[i] = t.w->data[i] - (hl_real)0.5 * t.w->grad[i];
        norm += (double)t.w->grad[i] * t.w->grad[i];
    }
    hl_graph_reset(g);
    hl_step_result r;
    hl_step one = {.index = 0, .lr_scale = 1, .clip = 0};
    ck_assert_int_eq(hl_train_step(g, t.params, opt, &one, tiny_loss, &t, &r, &err), HL_OK);
    ck_assert(fabs(r.loss - want_loss) < 1e-12);
    ck_assert(fabs(r.grad_norm - sqrt(norm)) < 1e-5);
    tu_assert_close("w after one step", t.w->data, want, 12, 1e-6);
    ck_assert(t.w->data[0] != before[0]);
    ck_assert_int_eq(g->n_nodes, 0); /* the graph was reset for the next step */
    hl_graph_free(g);
    hl_optim_free(opt);
    tiny_free(&t);
}
END_TEST

START_TEST(test_step_refuses_non_finite)
{
    tiny t;
    tiny_make(&t);
    hl_error err = {0};
    hl_optim *opt = hl_optim_new(t.params, &(hl_optim_config){.kind = HL_OPTIM_SGD, .lr = 0.5},
                                 &err);
    hl_graph *g = hl_graph_new(0);
    t.w->data[5] = (hl_real)NAN; /* a bad weight */
    hl_real before[12];
    memcpy(before, t.w->data, sizeof before);
    hl_step_result r;
    hl_step one = {.index = 41, .lr_scale = 1, .clip = 1};
    ck_assert_int_eq(hl_train_step(g, t.params, opt, &one, tiny_loss, &t, &r, &err),
                     HL_ERR_NUMERIC);
    ck_assert_msg(strstr(err.message, "step 41") && strstr(err.message, "linear"), "%s",
                  err.message);
    ck_assert(memcmp(before, t.w->data, sizeof before) == 0); /* not updated */
    /* A non-finite input: the loss is NaN, the first op to show it is linear. */
    t.w->data[5] = 0;
    t.x->data[1] = (hl_real)INFINITY;
    hl_error again = {0};
    ck_assert_int_eq(hl_train_step(g, t.params, opt, &one, tiny_loss, &t, &r, &again),
                     HL_ERR_NUMERIC);
    ck_assert_msg(strstr(again.message, "the loss is"), "%s", again.message);
    hl_graph_free(g);
    hl_optim_free(opt);
    tiny_free(&t);
}
END_TEST

Suite *step_suite(void)
{
    Suite *s = suite_create("step");
    TCase *tc = tcase_create("step");
    tcase_add_test(tc, test_step_sgd);
    tcase_add_test(tc, test_step_refuses_non_finite);
    suite_add_tcase(s, tc);
    return s;
}
