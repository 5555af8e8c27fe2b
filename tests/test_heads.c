/* Tests for analysis/heads.c and analysis/prune.c, and for the heads program:
 * pruning equals gating, pruned models round-trip through their files, zero
 * and mean ablation equal the same thing done by hand, importance equals a
 * finite-difference derivative by the gate, and the program's outputs and
 * its answers to bad input. HL_BUILD_DIR names the folder of the programs. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "analysis/heads.h"
#include "tests/testutil.h"

/* A text every Debian system has, for the small charlm models. */
#define GPL_TEXT "/usr/share/common-licenses/GPL-3"

#ifndef HL_BUILD_DIR
#define HL_BUILD_DIR "build"
#endif

#ifdef HL_REAL_DOUBLE
#define TOL 1e-10
#else
#define TOL 1e-5
#endif

/* ---- a tiny model and data ---------------------------------------------- */

enum { VOCAB_IN = 11, VOCAB_OUT = 9, CTX = 7, D_MODEL = 12, N_HEADS = 3, HEAD_DIM = 4 };

static hl_gpt *tiny_model(uint64_t seed)
{
    hl_gpt_config cfg = {.vocab_in = VOCAB_IN, .vocab_out = VOCAB_OUT, .n_ctx = CTX,
                         .d_model = D_MODEL, .n_heads = N_HEADS, .n_layers = 2, .mlp = true,
                         .norm = HL_GPT_NORM_LAYER, .emb_std = 1.0};
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    hl_gpt_init_weights(m, &rng);
    return m;
}

/* n random sequences of T tokens with `groups` target groups; about one
 * target in four is ignored. */
static hl_eval_set *random_set(int n, int T, int groups, int batch, uint64_t seed)
{
    hl_error err = {0};
    hl_eval_set *set = hl_eval_set_new(n, T, groups, batch, &err);
    ck_assert_msg(set, "%s", err.message);
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    for (int i = 0; i < n * T; i++) {
        set->tokens[i] = (int32_t)hl_rng_below(&rng, VOCAB_IN);
        for (int k = 0; k < groups; k++)
            set->targets[k][i] = hl_rng_below(&rng, 4) == 0 ? HL_EVAL_IGNORE
                                                             : (int32_t)hl_rng_below(&rng, VOCAB_OUT);
    }
    return set;
}

/* Parameters (hl_params_count also counts the alignment padding). */
static size_t n_values(const hl_gpt *m)
{
    size_t n = 0;
    for (size_t i = 0; i < hl_params_n_tensors(m->params); i++)
        n += hl_params_tensor(m->params, i)->numel;
    return n;
}

/* The logits of every sequence of the set in one forward pass, copied. */
static double *all_logits_run(const hl_gpt *m, const hl_eval_set *set, const hl_gpt_run *run)
{
    hl_graph *g = hl_graph_new(0);
    hl_graph_set_grad_enabled(g, false);
    hl_tensor *y = hl_gpt_forward(g, m, set->tokens, set->n, set->T, run);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    double *out = malloc(y->numel * sizeof *out);
    for (size_t i = 0; i < y->numel; i++)
        out[i] = y->data[i];
    hl_graph_free(g);
    return out;
}

static void expect_close(const char *what, const double *a, const double *b, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(a[i] - b[i]) <= tol, "%s[%zu]: %.12g vs %.12g", what, i, a[i], b[i]);
}

/* Group losses and accuracies computed in one pass over the whole set, as
 * the definition says: mean cross-entropy and argmax hits over the targets. */
static void by_hand(const hl_gpt *m, const hl_eval_set *set, const hl_gpt_run *run,
                    hl_eval_result *r)
{
    hl_graph *g = hl_graph_new(0);
    hl_graph_set_grad_enabled(g, false);
    hl_tensor *logits = hl_gpt_forward(g, m, set->tokens, set->n, set->T, run);
    memset(r, 0, sizeof *r);
    for (int k = 0; k < set->n_groups; k++) {
        hl_tensor *ce = hl_cross_entropy(g, logits, set->targets[k], HL_EVAL_IGNORE);
        ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
        int hits = 0, count = 0;
        for (int p = 0; p < set->n * set->T; p++) {
            if (set->targets[k][p] == HL_EVAL_IGNORE)
                continue;
            const hl_real *row = logits->data + (size_t)p * VOCAB_OUT;
            int best = 0;
            for (int v = 1; v < VOCAB_OUT; v++)
                best = row[v] > row[best] ? v : best;
            hits += best == set->targets[k][p];
            count++;
        }
        r->loss[k] = ce->data[0];
        r->accuracy[k] = (double)hits / count;
        r->total_loss += r->loss[k];
    }
    hl_graph_free(g);
}

static void expect_results_close(const hl_eval_result *a, const hl_eval_result *b, int groups)
{
    for (int k = 0; k < groups; k++) {
        ck_assert_msg(fabs(a->loss[k] - b->loss[k]) <= TOL, "group %d loss %.12g vs %.12g", k,
                      a->loss[k], b->loss[k]);
        ck_assert_msg(fabs(a->accuracy[k] - b->accuracy[k]) < 1e-12, "group %d accuracy", k);
    }
}

static double *all_logits(const hl_gpt *m, const hl_eval_set *set)
{
    return all_logits_run(m, set, NULL);
}

/* A run gating the heads of both layers as given (free with free_run). */
static hl_gpt_run gates_run(const double *layer0, const double *layer1)
{
    hl_gpt_run run = {0};
    for (int l = 0; l < 2; l++) {
        run.gate[l] = hl_tensor_new("gate", 1, (int[]){N_HEADS}, false);
        for (int h = 0; h < N_HEADS; h++)
            run.gate[l]->data[h] = (hl_real)(l ? layer1 : layer0)[h];
    }
    return run;
}

static void free_run(hl_gpt_run *run)
{
    for (int l = 0; l < 2; l++)
        hl_tensor_free(run->gate[l]);
}

