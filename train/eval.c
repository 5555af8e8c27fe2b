/* Evaluation sets and the evaluation loop: see eval.h. */
#include "train/eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

hl_eval_set *hl_eval_set_new(int n, int T, int n_groups, int batch, hl_error *err)
{
    if (n < 1 || T < 1 || batch < 1 || n_groups < 1 || n_groups > HL_EVAL_MAX_GROUPS ||
        (size_t)n * (size_t)T > (size_t)1 << 31) {
        hl_error_set(err, HL_ERR_ARG,
                     "eval set: %d sequences of %d tokens in batches of %d with %d target "
                     "groups (each at least 1, groups at most %d)",
                     n, T, batch, n_groups, HL_EVAL_MAX_GROUPS);
        return NULL;
    }
    hl_eval_set *set = calloc(1, sizeof *set);
    size_t count = (size_t)n * T;
    bool ok = set && (set->tokens = calloc(count, sizeof *set->tokens));
    for (int k = 0; ok && k < n_groups; k++) {
        ok = (set->targets[k] = malloc(count * sizeof *set->targets[k])) != NULL;
        for (size_t i = 0; ok && i < count; i++)
            set->targets[k][i] = HL_EVAL_IGNORE;
        snprintf(set->group_names[k], sizeof set->group_names[k], "g%d", k);
    }
    if (!ok) {
        hl_eval_set_free(set);
        hl_error_set(err, HL_ERR_NOMEM, "eval set: no memory for %d sequences of %d tokens", n,
                     T);
        return NULL;
    }
    set->n = n;
    set->T = T;
    set->batch = batch;
    set->n_groups = n_groups;
    return set;
}

void hl_eval_set_free(hl_eval_set *set)
{
    if (!set)
        return;
    free(set->tokens);
    for (int k = 0; k < HL_EVAL_MAX_GROUPS; k++)
        free(set->targets[k]);
    free(set->repeats);
    free(set);
}

hl_status hl_eval_set_add_repeats(hl_eval_set *set, hl_error *err)
{
    if (!set->repeats && !(set->repeats = calloc((size_t)set->n, sizeof *set->repeats)))
        return hl_error_set(err, HL_ERR_NOMEM, "eval set: no memory for %d repeats", set->n);
    return HL_OK;
}

hl_status hl_eval_set_check(const hl_eval_set *set, const hl_gpt *m, hl_error *err)
{
    if (!m || !set || !set->tokens)
        return hl_error_set(err, HL_ERR_ARG, "eval: NULL model or evaluation set");
    if (set->T > m->cfg.n_ctx)
        return hl_error_set(err, HL_ERR_SHAPE,
                            "eval: sequences of %d tokens do not fit the model's context of %d",
                            set->T, m->cfg.n_ctx);
    size_t count = (size_t)set->n * set->T;
    for (size_t i = 0; i < count; i++)
        if (set->tokens[i] < 0 || set->tokens[i] >= m->cfg.vocab_in)
            return hl_error_set(err, HL_ERR_ARG,
                                "eval: token %d (sequence %zu) is outside the model's "
                                "vocabulary 0..%d",
                                (int)set->tokens[i], i / (size_t)set->T, m->cfg.vocab_in - 1);
    for (int k = 0; k < set->n_groups; k++)
        for (size_t i = 0; i < count; i++)
            if (set->targets[k][i] != HL_EVAL_IGNORE &&
                (set->targets[k][i] < 0 || set->targets[k][i] >= m->cfg.vocab_out))
                return hl_error_set(err, HL_ERR_ARG,
                                    "eval: target %d (group %s) is outside the model's "
                                    "outputs 0..%d",
                                    (int)set->targets[k][i], set->group_names[k],
                                    m->cfg.vocab_out - 1);
    return set->repeats ? hl_eval_repeats_check(set->repeats, set->n, set->T, "eval", err)
                        : HL_OK;
}

