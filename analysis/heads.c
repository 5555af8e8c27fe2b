/* Evaluation with heads ablated, mean head outputs and head importance: see heads.h. */
#include "analysis/heads.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* ---- evaluation sets ------------------------------------------------------ */

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
    free(set);
}

void hl_head_means_free(hl_head_means *means)
{
    for (int l = 0; l < HL_GPT_MAX_LAYERS; l++) {
        hl_tensor_free(means->layer[l]);
        means->layer[l] = NULL;
    }
    means->n_layers = 0;
}

/* ---- checks ---------------------------------------------------------------- */

static hl_status check_set(const hl_gpt *m, const hl_eval_set *set, hl_error *err)
{
    if (!m || !set || !set->tokens)
        return hl_error_set(err, HL_ERR_ARG, "heads: NULL model or evaluation set");
    if (set->T > m->cfg.n_ctx)
        return hl_error_set(err, HL_ERR_SHAPE,
                            "heads: sequences of %d tokens do not fit the model's context of %d",
                            set->T, m->cfg.n_ctx);
    size_t count = (size_t)set->n * set->T;
    for (size_t i = 0; i < count; i++)
        if (set->tokens[i] < 0 || set->tokens[i] >= m->cfg.vocab_in)
            return hl_error_set(err, HL_ERR_ARG,
                                "heads: token %d (sequence %zu) is outside the model's "
                                "vocabulary 0..%d",
                                (int)set->tokens[i], i / (size_t)set->T, m->cfg.vocab_in - 1);
    for (int k = 0; k < set->n_groups; k++)
        for (size_t i = 0; i < count; i++)
            if (set->targets[k][i] != HL_EVAL_IGNORE &&
                (set->targets[k][i] < 0 || set->targets[k][i] >= m->cfg.vocab_out))
                return hl_error_set(err, HL_ERR_ARG,
                                    "heads: target %d (group %s) is outside the model's "
                                    "outputs 0..%d",
                                    (int)set->targets[k][i], set->group_names[k],
                                    m->cfg.vocab_out - 1);
    return HL_OK;
}

/* Every head named in s exists in m. */
static hl_status check_heads(const hl_gpt *m, const hl_head_set *s, hl_error *err)
{
    for (int l = 0; l < HL_GPT_MAX_LAYERS; l++) {
        int H = l < m->cfg.n_layers ? hl_gpt_layer_heads(&m->cfg, l) : 0;
        for (int h = H; h < HL_HEADS_MAX; h++) {
            if (!s->on[l][h])
                continue;
            if (l >= m->cfg.n_layers)
                return hl_error_set(err, HL_ERR_ARG, "heads: there is no layer %d (the model "
                                    "has %d)", l, m->cfg.n_layers);
            return hl_error_set(err, HL_ERR_ARG, "heads: layer %d has no head %d (it has %d)",
                                l, h, H);
        }
    }
    return HL_OK;
}

/* ---- gates and offsets, changed and restored ------------------------------- */

typedef struct {
    hl_real *gates;                             /* every layer's gate values, in order */
    const hl_tensor *offsets[HL_GPT_MAX_LAYERS];
    hl_tensor *made[HL_GPT_MAX_LAYERS];         /* offsets built for a mean ablation */
} saved_state;

static hl_status save_state(const hl_gpt *m, saved_state *s, hl_error *err)
{
    memset(s, 0, sizeof *s);
    size_t total = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        total += m->blocks[l].attn.gate->numel;
    s->gates = malloc(total * sizeof *s->gates);
    if (!s->gates)
        return hl_error_set(err, HL_ERR_NOMEM, "heads: out of memory");
    hl_real *p = s->gates;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const hl_mha *a = &m->blocks[l].attn;
        memcpy(p, a->gate->data, a->gate->numel * sizeof *p);
        p += a->gate->numel;
        s->offsets[l] = a->head_offset;
    }
    return HL_OK;
}

