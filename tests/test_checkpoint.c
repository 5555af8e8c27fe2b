/* Tests for io/checkpoint.c: resuming is bitwise the same as running
 * straight through, and bad checkpoints leave the model untouched. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "models/gpt.h"
#include "models/gpt_groups.h"
#include "tests/testutil.h"

typedef struct {
    hl_gpt *model;
    hl_optim *opt;
    hl_graph *g;
    hl_rng data;
} run_state;

/* With muon, Muon on the hidden matrices and AdamW on the rest. */
static void run_make_optim(run_state *r, uint64_t init_seed, bool muon)
{
    hl_gpt_config cfg = {.vocab_in = 9, .vocab_out = 9, .n_ctx = 8, .d_model = 8, .n_heads = 2,
                         .n_layers = 2, .mlp = true, .norm = HL_GPT_NORM_LAYER, .dropout = 0.1,
                         .emb_std = 1};
    hl_error err = {0};
    r->model = hl_gpt_new(&cfg, &err);
    ck_assert_msg(r->model, "%s", err.message);
    hl_rng rng;
    hl_rng_seed(&rng, init_seed);
    hl_gpt_init_weights(r->model, &rng);
    const hl_optim_groups groups = {
        .n = muon ? 2 : 1, .group_of = muon ? hl_gpt_param_group : NULL, .ctx = r->model,
        .cfg = {[HL_GPT_GROUP_OTHER] = {.kind = HL_OPTIM_ADAMW, .lr = 1e-2, .beta1 = 0.9,
                                        .beta2 = 0.98, .eps = 1e-8, .weight_decay = 0.01},
                [HL_GPT_GROUP_HIDDEN] = {.kind = HL_OPTIM_MUON, .lr = 0.02, .momentum = 0.95,
                                         .weight_decay = 0.01}}};
    r->opt = hl_optim_new_groups(r->model->params, &groups, &err);
    ck_assert_msg(r->opt, "%s", err.message);
    r->g = hl_graph_new(0);
    hl_graph_seed(r->g, init_seed + 1);
    hl_rng_seed(&r->data, init_seed + 2);
}

static void run_make(run_state *r, uint64_t init_seed) { run_make_optim(r, init_seed, false); }

static void run_free(run_state *r)
{
    hl_graph_free(r->g);
    hl_optim_free(r->opt);
    hl_gpt_free(r->model);
}

static void train(run_state *r, int from, int to)
{
    const hl_lr_schedule sched = {.warmup_steps = 4};
    for (int step = from; step < to; step++) {
        int32_t tokens[16], targets[16];
        for (int i = 0; i < 16; i++) {
            tokens[i] = (int32_t)hl_rng_below(&r->data, 9);
            targets[i] = (int32_t)hl_rng_below(&r->data, 9);
        }
        hl_params_zero_grad(r->model->params);
        hl_tensor *logits = hl_gpt_forward(r->g, r->model, tokens, 2, 8, NULL);
        ck_assert_int_eq(hl_graph_backward(r->g, hl_cross_entropy(r->g, logits, targets, -1)),
                         HL_OK);
        hl_optim_step(r->opt, hl_lr_scale(&sched, step));
        hl_graph_reset(r->g);
    }
}