hl_status hl_eval_repeats_check(const hl_repeat *repeats, int n, int T, const char *who,
                                hl_error *err)
{
    for (int i = 0; i < n; i++) {
        const hl_repeat r = repeats[i];
        if (r.begin < 0 || r.begin > r.end || r.end > T ||
            (r.begin < r.end && (r.lag < 1 || r.begin - r.lag < 0)))
            return hl_error_set(err, HL_ERR_ARG,
                                "%s: sequence %d's repeat (queries %d..%d, %d back) is not "
                                "inside its %d positions", who, i, r.begin, r.end - 1, r.lag, T);
    }
    return HL_OK;
}

bool hl_eval_set_next(const hl_eval_set *set, hl_eval_batch *b)
{
    int first = b->B ? b->first + b->B : 0;
    if (first >= set->n)
        return false;
    b->first = first;
    b->B = set->n - first < set->batch ? set->n - first : set->batch;
    const size_t at = (size_t)first * set->T;
    b->tokens = set->tokens + at;
    for (int k = 0; k < HL_EVAL_MAX_GROUPS; k++)
        b->targets[k] = k < set->n_groups ? set->targets[k] + at : NULL;
    b->repeats = set->repeats ? set->repeats + first : NULL;
    return true;
}

typedef struct {
    double loss_sum[HL_EVAL_MAX_GROUPS];
    int64_t count[HL_EVAL_MAX_GROUPS], correct[HL_EVAL_MAX_GROUPS];
} eval_sums;

/* Adds one batch's losses (weighted by target counts) and hits into the sums. */
static void score_batch(hl_graph *g, const hl_gpt *m, const hl_eval_set *set,
                        const hl_eval_batch *b, hl_tensor *logits, eval_sums *s)
{
    const hl_tensor *predicted = hl_argmax(g, logits); /* (B,T) */
    for (int k = 0; k < set->n_groups && !hl_graph_failed(g); k++) {
        const int32_t *targets = b->targets[k];
        hl_tensor *ce = hl_gpt_loss(g, m, logits, targets, HL_EVAL_IGNORE);
        if (hl_graph_failed(g))
            return;
        int64_t n = 0;
        for (int p = 0; p < b->B * set->T; p++) {
            if (targets[p] == HL_EVAL_IGNORE)
                continue;
            n++;
            s->correct[k] += (int32_t)predicted->data[p] == targets[p];
        }
        s->loss_sum[k] += (double)ce->data[0] * (double)n;
        s->count[k] += n;
    }
}

/* A GPT-2-sized model holds 206 MB of logits and 604 MB of maps a sequence of
 * 1,024. Every sequence's numbers are the same in any batch. */
int hl_eval_pass_batch(const hl_gpt *m, const hl_eval_set *set, bool traced)
{
    double per_sequence = (double)set->T * m->cfg.vocab_out;
    for (int l = 0; traced && l < m->cfg.n_layers; l++)
        per_sequence += (double)hl_gpt_layer_heads(&m->cfg, l) * set->T * set->T;
    const double fit = HL_EVAL_PASS_BYTES / (per_sequence * sizeof(hl_real));
    return fit >= set->batch ? set->batch : fit >= 1 ? (int)fit : 1;
}

hl_status hl_eval_loss(const hl_gpt *m, const hl_eval_set *whole, const hl_gpt_run *run,
                       hl_eval_hook hook, void *ctx, hl_eval_result *out, hl_error *err)
{
    if (hl_eval_set_check(whole, m, err) != HL_OK)
        return err->status;
    hl_eval_set pass = *whole;
    pass.batch = hl_eval_pass_batch(m, whole, run && run->trace);
    const hl_eval_set *set = &pass;
    hl_graph *g = hl_graph_new(0);
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "eval: out of memory");
    hl_graph_set_grad_enabled(g, false);
    hl_graph_set_training(g, false);
    eval_sums sums = {0};
    hl_status s = HL_OK;
    for (hl_eval_batch b = {0}; s == HL_OK && hl_eval_set_next(set, &b);) {
        hl_tensor *logits = hl_gpt_forward(g, m, b.tokens, b.B, set->T, run);
        score_batch(g, m, set, &b, logits, &sums);
        if (hl_graph_failed(g))
            s = hl_error_set(err, hl_graph_status(g), "eval: %s", hl_graph_message(g));
        else if (hook)
            s = hook(ctx, &b, logits, run, err);
        hl_graph_reset(g);
    }
    hl_graph_free(g);
    if (s != HL_OK)
        return s;
    memset(out, 0, sizeof *out);
    for (int k = 0; k < set->n_groups; k++) {
        out->count[k] = sums.count[k];
        out->loss[k] = sums.count[k] ? sums.loss_sum[k] / (double)sums.count[k] : NAN;
        out->accuracy[k] = sums.count[k] ? (double)sums.correct[k] / (double)sums.count[k] : NAN;
        out->total_loss += sums.count[k] ? out->loss[k] : 0;
    }
    return HL_OK;
}