static void restore_state(hl_gpt *m, saved_state *s)
{
    const hl_real *p = s->gates;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        hl_mha *a = &m->blocks[l].attn;
        memcpy(a->gate->data, p, a->gate->numel * sizeof *p);
        p += a->gate->numel;
        a->head_offset = s->offsets[l];
        hl_tensor_free(s->made[l]);
    }
    free(s->gates);
    memset(s, 0, sizeof *s);
}

/* Gates 1 and no offsets: the unablated model. */
static void clear_ablation(hl_gpt *m)
{
    hl_gpt_reset_gates(m);
    for (int l = 0; l < m->cfg.n_layers; l++)
        m->blocks[l].attn.head_offset = NULL;
}

/* Gates the heads of `ablate` to 0; with means, gives each of them its mean
 * output through an offset that is zero for the other heads. */
static hl_status apply_ablation(hl_gpt *m, const hl_eval_set *set, const hl_head_set *ablate,
                                const hl_head_means *means, saved_state *s, hl_error *err)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        hl_mha *a = &m->blocks[l].attn;
        const int H = a->cfg.num_heads, D = a->cfg.head_dim, T = set->T;
        bool any = false;
        for (int h = 0; h < H; h++)
            if (ablate->on[l][h]) {
                a->gate->data[h] = 0;
                any = true;
            }
        if (!any || !means)
            continue;
        const hl_tensor *mean = l < means->n_layers ? means->layer[l] : NULL;
        if (!mean || mean->rank != 3 || mean->shape[0] != H || mean->shape[1] != T ||
            mean->shape[2] != D)
            return hl_error_set(err, HL_ERR_SHAPE,
                                "heads: the mean outputs of layer %d are not (%d,%d,%d); were "
                                "they measured on this model and set?",
                                l, H, T, D);
        s->made[l] = hl_tensor_new_checked("head_offset", 3, mean->shape, false, err);
        if (!s->made[l])
            return err->status;
        size_t per_head = (size_t)T * D;
        for (int h = 0; h < H; h++)
            if (ablate->on[l][h])
                memcpy(s->made[l]->data + h * per_head, mean->data + h * per_head,
                       per_head * sizeof(hl_real));
        a->head_offset = s->made[l];
    }
    return HL_OK;
}

/* ---- evaluation ------------------------------------------------------------- */

static int argmax_row(const hl_real *row, int V)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (row[v] > row[best])
            best = v;
    return best;
}

/* Adds one batch's losses (weighted by target counts) and hits into the sums. */
static void score_batch(hl_graph *g, const hl_eval_set *set, hl_tensor *logits, int first,
                        int B, double *loss_sum, int64_t *count, int64_t *correct)
{
    const int T = set->T, V = logits->shape[2];
    for (int k = 0; k < set->n_groups; k++) {
        const int32_t *targets = set->targets[k] + (size_t)first * T;
        hl_tensor *ce = hl_cross_entropy(g, logits, targets, HL_EVAL_IGNORE);
        if (hl_graph_failed(g))
            return;
        int64_t n = 0;
        for (int p = 0; p < B * T; p++) {
            if (targets[p] == HL_EVAL_IGNORE)
                continue;
            n++;
            correct[k] += argmax_row(logits->data + (size_t)p * V, V) == targets[p];
        }
        loss_sum[k] += (double)ce->data[0] * (double)n;
        count[k] += n;
    }
}