static char *temp_path(char *dir)
{
    strcpy(dir, "/tmp/headlab-ckpt-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static char path[128];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    return path;
}

static void resume_is_bitwise_straight_through(bool muon)
{
    run_state straight, first, resumed;
    run_make_optim(&straight, 1, muon);
    train(&straight, 0, 10);

    run_make_optim(&first, 1, muon);
    train(&first, 0, 4);
    char dir[64];
    const char *path = temp_path(dir);
    hl_checkpoint_rng rngs[] = {{"data", &first.data, NULL}, {"dropout", &first.g->rng, NULL}};
    hl_error err = {0};
    ck_assert_msg(hl_checkpoint_save(path, first.model->params, first.opt, 4, rngs, 2, NULL, 0,
                                     &err) == HL_OK,
                  "%s", err.message);

    run_make_optim(&resumed, 77, muon); /* different weights and RNGs until the load */
    int64_t step = -1;
    hl_checkpoint_rng load_rngs[] = {{"data", &resumed.data, NULL},
                                     {"dropout", &resumed.g->rng, NULL}};
    ck_assert_msg(hl_checkpoint_load(path, resumed.model->params, resumed.opt, &step, load_rngs, 2,
                                     &err) == HL_OK,
                  "%s", err.message);
    ck_assert_int_eq(step, 4);
    ck_assert_int_eq(resumed.opt->step, 4);
    train(&resumed, 4, 10);

    size_t n = hl_params_count(straight.model->params);
    ck_assert(memcmp(hl_params_values(straight.model->params),
                     hl_params_values(resumed.model->params), n * sizeof(hl_real)) == 0);
    ck_assert(memcmp(straight.opt->m, resumed.opt->m, n * sizeof(hl_real)) == 0);
    ck_assert(memcmp(straight.opt->v, resumed.opt->v, n * sizeof(hl_real)) == 0);
    /* And not trivially: the first run's weights differ from the final ones. */
    ck_assert(memcmp(hl_params_values(first.model->params),
                     hl_params_values(straight.model->params), n * sizeof(hl_real)) != 0);
    unlink(path);
    rmdir(dir);
    run_free(&straight);
    run_free(&first);
    run_free(&resumed);
}

START_TEST(test_resume_is_bitwise_straight_through) { resume_is_bitwise_straight_through(false); }
END_TEST

/* The same with Muon's groups: its momentum is optim.m of the hidden
 * matrices, which have no optim.v. */
START_TEST(test_resume_muon_is_bitwise_straight_through)
{
    resume_is_bitwise_straight_through(true);
}
END_TEST

/* Another optimizer's state is refused, naming both. */
START_TEST(test_resume_with_another_optimizer)
{
    run_state muon, adamw;
    run_make_optim(&muon, 1, true);
    run_make(&adamw, 2);
    train(&muon, 0, 2);
    char dir[64];
    const char *path = temp_path(dir);
    hl_error err = {0};
    ck_assert_int_eq(hl_checkpoint_save(path, muon.model->params, muon.opt, 2, NULL, 0, NULL, 0,
                                        &err), HL_OK);
    ck_assert_int_eq(hl_checkpoint_load(path, adamw.model->params, adamw.opt, NULL, NULL, 0,
                                        &err), HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "its optimizer state is adamw+muon's, the optimizer is "
                                      "adamw"), "%s", err.message);
    unlink(path);
    rmdir(dir);
    run_free(&muon);
    run_free(&adamw);
}
END_TEST

START_TEST(test_bad_checkpoints_leave_the_model_untouched)
{
    run_state r;
    run_make(&r, 5);
    size_t n = hl_params_count(r.model->params);
    hl_real *before = malloc(n * sizeof *before);
    memcpy(before, hl_params_values(r.model->params), n * sizeof *before);
    hl_error err = {0};
    ck_assert_int_eq(hl_checkpoint_load("/nonexistent/ckpt.safetensors", r.model->params, NULL,
                                        NULL, NULL, 0, &err),
                     HL_ERR_IO);
    hl_error_clear(&err);
    /* A safetensors file that is not a checkpoint. */
    ck_assert_int_eq(hl_checkpoint_load("tests/fixtures/gpt/weights.safetensors", r.model->params,
                                        NULL, NULL, NULL, 0, &err),
                     HL_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.message, "not a headlab checkpoint"));

    /* A checkpoint of a wider model: the first mismatch is named. */
    run_state wide;
    run_make(&wide, 6);
    char dir[64];
    const char *path = temp_path(dir);
    hl_gpt_config cfg = r.model->cfg;
    cfg.d_model = 12;
    hl_gpt *other = hl_gpt_new(&cfg, &err);
    ck_assert_int_eq(hl_checkpoint_save(path, other->params, NULL, 0, NULL, 0, NULL, 0, &err),
                     HL_OK);
    hl_error_clear(&err);
    ck_assert_int_eq(hl_checkpoint_load(path, r.model->params, NULL, NULL, NULL, 0, &err),
                     HL_ERR_SHAPE);
    /* Same rank, other dims: the message gives both shapes. */
    ck_assert_msg(strstr(err.message,
                         "tensor \"tok_emb.weight\" has shape (9,12) in the file, (9,8) in the "
                         "model"),
                  "%s", err.message);
    /* Asking for optimizer state a weights-only file lacks. */
    hl_error_clear(&err);
    ck_assert_int_eq(hl_checkpoint_save(path, wide.model->params, NULL, 0, NULL, 0, NULL, 0, &err),
                     HL_OK);
    ck_assert_int_eq(hl_checkpoint_load(path, r.model->params, r.opt, NULL, NULL, 0, &err),
                     HL_ERR_FORMAT);
    ck_assert(memcmp(before, hl_params_values(r.model->params), n * sizeof *before) == 0);
    unlink(path);
    rmdir(dir);
    free(before);
    hl_gpt_free(other);
    run_free(&wide);
    run_free(&r);
}
END_TEST

