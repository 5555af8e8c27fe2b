/* Tests for train/run.c: the run takes every step once with its batch, at
 * the schedule's rate; evaluates at the interval, the extra steps and the
 * end, and not at a resumed run's first step; and stops at the first error,
 * returning it. */
#include <math.h>
#include <string.h>

#include "tests/testutil.h"

typedef struct {
    hl_params *params;
    hl_tensor *w, *x;     /* (3,4), (2,4) */
    int32_t targets[2];
    int batches;          /* batch hook calls */
    int64_t records[16];  /* the steps recorded */
    double record_loss[16];
    int n_records;
    int64_t fail_batch_at, fail_record_at; /* -1: never */
} counting;

static void counting_make(counting *c)
{
    memset(c, 0, sizeof *c);
    c->params = hl_params_new();
    c->w = hl_params_add(c->params, "w", 2, (int[]){3, 4});
    ck_assert_int_eq(hl_params_commit(c->params), HL_OK);
    hl_rng rng;
    hl_rng_seed(&rng, 3);
    hl_init_uniform(c->w, &rng, -1, 1);
    c->x = tu_random("x", 2, (int[]){2, 4}, false, 4, -1, 1);
    c->targets[1] = 2;
    c->fail_batch_at = c->fail_record_at = -1;
}

static void counting_free(counting *c)
{
    hl_tensor_free(c->x);
    hl_params_free(c->params);
}

static hl_status batch(void *ctx, int64_t step, hl_error *err)
{
    counting *c = ctx;
    if (step == c->fail_batch_at)
        return hl_error_set(err, HL_ERR_IO, "batch %lld unreadable", (long long)step);
    c->targets[0] = (int32_t)(step % 3); /* a batch of its own per step */
    c->batches++;
    return HL_OK;
}

static hl_tensor *loss(hl_graph *g, void *ctx)
{
    counting *c = ctx;
    return hl_cross_entropy(g, hl_linear(g, c->x, c->w, NULL), c->targets, -1);
}

static hl_status record(void *ctx, int64_t step, const hl_step_result *last, hl_error *err)
{
    counting *c = ctx;
    if (step == c->fail_record_at)
        return hl_error_set(err, HL_ERR_IO, "cannot write the log");
    ck_assert_int_lt(c->n_records, 16);
    c->record_loss[c->n_records] = last->loss;
    c->records[c->n_records++] = step;
    return HL_OK;
}

static bool at_seven(int64_t step) { return step == 7; }

static hl_status run(counting *c, const hl_run_opts *o, hl_error *err)
{
    hl_optim *opt = hl_optim_new(c->params, &(hl_optim_config){.kind = HL_OPTIM_SGD, .lr = 0.1},
                                 err);
    ck_assert_ptr_nonnull(opt);
    hl_graph *g = hl_graph_new(0);
    const hl_run_hooks h = {.ctx = c, .batch = batch, .loss = loss, .record = record,
                            .evaluate_at = at_seven};
    hl_status s = hl_run_train(g, c->params, opt, o, &h, err);
    hl_graph_free(g);
    hl_optim_free(opt);
    return s;
}

START_TEST(test_steps_and_evaluations)
{
    counting c;
    counting_make(&c);
    hl_error err = {0};
    ck_assert_int_eq(run(&c, &(hl_run_opts){.steps = 12, .eval_every = 5, .lead = true}, &err),
                     HL_OK);
    ck_assert_int_eq(c.batches, 12);
    const int64_t want[] = {0, 5, 7, 10, 12};
    ck_assert_int_eq(c.n_records, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(c.records[i], want[i]);
    ck_assert(isnan(c.record_loss[0])); /* nothing trained yet */
    ck_assert(isfinite(c.record_loss[1]) && c.record_loss[1] > 0);

    /* The same run in two halves, resumed at step 5: the same weights, and
     * no evaluation at the resumed run's first step. */
    counting a, b;
    counting_make(&a);
    counting_make(&b);
    ck_assert_int_eq(run(&a, &(hl_run_opts){.steps = 12, .eval_every = 5, .lead = true}, &err),
                     HL_OK);
    ck_assert_int_eq(run(&b, &(hl_run_opts){.steps = 5, .eval_every = 5, .lead = true}, &err),
                     HL_OK);
    b.n_records = 0;
    ck_assert_int_eq(run(&b, &(hl_run_opts){.start = 5, .steps = 12, .eval_every = 5,
                                            .lead = true}, &err), HL_OK);
    ck_assert_int_eq(b.n_records, 3);
    ck_assert_int_eq(b.records[0], 7);
    ck_assert(memcmp(a.w->data, b.w->data, sizeof(hl_real) * 12) == 0);
    ck_assert(memcmp(a.w->data, c.w->data, sizeof(hl_real) * 12) == 0);

    /* Not the lead rank: steps, no evaluations. */
    counting d;
    counting_make(&d);
    ck_assert_int_eq(run(&d, &(hl_run_opts){.steps = 12, .eval_every = 5}, &err), HL_OK);
    ck_assert_int_eq(d.batches, 12);
    ck_assert_int_eq(d.n_records, 0);
    ck_assert(memcmp(a.w->data, d.w->data, sizeof(hl_real) * 12) == 0);
    counting_free(&a);
    counting_free(&b);
    counting_free(&c);
    counting_free(&d);
}
END_TEST

START_TEST(test_first_error_ends_the_run)
{
    counting c;
    counting_make(&c);
    c.fail_batch_at = 3;
    hl_error err = {0};
    ck_assert_int_eq(run(&c, &(hl_run_opts){.steps = 10, .eval_every = 2, .lead = true}, &err),
                     HL_ERR_IO);
    ck_assert_str_eq(err.message, "batch 3 unreadable");
    ck_assert_int_eq(c.batches, 3);
    ck_assert_int_eq(c.n_records, 2); /* steps 0 and 2 */
    counting_free(&c);

    counting_make(&c);
    c.fail_record_at = 4;
    hl_error_clear(&err);
    ck_assert_int_eq(run(&c, &(hl_run_opts){.steps = 10, .eval_every = 2, .lead = true}, &err),
                     HL_ERR_IO);
    ck_assert_int_eq(c.batches, 4);
    counting_free(&c);

    /* A non-finite loss: the step's own error, the weights of the last good step. */
    counting_make(&c);
    c.x->data[0] = NAN;
    hl_error_clear(&err);
    ck_assert_int_ne(run(&c, &(hl_run_opts){.steps = 10, .eval_every = 2, .lead = true}, &err),
                     HL_OK);
    ck_assert_msg(strstr(err.message, "step 0"), "%s", err.message);
    ck_assert_int_eq(c.batches, 1);
    hl_error_clear(&err);
    ck_assert_int_eq(run(&c, &(hl_run_opts){.start = 11, .steps = 10, .eval_every = 2}, &err),
                     HL_ERR_ARG);
    counting_free(&c);
}
END_TEST

Suite *run_suite(void)
{
    Suite *s = suite_create("run");
    TCase *tc = tcase_create("run");
    tcase_add_test(tc, test_steps_and_evaluations);
    tcase_add_test(tc, test_first_error_ends_the_run);
    suite_add_tcase(s, tc);
    return s;
}