static hl_status run_evaluation(const hl_gpt *m, const hl_eval_set *set, hl_eval_result *out,
                                hl_error *err)
{
    hl_graph *g = hl_graph_new(0);
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "heads: out of memory");
    hl_graph_set_grad_enabled(g, false);
    hl_graph_set_training(g, false);
    double loss_sum[HL_EVAL_MAX_GROUPS] = {0};
    int64_t count[HL_EVAL_MAX_GROUPS] = {0}, correct[HL_EVAL_MAX_GROUPS] = {0};
    for (int first = 0; first < set->n && !hl_graph_failed(g); first += set->batch) {
        int B = set->n - first < set->batch ? set->n - first : set->batch;
        hl_tensor *logits =
            hl_gpt_forward(g, m, set->tokens + (size_t)first * set->T, B, set->T, NULL);
        if (!hl_graph_failed(g))
            score_batch(g, set, logits, first, B, loss_sum, count, correct);
        if (!hl_graph_failed(g))
            hl_graph_reset(g);
    }
    hl_status s = HL_OK;
    if (hl_graph_failed(g))
        s = hl_error_set(err, hl_graph_status(g), "heads: evaluation: %s", hl_graph_message(g));
    hl_graph_free(g);
    if (s != HL_OK)
        return s;
    memset(out, 0, sizeof *out);
    for (int k = 0; k < set->n_groups; k++) {
        out->count[k] = count[k];
        out->loss[k] = count[k] ? loss_sum[k] / (double)count[k] : NAN;
        out->accuracy[k] = count[k] ? (double)correct[k] / (double)count[k] : NAN;
        out->total_loss += count[k] ? out->loss[k] : 0;
    }
    return HL_OK;
}

hl_status hl_heads_evaluate(hl_gpt *m, const hl_eval_set *set, const hl_head_set *ablate,
                            const hl_head_means *means, hl_eval_result *out, hl_error *err)
{
    if (check_set(m, set, err) != HL_OK || (ablate && check_heads(m, ablate, err) != HL_OK))
        return err->status;
    saved_state saved;
    if (save_state(m, &saved, err) != HL_OK)
        return err->status;
    hl_status s = ablate ? apply_ablation(m, set, ablate, means, &saved, err) : HL_OK;
    if (s == HL_OK)
        s = run_evaluation(m, set, out, err);
    restore_state(m, &saved);
    return s;
}

/* ---- mean head outputs ------------------------------------------------------ */

static hl_status sum_head_outputs(const hl_gpt *m, const hl_eval_set *set, double **sums,
                                  hl_error *err)
{
    hl_graph *g = hl_graph_new(0);
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "heads: out of memory");
    hl_graph_set_grad_enabled(g, false);
    hl_graph_set_training(g, false);
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    for (int first = 0; first < set->n && !hl_graph_failed(g); first += set->batch) {
        int B = set->n - first < set->batch ? set->n - first : set->batch;
        hl_gpt_forward(g, m, set->tokens + (size_t)first * set->T, B, set->T, trace);
        for (int l = 0; l < m->cfg.n_layers && !hl_graph_failed(g); l++) {
            const hl_tensor *heads = trace[l].heads; /* (B,H,T,D) */
            const size_t per_seq = hl_tensor_span(heads, 1, 4);
            for (int b = 0; b < B; b++)
                for (size_t i = 0; i < per_seq; i++)
                    sums[l][i] += heads->data[(size_t)b * per_seq + i];
        }
        if (!hl_graph_failed(g))
            hl_graph_reset(g);
    }
    hl_status s = HL_OK;
    if (hl_graph_failed(g))
        s = hl_error_set(err, hl_graph_status(g), "heads: mean outputs: %s", hl_graph_message(g));
    hl_graph_free(g);
    return s;
}

hl_status hl_heads_mean_outputs(hl_gpt *m, const hl_eval_set *set, hl_head_means *means,
                                hl_error *err)
{
    memset(means, 0, sizeof *means);
    if (check_set(m, set, err) != HL_OK)
        return err->status;
    double *sums[HL_GPT_MAX_LAYERS] = {0};
    hl_status s = HL_OK;
    for (int l = 0; l < m->cfg.n_layers && s == HL_OK; l++) {
        const hl_mha *a = &m->blocks[l].attn;
        int shape[3] = {a->cfg.num_heads, set->T, a->cfg.head_dim};
        means->layer[l] = hl_tensor_new_checked("head_means", 3, shape, false, err);
        sums[l] = calloc((size_t)shape[0] * shape[1] * shape[2], sizeof *sums[l]);
        if (!means->layer[l] || !sums[l])
            s = hl_error_set(err, HL_ERR_NOMEM, "heads: out of memory");
    }
    means->n_layers = m->cfg.n_layers;
    saved_state saved;
    if (s == HL_OK && (s = save_state(m, &saved, err)) == HL_OK) {
        clear_ablation(m);
        s = sum_head_outputs(m, set, sums, err);
        restore_state(m, &saved);
    }
    for (int l = 0; l < m->cfg.n_layers; l++) {
        for (size_t i = 0; s == HL_OK && i < means->layer[l]->numel; i++)
            means->layer[l]->data[i] = (hl_real)(sums[l][i] / set->n);
        free(sums[l]);
    }
    if (s != HL_OK)
        hl_head_means_free(means);
    return s;
}