/* Rewrites the checkpoint at path with metadata `key` set to value, the
 * tensors and the other keys it may hold (those hl_checkpoint_save writes for
 * one RNG named "data") as they were. */
static void set_metadata(const char *path, const char *key, const char *value)
{
    static const char *const keys[] = {"format", "step", "optim", "rng.data"};
    tu_set_metadata(path, path, keys, 4, key, value);
}

/* Metadata is read as written: digits only for the steps, 64 hex digits of a
 * state the generator can be in for an RNG. Each bad value is refused naming
 * the file and the key, and leaves the model, optimizer and RNG untouched. */
START_TEST(test_metadata_is_read_strictly)
{
    static const struct {
        const char *key, *value, *part;
    } bad[] = {
        {"step", "", "metadata \"step\" is \"\""},
        {"step", "-3", "metadata \"step\" is \"-3\""},
        {"step", "4xyz", "metadata \"step\" is \"4xyz\""},
        {"step", " 4", "metadata \"step\""},
        {"step", "+4", "metadata \"step\""},
        {"step", "99999999999999999999", "metadata \"step\""},
        {"optim", "adamw 4xyz", "metadata \"optim\" is \"adamw 4xyz\""},
        {"optim", "adamw -4", "metadata \"optim\""},
        {"optim", "adamw  4", "metadata \"optim\""},
        {"optim", "adamw", "metadata \"optim\""},
        {"rng.data", "-000000000000001000000000000000100000000000000010000000000000001",
         "metadata \"rng.data\""},
        {"rng.data", "+000000000000001000000000000000100000000000000010000000000000001",
         "metadata \"rng.data\""},
        {"rng.data", "0x00000000000001000000000000000100000000000000010000000000000001",
         "metadata \"rng.data\""},
        {"rng.data", "0000000000000000000000000000000000000000000000000000000000000000",
         "nonzero state"},
    };
    run_state r;
    run_make(&r, 8);
    train(&r, 0, 2);
    char dir[64];
    const char *path = temp_path(dir);
    hl_checkpoint_rng rngs[] = {{"data", &r.data, NULL}};
    hl_error err = {0};
    ck_assert_msg(hl_checkpoint_save(path, r.model->params, r.opt, 2, rngs, 1, NULL, 0, &err) ==
                  HL_OK, "%s", err.message);
    /* The rewrite itself keeps a checkpoint loadable. */
    set_metadata(path, "step", "2");
    int64_t step = -1;
    ck_assert_msg(hl_checkpoint_load(path, r.model->params, r.opt, &step, rngs, 1, &err) == HL_OK,
                  "%s", err.message);
    ck_assert_int_eq(step, 2);
    const size_t n = hl_params_count(r.model->params);
    hl_real *before = malloc(n * sizeof *before);
    memcpy(before, hl_params_values(r.model->params), n * sizeof *before);
    const hl_rng data = r.data;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *key = bad[i].key;
        char saved[128];
        hl_safetensors *f = NULL;
        ck_assert(hl_safetensors_read(path, &f, &err) == HL_OK);
        snprintf(saved, sizeof saved, "%s", hl_safetensors_metadata(f, key));
        hl_safetensors_free(f);
        set_metadata(path, key, bad[i].value);
        hl_error_clear(&err);
        step = -1;
        ck_assert_msg(hl_checkpoint_load(path, r.model->params, r.opt, &step, rngs, 1, &err) ==
                      HL_ERR_FORMAT, "%s=\"%s\" accepted", key, bad[i].value);
        ck_assert_msg(strstr(err.message, path) && strstr(err.message, bad[i].part),
                      "\"%s\" lacks \"%s\"", err.message, bad[i].part);
        ck_assert(step == -1 && r.opt->step == 2 && !memcmp(&r.data, &data, sizeof data));
        ck_assert(!memcmp(before, hl_params_values(r.model->params), n * sizeof *before));
        set_metadata(path, key, saved);
    }
    unlink(path);
    rmdir(dir);
    free(before);
    run_free(&r);
}
END_TEST