/* The logits with the heads of both layers gated as given. */
static double *gated_logits(const hl_gpt *m, const hl_eval_set *set, const double *layer0,
                            const double *layer1)
{
    hl_gpt_run run = gates_run(layer0, layer1);
    double *out = all_logits_run(m, set, &run);
    free_run(&run);
    return out;
}

/* Every weight, to show a function left the model as it was. */
static double weights_checksum(const hl_gpt *m)
{
    const hl_real *v = hl_params_values(m->params);
    double sum = 0;
    for (size_t i = 0; i < hl_params_count(m->params); i++)
        sum += (double)v[i] * (double)(i % 7 + 1);
    return sum;
}

/* The importance ranking: highest first, ties in layer and head order, NaN
 * last, a pruned layer's missing heads left out. */
START_TEST(test_importance_order)
{
    const hl_gpt_config c = {.n_layers = 3, .n_heads = 3, .layer_heads = {3, 2, 3}};
    const double norm[9] = {0.5, 0.9, 0.5, NAN, 0.9, NAN, 0.1, NAN, 0.5};
    int order[9];
    ck_assert_int_eq(hl_heads_importance_order(&c, norm, order), 8);
    const int want[8] = {1, 4, 0, 2, 8, 6, 3, 7};
    for (int i = 0; i < 8; i++)
        ck_assert_msg(order[i] == want[i], "place %d: head %d, expected %d", i, order[i],
                      want[i]);
}
END_TEST

/* ---- pruning ---------------------------------------------------------------- */

START_TEST(test_prune_equals_gating)
{
    hl_gpt *m = tiny_model(1);
    hl_eval_set *set = random_set(5, CTX, 1, 5, 2);
    const size_t V = (size_t)set->n * CTX * VOCAB_OUT;
    hl_head_set remove = {0}, pruned = {0};
    remove.on[0][1] = remove.on[1][0] = remove.on[1][2] = true;
    hl_error err = {0};
    hl_gpt *p = hl_prune_heads(m, &remove, &pruned, &err);
    ck_assert_msg(p, "%s", err.message);

    const hl_mha *a0 = &p->blocks[0].attn, *a1 = &p->blocks[1].attn;
    ck_assert_int_eq(hl_gpt_layer_heads(&p->cfg, 0), 2);
    ck_assert_int_eq(hl_gpt_layer_heads(&p->cfg, 1), 1);
    ck_assert_int_eq(a0->in_proj_weight->shape[0], 3 * 2 * HEAD_DIM);
    ck_assert_int_eq(a0->in_proj_bias->shape[0], 3 * 2 * HEAD_DIM);
    ck_assert_int_eq(a0->out_proj_weight->shape[1], 2 * HEAD_DIM);
    ck_assert_int_eq(a1->in_proj_weight->shape[0], 3 * HEAD_DIM);
    ck_assert_int_eq(a1->out_proj_weight->shape[1], HEAD_DIM);
    const size_t per_head = 3 * HEAD_DIM * D_MODEL + 3 * HEAD_DIM + D_MODEL * HEAD_DIM;
    ck_assert_uint_eq(n_values(p), n_values(m) - 3 * per_head);
    ck_assert(pruned.on[0][1] && pruned.on[1][0] && pruned.on[1][2]);
    ck_assert_int_eq(hl_head_set_count(&pruned), 3);
    /* The source is untouched. */
    ck_assert_int_eq(m->blocks[0].attn.in_proj_weight->shape[0], 3 * D_MODEL);

    double *gated = gated_logits(m, set, (double[]){1, 0, 1}, (double[]){0, 1, 0});
    double *small = all_logits(p, set);
    expect_close("pruned vs gated logits", small, gated, V, TOL);
    free(gated);
    free(small);

    /* Pruning the pruned model: current head 0 of layer 0 is original head 0,
     * and the record gathers original indices. */
    hl_head_set again = {0};
    again.on[0][0] = true;
    hl_gpt *q = hl_prune_heads(p, &again, &pruned, &err);
    ck_assert_msg(q, "%s", err.message);
    char text[64];
    hl_pruned_heads_format(&pruned, &q->cfg, text, sizeof text);
    ck_assert_str_eq(text, "0:0,1;1:0,2");
    ck_assert_int_eq(hl_head_original(&pruned, N_HEADS, 0, 0), 2);
    ck_assert_int_eq(hl_head_original(&pruned, N_HEADS, 1, 0), 1);
    ck_assert_int_eq(hl_head_original(&pruned, N_HEADS, 1, 1), -1);
    ck_assert_int_eq(hl_head_current(&pruned, N_HEADS, 0, 2), 0);
    ck_assert_int_eq(hl_head_current(&pruned, N_HEADS, 0, 1), -1);
    gated = gated_logits(m, set, (double[]){0, 0, 1}, (double[]){0, 1, 0});
    small = all_logits(q, set);
    expect_close("twice-pruned vs gated logits", small, gated, V, TOL);
    free(gated);
    free(small);
    hl_gpt_free(q);
    hl_gpt_free(p);
    hl_gpt_free(m);
    hl_eval_set_free(set);
}
END_TEST