/* -log softmax(row)[target] of the logits as cfg's loss reads them (soft-capped
 * when it has a softcap: hl_gpt_logit). */
static double token_loss(const hl_real *row, int V, int32_t target, const hl_gpt_config *cfg)
{
    double max = hl_gpt_logit(cfg, row[0]), sum = 0;
    for (int v = 1; v < V; v++)
        max = fmax(max, hl_gpt_logit(cfg, row[v]));
    for (int v = 0; v < V; v++)
        sum += exp((double)hl_gpt_logit(cfg, row[v]) - max);
    return max + log(sum) - (double)hl_gpt_logit(cfg, row[target]);
}

double hl_eval_token_loss(const hl_gpt_config *cfg, const hl_real *row, int V, int32_t target)
{
    return token_loss(row, V, target, cfg ? cfg : &(hl_gpt_config){0});
}

typedef struct {
    int T;
    double *sum;
    int64_t *count;
    const hl_gpt_config *cfg;
} position_sums;

static hl_status position_hook(void *ctx, const hl_eval_batch *b, const hl_tensor *logits,
                               const hl_gpt_run *run, hl_error *err)
{
    (void)run, (void)err;
    position_sums *p = ctx;
    const int V = logits->shape[2];
    for (int i = 0; i < b->B * p->T; i++) {
        const int32_t y = b->targets[0][i];
        if (y == HL_EVAL_IGNORE)
            continue;
        p->sum[i % p->T] += token_loss(logits->data + (size_t)i * V, V, y, p->cfg);
        p->count[i % p->T]++;
    }
    return HL_OK;
}

hl_status hl_eval_position_loss(const hl_gpt *m, const hl_eval_set *set, const hl_gpt_run *run,
                                double *position_loss, hl_eval_result *out, hl_error *err)
{
    if (!set)
        return hl_error_set(err, HL_ERR_ARG, "eval: no set");
    position_sums p = {set->T, calloc((size_t)set->T, sizeof(double)),
                       calloc((size_t)set->T, sizeof(int64_t)), &m->cfg};
    hl_status s = p.sum && p.count ? hl_eval_loss(m, set, run, position_hook, &p, out, err)
                                   : hl_error_set(err, HL_ERR_NOMEM, "eval: out of memory");
    for (int t = 0; s == HL_OK && t < set->T; t++)
        position_loss[t] = p.count[t] ? p.sum[t] / (double)p.count[t] : NAN;
    free(p.sum);
    free(p.count);
    return s;
}

void hl_eval_icl_ranges(int T, int *early0, int *early1, int *late0, int *late1)
{
    *early0 = (int)(0.16 * T);
    *early1 = (int)(0.24 * T);
    *late0 = (int)(0.78 * T);
    *late1 = (int)(0.98 * T);
}

double hl_eval_icl_score(const double *position_loss, const double *position_weight, int T)
{
    int e0, e1, l0, l1;
    hl_eval_icl_ranges(T, &e0, &e1, &l0, &l1);
    if (e1 <= e0 || l1 <= l0) /* T of 2-4, 7 or 8: a range holds no position */
        return NAN;
    double early = 0, late = 0, early_weight = 0, late_weight = 0;
    for (int t = e0; t < e1; t++) {
        early += position_loss[t];
        early_weight += position_weight ? position_weight[t] : 1;
    }
    for (int t = l0; t < l1; t++) {
        late += position_loss[t];
        late_weight += position_weight ? position_weight[t] : 1;
    }
    return late / late_weight - early / early_weight;
}