/* An optional RNG (found set) may be missing: the load says so and leaves it
 * as it was; when present it loads like any other, and a later entry for the
 * same generator wins. */
START_TEST(test_optional_rng)
{
    run_state r;
    run_make(&r, 11);
    char dir[64];
    const char *path = temp_path(dir);
    hl_rng own, kept;
    hl_rng_seed(&own, 5);
    kept = own;
    hl_error err = {0};
    hl_checkpoint_rng saved[] = {{"data", &r.data, NULL}, {"own", &own, NULL}};
    ck_assert_int_eq(hl_checkpoint_save(path, r.model->params, NULL, 3, saved, 1, NULL, 0, &err),
                     HL_OK);
    hl_rng data = r.data, got;
    hl_rng_seed(&got, 9);
    const hl_rng before = got;
    bool found = true;
    hl_checkpoint_rng load[] = {{"data", &got, NULL}, {"own", &got, &found}};
    ck_assert_msg(hl_checkpoint_load(path, r.model->params, NULL, NULL, load, 2, &err) == HL_OK,
                  "%s", err.message);
    ck_assert(!found && !memcmp(&got, &data, sizeof got) && memcmp(&got, &before, sizeof got));
    ck_assert_int_eq(hl_checkpoint_save(path, r.model->params, NULL, 3, saved, 2, NULL, 0, &err),
                     HL_OK);
    ck_assert_msg(hl_checkpoint_load(path, r.model->params, NULL, NULL, load, 2, &err) == HL_OK,
                  "%s", err.message);
    ck_assert(found && !memcmp(&got, &kept, sizeof got));
    unlink(path);
    rmdir(dir);
    run_free(&r);
}
END_TEST

/* A checkpoint holding a NaN or infinite weight or first moment, or a NaN
 * or negative second moment, is refused, naming the tensor and the element,
 * before anything is taken. An infinite second moment (AdamW's v once a
 * gradient's square overflows) loads. */