START_TEST(test_pruned_model_round_trip)
{
    char dir[] = "/tmp/hl_heads_XXXXXX", path[96];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/pruned.safetensors", dir);
    hl_gpt *m = tiny_model(3);
    hl_gpt_meta meta = {.task = "toy_heads", .step = 42};
    hl_head_set remove = {0};
    remove.on[0][2] = remove.on[1][1] = true;
    hl_error err = {0};
    hl_gpt *p = hl_prune_heads(m, &remove, &meta.pruned, &err);
    ck_assert_msg(p && hl_gpt_save_meta(path, p, &meta, &err) == HL_OK, "%s", err.message);

    hl_gpt_meta back;
    hl_gpt *r = hl_gpt_load_meta(path, &back, &err);
    ck_assert_msg(r, "%s", err.message);
    ck_assert_str_eq(back.task, "toy_heads");
    ck_assert_int_eq(back.step, 42);
    ck_assert(!memcmp(&back.pruned, &meta.pruned, sizeof back.pruned));
    ck_assert_int_eq(hl_params_n_tensors(r->params), hl_params_n_tensors(p->params));
    for (size_t i = 0; i < hl_params_n_tensors(p->params); i++) {
        const hl_tensor *a = hl_params_tensor(p->params, i), *b = hl_params_tensor(r->params, i);
        ck_assert_str_eq(a->name, b->name);
        ck_assert_msg(hl_tensor_same_shape(a, b), "%s", a->name);
        ck_assert_msg(!memcmp(a->data, b->data, a->numel * sizeof(hl_real)), "%s", a->name);
    }
    ck_assert_int_eq(r->blocks[0].attn.in_proj_weight->shape[0], 3 * 2 * HEAD_DIM);
    hl_safetensors *f = NULL;
    ck_assert_int_eq(hl_safetensors_read(path, &f, &err), HL_OK);
    ck_assert_str_eq(hl_safetensors_metadata(f, "pruned_heads"), "0:2;1:1");
    hl_safetensors_free(f);
    /* The plain loader reads it too, with the pruned shapes. */
    hl_gpt *plain = hl_gpt_load(path, &err);
    ck_assert_msg(plain, "%s", err.message);
    ck_assert_int_eq(plain->blocks[1].attn.out_proj_weight->shape[1], 2 * HEAD_DIM);
    /* Both loaders and the pruned model know each head's index as trained. */
    for (const hl_gpt *x = p; x; x = x == p ? r : x == r ? plain : NULL) {
        ck_assert_int_eq(x->head_original[0][1], 1);
        ck_assert_int_eq(x->head_original[1][1], 2);
        ck_assert_int_eq(hl_gpt_head_current(x, 1, 2), 1);
        ck_assert_int_eq(hl_gpt_head_current(x, 1, 1), -1);
        ck_assert_int_eq(hl_gpt_head_current(x, 0, 2), -1);
        ck_assert_int_eq(hl_gpt_head_current(x, 1, 0), 0);
        ck_assert_int_eq(hl_gpt_head_current(x, 2, 0), -1);
    }
    hl_gpt_free(plain);
    hl_gpt_free(r);
    hl_gpt_free(p);

    /* A record that does not match the config is refused, naming the file. */
    hl_gpt_meta wrong = {.task = "toy_heads"};
    wrong.pruned.on[0][0] = true;
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &wrong, &err), HL_OK);
    ck_assert_ptr_null(hl_gpt_load_meta(path, &back, &err));
    ck_assert_ptr_nonnull(strstr(err.message, path));
    ck_assert_ptr_nonnull(strstr(err.message, "recorded as pruned"));
    hl_gpt_free(m);
    unlink(path);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(test_prune_errors)
{
    hl_gpt *m = tiny_model(4);
    static const struct {
        int layer, head;
        const char *fragment;
    } cases[] = {{0, 3, "layer 0 has no head 3"}, {2, 0, "no layer 2"}, {1, -1, "every head of layer 1"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hl_head_set remove = {0};
        if (cases[i].head >= 0)
            remove.on[cases[i].layer][cases[i].head] = true;
        else
            for (int h = 0; h < N_HEADS; h++)
                remove.on[cases[i].layer][h] = true;
        hl_error err = {0};
        ck_assert_ptr_null(hl_prune_heads(m, &remove, NULL, &err));
        ck_assert_int_eq(err.status, HL_ERR_ARG);
        ck_assert_msg(strstr(err.message, cases[i].fragment), "\"%s\" lacks \"%s\"", err.message,
                      cases[i].fragment);
    }
    /* A pruning record that does not belong to the model. */
    hl_head_set remove = {0}, record = {0};
    remove.on[0][0] = record.on[1][1] = true;
    hl_error err = {0};
    ck_assert_ptr_null(hl_prune_heads(m, &remove, &record, &err));
    ck_assert_ptr_nonnull(strstr(err.message, "pruning record"));

    /* The record's text: what parses, and what does not. */
    hl_gpt_config cfg = m->cfg;
    cfg.layer_heads[0] = 2;
    hl_head_set parsed;
    ck_assert_int_eq(hl_pruned_heads_parse("0:1;1:", &cfg, &parsed, &err), HL_OK);
    ck_assert(parsed.on[0][1] && hl_head_set_count(&parsed) == 1);
    static const char *const bad[] = {"0:1;1:0", "0:5;1:", "1:;0:1", "0:1,1;1:", "0:1,;1:",
                                      "0:1", "0:1;1:;2:", "0:x;1:", "", NULL};
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        hl_error_clear(&err);
        ck_assert_msg(hl_pruned_heads_parse(bad[i], &cfg, &parsed, &err) == HL_ERR_FORMAT,
                      "\"%s\" was accepted", bad[i] ? bad[i] : "(none)");
    }
    hl_gpt_free(m);
}
END_TEST

/* ---- ablation --------------------------------------------------------------- */

START_TEST(test_zero_ablation)
{
    hl_gpt *m = tiny_model(5);
    hl_eval_set *set = random_set(6, CTX, 2, 4, 6); /* batches of 4 and 2 */
    hl_error err = {0};
    hl_eval_result base, hand, zero;
    const double weights = weights_checksum(m);
    ck_assert_msg(hl_heads_evaluate(m, set, NULL, NULL, &base, &err) == HL_OK, "%s", err.message);
    by_hand(m, set, NULL, &hand);
    expect_results_close(&base, &hand, 2);

    hl_head_set off = {0};
    off.on[1][2] = off.on[0][0] = true;
    ck_assert_int_eq(hl_heads_evaluate(m, set, &off, NULL, &zero, &err), HL_OK);
    ck_assert(weights_checksum(m) == weights);
    hl_gpt_run run = gates_run((double[]){0, 1, 1}, (double[]){1, 1, 0});
    by_hand(m, set, &run, &hand);
    free_run(&run);
    expect_results_close(&zero, &hand, 2);
    ck_assert(fabs(zero.loss[0] - base.loss[0]) > 1e-3);

    /* A head whose output columns of W_O are zero contributes nothing, so
     * zeroing it changes nothing. */
    hl_tensor *wo = m->blocks[0].attn.out_proj_weight;
    for (int o = 0; o < D_MODEL; o++)
        for (int d = 0; d < HEAD_DIM; d++)
            wo->data[o * D_MODEL + 1 * HEAD_DIM + d] = 0;
    hl_head_set silent = {0};
    silent.on[0][1] = true;
    ck_assert_int_eq(hl_heads_evaluate(m, set, NULL, NULL, &base, &err), HL_OK);
    ck_assert_int_eq(hl_heads_evaluate(m, set, &silent, NULL, &zero, &err), HL_OK);
    expect_results_close(&zero, &base, 2);

    /* A head that does not exist. */
    hl_head_set none = {0};
    none.on[1][3] = true;
    ck_assert_int_eq(hl_heads_evaluate(m, set, &none, NULL, &zero, &err), HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "layer 1 has no head 3"));
    hl_gpt_free(m);
    hl_eval_set_free(set);
}
END_TEST