/* ---- importance ------------------------------------------------------------- */

/* Σ_h |∂L/∂g_h| over the batches, each weighted by its share of the set. */
static hl_status accumulate_gate_grads(hl_gpt *m, const hl_eval_set *set, double *raw,
                                       hl_error *err)
{
    const int stride = m->cfg.n_heads;
    hl_graph *g = hl_graph_new(0);
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "heads: out of memory");
    hl_graph_set_training(g, false);
    for (int first = 0; first < set->n && !hl_graph_failed(g); first += set->batch) {
        int B = set->n - first < set->batch ? set->n - first : set->batch;
        for (int l = 0; l < m->cfg.n_layers; l++)
            hl_tensor_zero_grad(m->blocks[l].attn.gate);
        hl_tensor *logits =
            hl_gpt_forward(g, m, set->tokens + (size_t)first * set->T, B, set->T, NULL);
        hl_tensor *loss = NULL;
        for (int k = 0; k < set->n_groups; k++) {
            hl_tensor *ce = hl_cross_entropy(g, logits, set->targets[k] + (size_t)first * set->T,
                                             HL_EVAL_IGNORE);
            loss = loss ? hl_add(g, loss, ce) : ce;
        }
        if (hl_graph_backward(g, loss) != HL_OK)
            break;
        for (int l = 0; l < m->cfg.n_layers; l++) {
            const hl_tensor *gate = m->blocks[l].attn.gate;
            for (int h = 0; h < gate->shape[0]; h++)
                raw[l * stride + h] += fabs((double)gate->grad[h]) * B / set->n;
        }
        hl_graph_reset(g);
    }
    hl_status s = HL_OK;
    if (hl_graph_failed(g))
        s = hl_error_set(err, hl_graph_status(g), "heads: importance: %s", hl_graph_message(g));
    hl_graph_free(g);
    for (int l = 0; l < m->cfg.n_layers; l++)
        hl_tensor_zero_grad(m->blocks[l].attn.gate);
    hl_params_zero_grad(m->params);
    return s;
}

hl_status hl_heads_importance(hl_gpt *m, const hl_eval_set *set, double *raw,
                              double *normalised, hl_error *err)
{
    if (check_set(m, set, err) != HL_OK)
        return err->status;
    if (!raw)
        return hl_error_set(err, HL_ERR_ARG, "heads: importance needs an output array");
    const int L = m->cfg.n_layers, stride = m->cfg.n_heads;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < stride; h++)
            raw[l * stride + h] = h < hl_gpt_layer_heads(&m->cfg, l) ? 0 : NAN;
    saved_state saved;
    if (save_state(m, &saved, err) != HL_OK)
        return err->status;
    clear_ablation(m);
    hl_status s = accumulate_gate_grads(m, set, raw, err);
    restore_state(m, &saved);
    if (s != HL_OK || !normalised)
        return s;
    for (int l = 0; l < L; l++) {
        const int H = hl_gpt_layer_heads(&m->cfg, l);
        double norm = 0;
        for (int h = 0; h < H; h++)
            norm += raw[l * stride + h] * raw[l * stride + h];
        norm = sqrt(norm);
        for (int h = 0; h < stride; h++)
            normalised[l * stride + h] =
                h >= H ? NAN : norm > 0 ? raw[l * stride + h] / norm : 0;
    }
    return HL_OK;
}