START_TEST(test_nonfinite_checkpoint_refused)
{
    run_state r;
    run_make(&r, 10);
    train(&r, 0, 2);
    char dir[64];
    const char *path = temp_path(dir);
    hl_real *w = hl_params_values(r.model->params);
    const size_t n = hl_params_count(r.model->params);
    hl_real *before = malloc(n * sizeof *before);
    memcpy(before, w, n * sizeof *before);
    const hl_tensor *first = hl_params_tensor(r.model->params, 0);
    const hl_tensor *last = hl_params_tensor(r.model->params,
                                             hl_params_n_tensors(r.model->params) - 1);
    hl_real *m3 = &r.opt->m[first->data - w + 3], *v3 = &r.opt->v[first->data - w + 3];
    const struct {
        hl_real *at;
        hl_real value;
        const char *name, *part; /* tensor, message (NULL: loads) */
    } cases[] = {
        {&last->data[last->numel - 1], (hl_real)NAN, last->name, "holds NaN at element %zu"},
        {&last->data[0], (hl_real)-INFINITY, last->name, "holds -infinity at element 0"},
        {m3, (hl_real)INFINITY, "optim.m.", "holds infinity at element 3 (values must be"},
        {v3, (hl_real)NAN, "optim.v.", "holds NaN at element 3 (a second moment is >= 0"},
        {v3, (hl_real)-1, "optim.v.", "holds -1 at element 3 (a second moment is >= 0"},
        {v3, (hl_real)INFINITY, "optim.v.", NULL},
    };
    hl_error err = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const hl_real kept = *cases[c].at;
        *cases[c].at = cases[c].value;
        ck_assert_int_eq(hl_checkpoint_save(path, r.model->params, r.opt, 2, NULL, 0, NULL, 0,
                                            &err), HL_OK);
        *cases[c].at = kept;
        const hl_status st = hl_checkpoint_load(path, r.model->params, r.opt, NULL, NULL, 0, &err);
        if (!cases[c].part) {
            ck_assert_msg(st == HL_OK, "%s", err.message);
            ck_assert(isinf(*v3) && *v3 > 0);
            *v3 = kept;
            continue;
        }
        char part[160];
        snprintf(part, sizeof part, cases[c].part, last->numel - 1);
        ck_assert_int_eq(st, HL_ERR_FORMAT);
        ck_assert_msg(strstr(err.message, path) && strstr(err.message, cases[c].name) &&
                      strstr(err.message, part), "\"%s\" lacks \"%s\"", err.message, part);
        ck_assert(!memcmp(before, w, n * sizeof *before) && r.opt->step == 2);
        hl_error_clear(&err);
    }
    unlink(path);
    rmdir(dir);
    free(before);
    run_free(&r);
}
END_TEST

/* A bigger model's checkpoint (one more layer) holds every tensor of this
 * one, of the right shapes: the tensors left over refuse it. Optimizer state
 * of the model's own tensors is not left over (a weights-only load skips it). */
START_TEST(test_checkpoint_of_a_bigger_model)
{
    run_state r;
    run_make(&r, 9);
    hl_gpt_config cfg = r.model->cfg;
    cfg.n_layers++;
    hl_error err = {0};
    hl_gpt *big = hl_gpt_new(&cfg, &err);
    ck_assert_msg(big, "%s", err.message);
    char dir[64];
    const char *path = temp_path(dir);
    ck_assert_int_eq(hl_checkpoint_save(path, big->params, NULL, 0, NULL, 0, NULL, 0, &err),
                     HL_OK);
    const size_t n = hl_params_count(r.model->params);
    hl_real *before = malloc(n * sizeof *before);
    memcpy(before, hl_params_values(r.model->params), n * sizeof *before);
    ck_assert_int_eq(hl_checkpoint_load(path, r.model->params, NULL, NULL, NULL, 0, &err),
                     HL_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, path) &&
                  strstr(err.message, "tensor \"blocks.2.attn.in_proj_bias\" is not in the model"),
                  "%s", err.message);
    ck_assert(!memcmp(before, hl_params_values(r.model->params), n * sizeof *before));

    /* The model's own checkpoint with optimizer state loads weights only. */
    hl_error_clear(&err);
    ck_assert_int_eq(hl_checkpoint_save(path, r.model->params, r.opt, 0, NULL, 0, NULL, 0, &err),
                     HL_OK);
    ck_assert_msg(hl_checkpoint_load(path, r.model->params, NULL, NULL, NULL, 0, &err) == HL_OK,
                  "%s", err.message);
    unlink(path);
    rmdir(dir);
    free(before);
    hl_gpt_free(big);
    run_free(&r);
}
END_TEST

Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_resume_is_bitwise_straight_through);
    tcase_add_test(tc, test_resume_muon_is_bitwise_straight_through);
    tcase_add_test(tc, test_resume_with_another_optimizer);
    tcase_add_test(tc, test_bad_checkpoints_leave_the_model_untouched);
    tcase_add_test(tc, test_metadata_is_read_strictly);
    tcase_add_test(tc, test_checkpoint_of_a_bigger_model);
    tcase_add_test(tc, test_nonfinite_checkpoint_refused);
    tcase_add_test(tc, test_optional_rng);
    suite_add_tcase(s, tc);
    return s;
}