START_TEST(test_mean_ablation)
{
    hl_gpt *m = tiny_model(7);
    hl_eval_set *set = random_set(6, CTX, 2, 4, 8);
    hl_error err = {0};
    hl_head_means means;
    ck_assert_msg(hl_heads_mean_outputs(m, set, &means, &err) == HL_OK, "%s", err.message);
    ck_assert_int_eq(means.n_layers, 2);

    /* The means by hand: every sequence's head outputs in one pass, averaged. */
    hl_graph *g = hl_graph_new(0);
    hl_graph_set_grad_enabled(g, false);
    hl_mha_trace trace[2];
    hl_gpt_forward(g, m, set->tokens, set->n, CTX, &(hl_gpt_run){.trace = trace});
    const size_t per_seq = (size_t)N_HEADS * CTX * HEAD_DIM;
    for (int l = 0; l < 2; l++) {
        ck_assert_int_eq(means.layer[l]->numel, per_seq);
        for (size_t i = 0; i < per_seq; i++) {
            double sum = 0;
            for (int b = 0; b < set->n; b++)
                sum += trace[l].heads->data[b * per_seq + i];
            ck_assert_msg(fabs(sum / set->n - means.layer[l]->data[i]) <= TOL, "mean %d %zu", l, i);
        }
    }
    hl_graph_free(g);

    /* Mean ablation of head 2 of layer 1 = gate 0 plus that head's mean, by hand. */
    hl_head_set off = {0};
    off.on[1][2] = true;
    hl_eval_result mean, hand, base;
    ck_assert_int_eq(hl_heads_evaluate(m, set, &off, &means, &mean, &err), HL_OK);
    hl_tensor *offset = hl_tensor_new("offset", 3, (int[]){N_HEADS, CTX, HEAD_DIM}, false);
    memcpy(offset->data + 2 * CTX * HEAD_DIM, means.layer[1]->data + 2 * CTX * HEAD_DIM,
           CTX * HEAD_DIM * sizeof(hl_real));
    hl_gpt_run run = gates_run((double[]){1, 1, 1}, (double[]){1, 1, 0});
    run.head_offset[1] = offset;
    by_hand(m, set, &run, &hand);
    free_run(&run);
    expect_results_close(&mean, &hand, 2);
    ck_assert_int_eq(hl_heads_evaluate(m, set, NULL, NULL, &base, &err), HL_OK);
    ck_assert(fabs(mean.loss[0] - base.loss[0]) > 1e-4);
    hl_tensor_free(offset);

    /* Means measured on another sequence length do not fit. */
    hl_eval_set *shorter = random_set(3, CTX - 2, 2, 3, 9);
    ck_assert_int_eq(hl_heads_evaluate(m, shorter, &off, &means, &mean, &err), HL_ERR_SHAPE);
    hl_heads_means_free(&means);
    hl_eval_set_free(shorter);

    /* On one sequence the mean is the head's own output: mean ablation
     * changes nothing, zero ablation does. */
    hl_eval_set *one = random_set(1, CTX, 2, 1, 10);
    hl_eval_result zero;
    off.on[0][1] = true;
    ck_assert_int_eq(hl_heads_mean_outputs(m, one, &means, &err), HL_OK);
    ck_assert_int_eq(hl_heads_evaluate(m, one, NULL, NULL, &base, &err), HL_OK);
    ck_assert_int_eq(hl_heads_evaluate(m, one, &off, &means, &mean, &err), HL_OK);
    ck_assert_int_eq(hl_heads_evaluate(m, one, &off, NULL, &zero, &err), HL_OK);
    expect_results_close(&mean, &base, 2);
    ck_assert(fabs(zero.loss[0] - base.loss[0]) > 1e-4);
    hl_heads_means_free(&means);
    hl_eval_set_free(one);
    hl_gpt_free(m);
    hl_eval_set_free(set);
}
END_TEST

/* ---- importance ------------------------------------------------------------ */