/* The mean of token_weight over targets[group] at positions [t0, t1) of every
 * sequence; NaN when none is scored. */
static double mean_weight(const hl_eval_set *set, int group, int t0, int t1,
                          const double *token_weight)
{
    double sum = 0;
    int64_t count = 0;
    for (int i = 0; i < set->n; i++)
        for (int t = t0; t < t1; t++) {
            const int32_t y = set->targets[group][(size_t)i * set->T + t];
            if (y != HL_EVAL_IGNORE) {
                sum += token_weight[y];
                count++;
            }
        }
    return count ? sum / (double)count : NAN;
}

void hl_eval_position_weights(const hl_eval_set *set, const double *token_weight,
                              double *position_weight)
{
    for (int t = 0; t < set->T; t++)
        position_weight[t] = mean_weight(set, 0, t, t + 1, token_weight);
}

double hl_eval_mean_weight(const hl_eval_set *set, int group, const double *token_weight)
{
    return mean_weight(set, group, 0, set->T, token_weight);
}

/* Window w of `windows` spread evenly over room + 1 starts: the first at 0,
 * the last at room. */
static size_t window_start(size_t room, int w, int windows)
{
    return windows > 1 ? room * (size_t)w / (size_t)(windows - 1) : 0;
}

hl_eval_set *hl_eval_text_windows_read(hl_text_read_fn read, void *ctx, size_t size, int windows,
                                       int T, int batch, hl_error *err)
{
    if (T < 1 || windows < 1 || size < (size_t)T + 1) {
        hl_error_set(err, HL_ERR_ARG, "text windows: %zu tokens do not hold a window of %d",
                     size, T + 1);
        return NULL;
    }
    hl_eval_set *set = hl_eval_set_new(windows, T, 1, batch, err);
    if (!set)
        return NULL;
    snprintf(set->group_names[0], sizeof set->group_names[0], "text");
    const size_t room = size - (size_t)T - 1;
    for (int w = 0; w < windows; w++) {
        const size_t at = window_start(room, w, windows);
        int32_t *x = set->tokens + (size_t)w * T, *y = set->targets[0] + (size_t)w * T;
        /* T tokens as inputs; the targets are the same shifted by one */
        if (read(ctx, at, (size_t)T, x, err) != HL_OK ||
            read(ctx, at + (size_t)T, 1, y + T - 1, err) != HL_OK) {
            hl_eval_set_free(set);
            return NULL;
        }
        memcpy(y, x + 1, sizeof *y * (size_t)(T - 1));
    }
    return set;
}

static hl_status read_array(void *ctx, size_t at, size_t n, int32_t *out, hl_error *err)
{
    (void)err;
    memcpy(out, (const int32_t *)ctx + at, sizeof *out * n);
    return HL_OK;
}

hl_eval_set *hl_eval_text_windows(const int32_t *text, size_t size, int windows, int T, int batch,
                                  hl_error *err)
{
    return hl_eval_text_windows_read(read_array, (void *)text, text ? size : 0, windows, T, batch,
                                     err);
}

hl_eval_set *hl_eval_repeat_windows(const int32_t *text, size_t size, int windows, int half,
                                    int batch, hl_error *err)
{
    if (!text || half < 2 || windows < 1 || size < (size_t)half) {
        hl_error_set(err, HL_ERR_ARG, "repeated text: %zu tokens do not hold %d to repeat", size,
                     half);
        return NULL;
    }
    const int T = 2 * half;
    hl_eval_set *set = hl_eval_set_new(windows, T, 2, batch, err);
    if (!set)
        return NULL;
    snprintf(set->group_names[0], sizeof set->group_names[0], "repeat");
    snprintf(set->group_names[1], sizeof set->group_names[1], "first");
    const size_t room = size - (size_t)half;
    for (int w = 0; w < windows; w++) {
        const size_t at = window_start(room, w, windows);
        int32_t *x = set->tokens + (size_t)w * T;
        for (int t = 0; t < half; t++)
            x[t] = x[half + t] = text[at + t];
        for (int t = 0; t + 1 < T; t++)
            set->targets[t + 1 < half ? 1 : 0][(size_t)w * T + t] = x[t + 1];
    }
    return set;
}