START_TEST(test_importance_is_gate_derivative)
{
    hl_gpt *m = tiny_model(11);
    /* Louder heads: gate derivatives well above the float build's
     * finite-difference noise. */
    for (int l = 0; l < 2; l++) {
        hl_tensor *wo = m->blocks[l].attn.out_proj_weight;
        for (size_t i = 0; i < wo->numel; i++)
            wo->data[i] *= 8;
    }
    hl_eval_set *set = random_set(4, CTX, 2, 4, 12); /* one batch */
    double raw[2 * N_HEADS], norm[2 * N_HEADS];
    hl_error err = {0};
    const double weights = weights_checksum(m);
    ck_assert_msg(hl_heads_importance(m, set, raw, norm, &err) == HL_OK, "%s", err.message);
    ck_assert(weights_checksum(m) == weights);
    for (size_t i = 0; i < hl_params_count(m->params); i++)
        ck_assert(hl_params_grads(m->params)[i] == 0);
#ifdef HL_REAL_DOUBLE
    const double eps = 1e-6, atol = 1e-9, rtol = 1e-6;
#else
    const double eps = 1e-2, atol = 5e-5, rtol = 2e-3;
#endif
    double largest = 0;
    for (int l = 0; l < 2; l++) {
        double sq = 0;
        for (int h = 0; h < N_HEADS; h++) {
            hl_eval_result up, down;
            hl_gpt_run run = gates_run((double[]){1, 1, 1}, (double[]){1, 1, 1});
            run.gate[l]->data[h] = (hl_real)(1 + eps);
            ck_assert_int_eq(hl_eval_loss(m, set, &run, NULL, NULL, &up, &err), HL_OK);
            run.gate[l]->data[h] = (hl_real)(1 - eps);
            ck_assert_int_eq(hl_eval_loss(m, set, &run, NULL, NULL, &down, &err), HL_OK);
            free_run(&run);
            double fd = fabs((up.total_loss - down.total_loss) / (2 * eps));
            double got = raw[l * N_HEADS + h];
            ck_assert_msg(fabs(got - fd) <= atol + rtol * fd, "L%dH%d: |dL/dg| %.9g, finite "
                          "difference %.9g", l, h, got, fd);
            largest = fmax(largest, got);
            sq += norm[l * N_HEADS + h] * norm[l * N_HEADS + h];
        }
        ck_assert(fabs(sq - 1) < 1e-12); /* unit L2 norm per layer */
    }
    ck_assert(largest > 100 * atol); /* the comparison was not between zeros */

    /* Several batches: the batch-size-weighted mean of each batch's |dL/dg|. */
    hl_eval_set *five = random_set(5, CTX, 2, 2, 13); /* batches of 2, 2, 1 */
    double whole[2 * N_HEADS], want[2 * N_HEADS] = {0};
    ck_assert_int_eq(hl_heads_importance(m, five, whole, NULL, &err), HL_OK);
    for (int first = 0; first < 5; first += 2) {
        int B = first + 2 <= 5 ? 2 : 1;
        hl_eval_set *part = hl_eval_set_new(B, CTX, 2, B, &err);
        memcpy(part->tokens, five->tokens + first * CTX, B * CTX * sizeof(int32_t));
        for (int k = 0; k < 2; k++)
            memcpy(part->targets[k], five->targets[k] + first * CTX, B * CTX * sizeof(int32_t));
        double one[2 * N_HEADS];
        ck_assert_int_eq(hl_heads_importance(m, part, one, NULL, &err), HL_OK);
        for (int i = 0; i < 2 * N_HEADS; i++)
            want[i] += one[i] * B / 5;
        hl_eval_set_free(part);
    }
    expect_close("multi-batch importance", whole, want, 2 * N_HEADS, 1e-12);

    /* A pruned layer: entries past its heads are NaN. */
    hl_head_set remove = {0};
    remove.on[1][0] = true;
    hl_gpt *p = hl_prune_heads(m, &remove, NULL, &err);
    ck_assert_int_eq(hl_heads_importance(p, set, raw, norm, &err), HL_OK);
    ck_assert(isnan(raw[1 * N_HEADS + 2]) && isnan(norm[1 * N_HEADS + 2]));
    ck_assert(isfinite(raw[1 * N_HEADS + 1]));
    hl_gpt_free(p);
    hl_eval_set_free(five);
    hl_eval_set_free(set);
    hl_gpt_free(m);
}
END_TEST

/* ---- the program ------------------------------------------------------------ */

static void expect_failure(const char *command, const char *fragment)
{
    char out[8192];
    int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == 2, "%s: exit %d, wanted 2; said: %s", command, rc, out);
    ck_assert_msg(strstr(out, fragment), "%s: message \"%s\" lacks \"%s\"", command, out,
                  fragment);
}

/* The lines of a text file, and its first line. */
static int count_lines(const char *path, char *first, size_t size)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "cannot open %s", path);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (n++ == 0 && first)
            snprintf(first, size, "%s", line);
    fclose(f);
    return n;
}

static char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    rewind(f);
    char *buf = malloc(*size + 1);
    ck_assert_uint_eq(fread(buf, 1, *size, f), *size);
    fclose(f);
    return buf;
}

static bool is_png(const char *path)
{
    static const unsigned char sig[8] = {137, 'P', 'N', 'G', 13, 10, 26, 10};
    size_t size;
    char *buf = slurp(path, &size);
    bool ok = size > 8 && !memcmp(buf, sig, 8);
    free(buf);
    return ok;
}

/* The models the program tests use, made once (an unchecked fixture runs in
 * the parent process): a toy model saved as toy_heads saves model.safetensors
 * (config and task metadata, randomly initialised: training one with
 * toy_heads would take most of the time budget), and a small charlm
 * checkpoint from a 20-step charlm run. */
static char work[64];
static bool models_ok;

static bool save_toy_model(void)
{
    hl_gpt_config cfg = hl_toy_gpt_config();
    hl_error err = {0};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    if (!m)
        return false;
    hl_rng rng;
    hl_rng_seed(&rng, 0);
    hl_gpt_init_weights(m, &rng);
    char path[128], config[512];
    snprintf(path, sizeof path, "%s/toy", work);
    hl_gpt_config_format(&cfg, config, sizeof config);
    hl_checkpoint_meta meta[] = {{"config", config}, {"task", "toy_heads"}};
    bool ok = mkdir(path, 0777) == 0;
    snprintf(path, sizeof path, "%s/toy/model.safetensors", work);
    ok = ok && hl_checkpoint_save(path, m->params, NULL, 3000, NULL, 0, meta, 2, &err) == HL_OK;
    hl_gpt_free(m);
    return ok;
}

static void make_models(void)
{
    snprintf(work, sizeof work, "/tmp/hl_heads_cli_XXXXXX");
    if (!mkdtemp(work) || !save_toy_model())
        return;
    char command[1024];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data " GPL_TEXT " --steps 20 --ctx 16 --d-model 16 "
             "--heads 2 --layers 2 --batch 4 --eval-every 20 --sample 0 --no-report --out %s/char > "
             "%s/char.log 2>&1",
             work, work);
    models_ok = system(command) == 0;
}

static void remove_models(void)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", work);
    if (work[0] && system(command) != 0)
        fprintf(stderr, "cannot remove %s\n", work);
}

#define HEADS HL_BUILD_DIR "/heads "

START_TEST(test_program_outputs)
{
    ck_assert_msg(models_ok, "making the test models failed (see %s/char.log)", work);
    char command[2048], path[256], first[1024];
    /* Every head, zero and mean. */
    snprintf(command, sizeof command,
             HEADS "ablate --model %s/toy/model.safetensors --sequences 50 --out %s/a", work,
             work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/a/ablation.csv", work);
    ck_assert_int_eq(count_lines(path, first, sizeof first), 1 + 1 + 2 * 8);
    ck_assert_str_eq(first, "heads,ablation,scored_loss,scored_accuracy,other_loss,"
                            "other_accuracy,delta_scored_loss,delta_other_loss\n");
    /* A set of heads together, named either way. */
    snprintf(command, sizeof command,
             HEADS "ablate --model %s/toy/model.safetensors --sequences 50 --heads L1H3,0.2 "
             "--out %s/b", work, work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/b/ablation.csv", work);
    ck_assert_int_eq(count_lines(path, NULL, 0), 1 + 1 + 2);
    size_t size;
    char *csv = slurp(path, &size);
    csv[size] = '\0';
    ck_assert_ptr_nonnull(strstr(csv, "\nL0H2+L1H3,zero,"));
    ck_assert_ptr_nonnull(strstr(csv, "\nL0H2+L1H3,mean,"));
    free(csv);

    /* Importance: a CSV row per head and a heatmap. */
    snprintf(command, sizeof command,
             HEADS "importance --model %s/toy/model.safetensors --sequences 50 --out %s/a",
             work, work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/a/importance.csv", work);
    ck_assert_int_eq(count_lines(path, first, sizeof first), 1 + 8);
    ck_assert_str_eq(first, "layer,head,importance,raw,rank\n");
    snprintf(path, sizeof path, "%s/a/importance.png", work);
    ck_assert(is_png(path));

    /* Prune, then prune the pruned model: the record keeps original indices. */
    snprintf(command, sizeof command,
             HEADS "prune --model %s/toy/model.safetensors --sequences 50 --heads 0.1,1.2 "
             "--timing-runs 1 --out %s/p1", work, work);
    tu_run_ok(command);
    snprintf(command, sizeof command,
             HEADS "prune --model %s/p1/pruned.safetensors --sequences 50 --heads 0.0 "
             "--timing-runs 1 --out %s/p2", work, work);
    tu_run_ok(command);
    hl_error err = {0};
    hl_gpt_meta meta;
    snprintf(path, sizeof path, "%s/p2/pruned.safetensors", work);
    hl_gpt *m = hl_gpt_load_meta(path, &meta, &err);
    ck_assert_msg(m, "%s", err.message);
    char record[64];
    hl_pruned_heads_format(&meta.pruned, &m->cfg, record, sizeof record);
    ck_assert_str_eq(record, "0:0,1;1:2");
    ck_assert_str_eq(meta.task, "toy_heads");
    ck_assert_int_eq(hl_gpt_layer_heads(&m->cfg, 0), 2);
    ck_assert_int_eq(m->blocks[0].attn.in_proj_weight->shape[0], 3 * 2 * 16);
    hl_gpt_free(m);
    /* Tables of a pruned model name heads as trained. */
    snprintf(command, sizeof command,
             HEADS "ablate --model %s/p2/pruned.safetensors --sequences 50 --out %s/p2", work,
             work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/p2/ablation.csv", work);
    csv = slurp(path, &size);
    csv[size] = '\0';
    ck_assert_ptr_nonnull(strstr(csv, "\nL0H3,zero,"));
    ck_assert_ptr_null(strstr(csv, "\nL0H1,"));
    free(csv);

    /* The curve: 8 heads, half the remaining ones per step, down to one per layer. */
    snprintf(command, sizeof command,
             HEADS "prune --curve --model %s/toy/model.safetensors --sequences 20 "
             "--step-fraction 0.5 --finetune 3 --timing-runs 1 --out %s/c", work, work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/c/prune_curve.csv", work);
    ck_assert_int_eq(count_lines(path, first, sizeof first), 1 + 3);
    ck_assert_str_eq(first, "step,heads_left,fraction_pruned,pruned_now,params,forward_ms,"
                            "scored_loss,scored_accuracy,other_loss,other_accuracy\n");
    csv = slurp(path, &size);
    csv[size] = '\0';
    ck_assert_ptr_nonnull(strstr(csv, "\n0,8,0.000000,,37456,"));
    ck_assert_ptr_nonnull(strstr(csv, "\n1,4,0.500000,"));
    ck_assert_ptr_nonnull(strstr(csv, "\n2,2,0.750000,"));
    free(csv);
    snprintf(path, sizeof path, "%s/c/prune_curve.png", work);
    ck_assert(is_png(path));

    /* A charlm model on text. */
    snprintf(command, sizeof command,
             HEADS "ablate --model %s/char/checkpoint.safetensors --data " GPL_TEXT " --windows 8 "
             "--out %s/t", work, work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/t/ablation.csv", work);
    ck_assert_int_eq(count_lines(path, first, sizeof first), 1 + 1 + 2 * 4);
    ck_assert_str_eq(first, "heads,ablation,text_loss,text_accuracy,delta_text_loss,icl_score\n");
    snprintf(command, sizeof command,
             HEADS "prune --curve --model %s/char/checkpoint.safetensors --data " GPL_TEXT " "
             "--windows 8 --finetune 2 --finetune-data tests/main.c --timing-runs 1 "
             "--out %s/t", work, work);
    tu_run_ok(command);
}
END_TEST

/* Names in dir other than . and .., space-separated and sorted by readdir order. */
static void list_dir(const char *dir, char *out, size_t size)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    out[0] = '\0';
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(out + strlen(out), size - strlen(out), " %s", e->d_name);
    closedir(d);
}

/* Every command names heads by their index as trained, on a pruned model
 * too: with head 1 of layer 0 pruned, layer 0's heads are L0H0, L0H2, L0H3
 * in scores, maps, circuits and importance, --heads 0.2 picks the head
 * trained as 0.2, and --heads 0.1 is refused as pruned. */
START_TEST(test_program_names_heads_as_trained)
{
    ck_assert_msg(models_ok, "making the test models failed (see %s/char.log)", work);
    char command[2048], path[256], out[4096];
    snprintf(command, sizeof command,
             HEADS "prune --model %s/toy/model.safetensors --sequences 20 --heads 0.1 "
             "--timing-runs 1 --out %s/n", work, work);
    tu_run_ok(command);
    char model[256];
    snprintf(model, sizeof model, "%s/n/pruned.safetensors", work);
    /* --sequences sizes a toy model's probe too (it was ignored) */
    snprintf(command, sizeof command, HEADS "scores --model %s --sequences 12 --out %s/n", model,
             work);
    ck_assert_int_eq(tu_run(command, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "induction probe: 12 sequences"), "%s", out);
    snprintf(path, sizeof path, "%s/n/scores.csv", work);
    size_t size;
    char *csv = slurp(path, &size);
    csv[size] = '\0';
    ck_assert_msg(strstr(csv, "\n0,0,") && strstr(csv, "\n0,2,") && strstr(csv, "\n0,3,") &&
                      !strstr(csv, "\n0,1,") && strstr(csv, "\n1,1,"),
                  "scores.csv: %s", csv);
    free(csv);
    snprintf(command, sizeof command,
             HEADS "maps --model %s --text '1 2 3 4 5 6' --heads 0.2 --out %s/n", model, work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/n/attn_L0H2.png", work);
    ck_assert_msg(is_png(path), "%s missing", path);
    snprintf(path, sizeof path, "%s/n/attn_L0H1.png", work);
    ck_assert_int_eq(access(path, F_OK), -1);
    snprintf(path, sizeof path, "%s/n/maps.csv", work); /* the heads drawn, no others */
    csv = slurp(path, &size);
    csv[size] = '\0';
    ck_assert_msg(strstr(csv, "\nL0H2,5,") && !strstr(csv, "\nL0H0,") && !strstr(csv, "\nL1H"),
                  "maps.csv: %s", csv);
    free(csv);
    snprintf(command, sizeof command,
             HEADS "maps --model %s --text '1 2 3' --heads 0.1 --out %s/n2", model, work);
    ck_assert_int_eq(tu_run(command, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "L0H1 was pruned"), "%s", out);
    snprintf(command, sizeof command, HEADS "circuits --model %s --out %s/n", model, work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/n/composition.csv", work);
    csv = slurp(path, &size);
    csv[size] = '\0';
    ck_assert_msg(strstr(csv, ",L0H3,L1H") && !strstr(csv, ",L0H1,"), "composition.csv: %s",
                  csv);
    free(csv);
    snprintf(command, sizeof command,
             HEADS "importance --model %s --sequences 20 --out %s/n", model, work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/n/importance.csv", work);
    csv = slurp(path, &size);
    csv[size] = '\0';
    ck_assert_msg(strstr(csv, "\n0,3,") && !strstr(csv, "\n0,1,"), "importance.csv: %s", csv);
    free(csv);
}
END_TEST

START_TEST(test_program_bad_input)
{
    ck_assert_msg(models_ok, "making the test models failed (see %s/char.log)", work);
    char command[2048], out_dir[128], model[128], path[256];
    snprintf(model, sizeof model, "%s/toy/model.safetensors", work);
    snprintf(out_dir, sizeof out_dir, "%s/keep", work);
    /* Outputs from good runs, which the failing runs below must leave alone. */
    snprintf(command, sizeof command,
             HEADS "ablate --model %s --sequences 20 --heads 0.0 --out %s", model, out_dir);
    tu_run_ok(command);
    snprintf(command, sizeof command,
             HEADS "prune --model %s --sequences 20 --heads 0.0 --timing-runs 1 --out %s",
             model, out_dir);
    tu_run_ok(command);
    size_t csv_size, ckpt_size;
    snprintf(path, sizeof path, "%s/ablation.csv", out_dir);
    char *csv = slurp(path, &csv_size);
    snprintf(path, sizeof path, "%s/pruned.safetensors", out_dir);
    char *ckpt = slurp(path, &ckpt_size);
    char before[512], after[512];
    list_dir(out_dir, before, sizeof before);

    static const struct {
        const char *args, *fragment;
    } cases[] = {
        {"ablate --model %s/none.safetensors", "none.safetensors"},
        /* flags a command would ignore (accepted before) */
        {"scores --model %s/toy/model.safetensors --seed 4", "scores does not read --seed"},
        {"maps --model %s/toy/model.safetensors --text 3 --batch 2",
         "maps does not read --batch"},
        {"circuits --model %s/toy/model.safetensors --sequences 4 --timing-runs 2",
         "circuits does not read --timing-runs"},
        {"eval --model %s/toy/model.safetensors --text 3 --seed 1", "eval does not read --seed"},
        {"eval --model %s/toy/model.safetensors --text 3 --finetune 2",
         "eval does not read --finetune"},
        {"patch --model %s/toy/model.safetensors --clean \"1 2\" --corrupt \"1 3\" --seed 2",
         "patch does not read --seed"},
        {"ablate --model %s/cut.safetensors", "cut.safetensors"},
        {"ablate --model %s/toy/model.safetensors --heads 2.0", "out of range"},
        {"ablate --model %s/toy/model.safetensors --heads 1.4", "out of range"},
        {"ablate --model %s/toy/model.safetensors --heads 1.x", "layer.head"},
        {"prune --model %s/toy/model.safetensors --heads 1.0,1.1,1.2,1.3", "every head of layer 1"},
        {"prune --model %s/keep/pruned.safetensors --heads 0.0", "was pruned"},
        {"ablate --model %s/toy/model.safetensors --data " GPL_TEXT "", "toy_heads model"},
        {"importance --model %s/char/checkpoint.safetensors", "--data"},
        {"prune --curve --model %s/char/checkpoint.safetensors --data " GPL_TEXT " --finetune 2",
         "--finetune-data"},
        {"ablate --model %s/wrong.safetensors", "recorded as pruned"},
        {"importance --model %s/toy/model.safetensors --heads 0.0", "--heads"},
        {"prune --model %s/toy/model.safetensors", "--heads"},
        {"frobnicate --model %s/toy/model.safetensors", "unknown command"},
        {"ablate --model %s/toy/model.safetensors --finetune 3", "belongs to prune --curve"},
        {"ablate --model %s/toy/model.safetensors --windows 4", "for text models"},
        {"ablate --model %s/char/checkpoint.safetensors --data " GPL_TEXT " --seed 4",
         "for toy models"},
        /* a list ending in a comma, refused as --heads 1.3, is */
        {"patch --model %s/toy/model.safetensors --clean \"1 2 3 4\" --corrupt \"1 2 5 4\" "
         "--positions 1,", "not \"1,\""},
        {"patch --model %s/toy/model.safetensors --act z,", "\"z,\" ends in a comma"},
        /* the toy model reads its BOS (16) but never predicts it */
        {"eval --model %s/toy/model.safetensors --token-ids %s/bos.txt",
         "place 2: token 16 is one the model reads but cannot predict"},
    };
    snprintf(command, sizeof command, "printf '1 16 2\\n' > %s/bos.txt", work);
    ck_assert_int_eq(system(command), 0);
    /* A truncated copy of the model, and a model whose record does not fit. */
    snprintf(command, sizeof command, "head -c 1000 %s > %s/cut.safetensors", model, work);
    ck_assert_int_eq(system(command), 0);
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load(model, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_gpt_meta wrong = {.task = "toy_heads"};
    wrong.pruned.on[1][1] = true;
    snprintf(path, sizeof path, "%s/wrong.safetensors", work);
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &wrong, &err), HL_OK);
    hl_gpt_free(m);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, cases[i].args, work, work);
        snprintf(command, sizeof command, HEADS "%s --out %s", args, out_dir);
        expect_failure(command, cases[i].fragment);
    }
    snprintf(command, sizeof command,
             HEADS "ablate --model tests/fixtures/gpt/weights.safetensors --out %s", out_dir);
    expect_failure(command, "does not fit the toy task");
    snprintf(command, sizeof command, HEADS "ablate --model %s --sequences 0 --out %s", model,
             out_dir);
    expect_failure(command, "--sequences");
    expect_failure(HL_BUILD_DIR "/heads", "give a command");
    /* ... in one line that points to --help, not the whole usage. */
    char said[8192];
    ck_assert_int_eq(tu_run(HL_BUILD_DIR "/heads", said, sizeof said), 2);
    ck_assert_msg(strstr(said, "heads --help") && strchr(said, '\n') == said + strlen(said) - 1,
                  "heads with no arguments said: %s", said);
    ck_assert_int_eq(tu_run(HL_BUILD_DIR "/heads frobnicate", said, sizeof said), 2);
    ck_assert_msg(strchr(said, '\n') == said + strlen(said) - 1, "%s", said);
    snprintf(command, sizeof command, HEADS "importance --model %s --out %s/ablation.csv/x",
             model, out_dir);
    expect_failure(command, "cannot create");
    /* A file that cannot be written once the work is done is exit 2 too. */
    snprintf(command, sizeof command,
             "mkdir -p %s/blocked/pruned.safetensors && " HEADS "prune --model %s --sequences 20 "
             "--heads 0.0 --timing-runs 1 --out %s/blocked", work, model, work);
    expect_failure(command, "pruned.safetensors: it is a directory");

    /* A text model of one position: the induction probe does not fit in it,
     * bad input found before a report's folder is made. */
    snprintf(path, sizeof path, "%s/char/checkpoint.safetensors", work);
    hl_gpt_meta meta = {0};
    m = hl_gpt_load_meta(path, &meta, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_gpt_config one_position = m->cfg;
    one_position.n_ctx = 1;
    hl_gpt *one = hl_gpt_new(&one_position, &err);
    ck_assert_msg(one, "%s", err.message);
    snprintf(path, sizeof path, "%s/ctx1.safetensors", work);
    ck_assert_int_eq(hl_gpt_save_meta(path, one, &meta, &err), HL_OK);
    hl_gpt_free(one);
    hl_gpt_free(m);
    hl_gpt_meta_clear(&meta);
    snprintf(command, sizeof command, HEADS "report --model %s --out %s/never", path, work);
    expect_failure(command, "do not fit in the model's context of 1");
    snprintf(path, sizeof path, "%s/never", work);
    ck_assert_msg(access(path, F_OK) != 0, "%s was made", path);

    /* Nothing was overwritten and nothing was left behind. */
    size_t size;
    snprintf(path, sizeof path, "%s/ablation.csv", out_dir);
    char *now = slurp(path, &size);
    ck_assert(size == csv_size && !memcmp(now, csv, size));
    free(now);
    snprintf(path, sizeof path, "%s/pruned.safetensors", out_dir);
    now = slurp(path, &size);
    ck_assert(size == ckpt_size && !memcmp(now, ckpt, size));
    free(now);
    list_dir(out_dir, after, sizeof after);
    ck_assert_str_eq(after, before);
    free(csv);
    free(ckpt);
}
END_TEST

Suite *heads_suite(void)
{
    Suite *s = suite_create("heads");
    TCase *lib = tcase_create("library");
    tcase_add_test(lib, test_prune_equals_gating);
    tcase_add_test(lib, test_pruned_model_round_trip);
    tcase_add_test(lib, test_prune_errors);
    tcase_add_test(lib, test_zero_ablation);
    tcase_add_test(lib, test_mean_ablation);
    tcase_add_test(lib, test_importance_is_gate_derivative);
    tcase_add_test(lib, test_importance_order);
    suite_add_tcase(s, lib);
    TCase *cli = tcase_create("program");
    tcase_set_timeout(cli, 300);
    tcase_add_unchecked_fixture(cli, make_models, remove_models);
    tcase_add_test(cli, test_program_outputs);
    tcase_add_test(cli, test_program_names_heads_as_trained);
    tcase_add_test(cli, test_program_bad_input);
    suite_add_tcase(s, cli);
    return s;
}
