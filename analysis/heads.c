/* Evaluation with heads ablated, mean head outputs and head importance: see heads.h. */
#include "analysis/heads.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "train/eval.h"

void hl_heads_means_free(hl_head_means *means)
{
    for (int l = 0; l < HL_GPT_MAX_LAYERS; l++) {
        hl_tensor_free(means->layer[l]);
        means->layer[l] = NULL;
    }
    means->n_layers = 0;
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

/* ---- runs: gates and offsets for one evaluation, the model untouched ------ */

void hl_heads_run_free(hl_heads_run *r)
{
    for (int i = 0; i < r->n_owned; i++)
        hl_tensor_free(r->owned[i]);
    memset(r, 0, sizeof *r);
}

static hl_tensor *heads_run_tensor(hl_heads_run *r, const char *name, int rank, const int *shape,
                                   bool requires_grad, hl_error *err)
{
    hl_tensor *t = hl_tensor_new_checked(name, rank, shape, requires_grad, err);
    if (t)
        r->owned[r->n_owned++] = t;
    return t;
}

/* Gates of 1 on every layer, requiring grad: ∂L/∂g_h is head h's importance. */
static hl_status gate_every_layer(hl_heads_run *r, const hl_gpt *m, hl_error *err)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        int H = hl_gpt_layer_heads(&m->cfg, l);
        hl_tensor *gate = heads_run_tensor(r, "gate", 1, &H, true, err);
        if (!gate)
            return err->status;
        hl_tensor_fill(gate, 1);
        r->run.gate[l] = gate;
    }
    return HL_OK;
}

static hl_status fill_ablation(hl_heads_run *r, const hl_gpt *m, int T,
                               const hl_head_set *ablate, const hl_head_means *means,
                               hl_error *err)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const hl_mha *a = &m->blocks[l].attn;
        const int H = a->cfg.num_heads, D = a->cfg.head_dim;
        if (!ablate)
            break;
        bool any = false;
        for (int h = 0; h < H; h++)
            any |= ablate->on[l][h];
        if (!any)
            continue;
        hl_tensor *gate = heads_run_tensor(r, "gate", 1, &H, false, err);
        if (!gate)
            return err->status;
        for (int h = 0; h < H; h++)
            gate->data[h] = ablate->on[l][h] ? 0 : 1;
        r->run.gate[l] = gate;
        if (!means)
            continue;
        const hl_tensor *mean = l < means->n_layers ? means->layer[l] : NULL;
        if (!mean || mean->rank != 3 || mean->shape[0] != H || mean->shape[1] != T ||
            mean->shape[2] != D)
            return hl_error_set(err, HL_ERR_SHAPE,
                                "heads: the mean outputs of layer %d are not (%d,%d,%d); were "
                                "they measured on this model and set?",
                                l, H, T, D);
        hl_tensor *offset = heads_run_tensor(r, "head_offset", 3, mean->shape, false, err);
        if (!offset)
            return err->status;
        const size_t per_head = (size_t)T * D;
        for (int h = 0; h < H; h++)
            if (ablate->on[l][h])
                memcpy(offset->data + h * per_head, mean->data + h * per_head,
                       per_head * sizeof(hl_real));
        r->run.head_offset[l] = offset;
    }
    return HL_OK;
}

hl_status hl_heads_run_ablate(hl_heads_run *r, const hl_gpt *m, int T, const hl_head_set *ablate,
                              const hl_head_means *means, hl_error *err)
{
    memset(r, 0, sizeof *r);
    if (ablate && check_heads(m, ablate, err) != HL_OK)
        return err->status;
    hl_status s = fill_ablation(r, m, T, ablate, means, err);
    if (s != HL_OK)
        hl_heads_run_free(r);
    return s;
}

/* ---- evaluation ------------------------------------------------------------- */

hl_status hl_heads_evaluate(const hl_gpt *m, const hl_eval_set *set, const hl_head_set *ablate,
                            const hl_head_means *means, hl_eval_result *out, hl_error *err)
{
    return hl_heads_evaluate_positions(m, set, ablate, means, NULL, out, err);
}

hl_status hl_heads_evaluate_positions(const hl_gpt *m, const hl_eval_set *set,
                                      const hl_head_set *ablate, const hl_head_means *means,
                                      double *position_loss, hl_eval_result *out, hl_error *err)
{
    if (hl_eval_set_check(set, m, err) != HL_OK)
        return err->status;
    hl_heads_run r;
    hl_status s = hl_heads_run_ablate(&r, m, set->T, ablate, means, err);
    if (s == HL_OK)
        s = position_loss ? hl_eval_position_loss(m, set, &r.run, position_loss, out, err)
                          : hl_eval_loss(m, set, &r.run, NULL, NULL, out, err);
    hl_heads_run_free(&r);
    return s;
}

/* ---- mean head outputs ------------------------------------------------------ */

typedef struct {
    int n_layers;
    double *sums[HL_GPT_MAX_LAYERS]; /* (H_l,T,D) */
} output_sums;

static hl_status add_head_outputs(void *ctx, const hl_eval_batch *b, const hl_tensor *logits,
                                  const hl_gpt_run *run, hl_error *err)
{
    (void)logits, (void)err;
    output_sums *s = ctx;
    for (int l = 0; l < s->n_layers; l++) {
        const hl_tensor *heads = run->trace[l].heads; /* (B,H,T,D) */
        const size_t per_seq = hl_tensor_span(heads, 1, 4);
        for (int i = 0; i < b->B; i++)
            for (size_t k = 0; k < per_seq; k++)
                s->sums[l][k] += heads->data[(size_t)i * per_seq + k];
    }
    return HL_OK;
}

hl_status hl_heads_mean_outputs(const hl_gpt *m, const hl_eval_set *set, hl_head_means *means,
                                hl_error *err)
{
    memset(means, 0, sizeof *means);
    if (hl_eval_set_check(set, m, err) != HL_OK)
        return err->status;
    output_sums sums = {.n_layers = m->cfg.n_layers};
    hl_status s = HL_OK;
    for (int l = 0; l < m->cfg.n_layers && s == HL_OK; l++) {
        const hl_mha *a = &m->blocks[l].attn;
        int shape[3] = {a->cfg.num_heads, set->T, a->cfg.head_dim};
        means->layer[l] = hl_tensor_new_checked("head_means", 3, shape, false, err);
        sums.sums[l] = calloc((size_t)shape[0] * shape[1] * shape[2], sizeof *sums.sums[l]);
        if (!means->layer[l] || !sums.sums[l])
            s = hl_error_set(err, HL_ERR_NOMEM, "heads: out of memory");
    }
    means->n_layers = m->cfg.n_layers;
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    hl_eval_result ignored;
    if (s == HL_OK)
        s = hl_eval_loss(m, set, &(hl_gpt_run){.trace = trace}, add_head_outputs, &sums, &ignored,
                         err);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        for (size_t i = 0; s == HL_OK && i < means->layer[l]->numel; i++)
            means->layer[l]->data[i] = (hl_real)(sums.sums[l][i] / set->n);
        free(sums.sums[l]);
    }
    if (s != HL_OK)
        hl_heads_means_free(means);
    return s;
}

/* ---- importance ------------------------------------------------------------- */

/* Σ_h |∂L/∂g_h| over the batches, each weighted by its share of the set; L is
 * the model's loss (hl_gpt_loss, soft-capped when the model is). */
static hl_status accumulate_gate_grads(const hl_gpt *m, const hl_eval_set *set,
                                       const hl_gpt_run *run, double *raw, hl_error *err)
{
    const int stride = m->cfg.n_heads;
    hl_graph *g = hl_graph_new(0);
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "heads: out of memory");
    hl_graph_set_training(g, false);
    for (hl_eval_batch b = {0}; !hl_graph_failed(g) && hl_eval_set_next(set, &b);) {
        for (int l = 0; l < m->cfg.n_layers; l++)
            hl_tensor_zero_grad(run->gate[l]);
        hl_tensor *logits = hl_gpt_forward(g, m, b.tokens, b.B, set->T, run);
        hl_tensor *loss = NULL;
        for (int k = 0; k < set->n_groups; k++) {
            hl_tensor *ce = hl_gpt_loss(g, m, logits, b.targets[k], HL_EVAL_IGNORE);
            loss = loss ? hl_add(g, loss, ce) : ce;
        }
        if (hl_graph_backward(g, loss) != HL_OK)
            break;
        for (int l = 0; l < m->cfg.n_layers; l++) {
            const hl_tensor *gate = run->gate[l];
            for (int h = 0; h < gate->shape[0]; h++)
                raw[l * stride + h] += fabs((double)gate->grad[h]) * b.B / set->n;
        }
        hl_graph_reset(g);
    }
    hl_status s = HL_OK;
    if (hl_graph_failed(g))
        s = hl_error_set(err, hl_graph_status(g), "heads: importance: %s", hl_graph_message(g));
    hl_graph_free(g);
    return s;
}

hl_status hl_heads_importance(const hl_gpt *m, const hl_eval_set *set, double *raw,
                              double *normalised, hl_error *err)
{
    if (hl_eval_set_check(set, m, err) != HL_OK)
        return err->status;
    if (!raw)
        return hl_error_set(err, HL_ERR_ARG, "heads: importance needs an output array");
    const int L = m->cfg.n_layers, stride = m->cfg.n_heads;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < stride; h++)
            raw[l * stride + h] = h < hl_gpt_layer_heads(&m->cfg, l) ? 0 : NAN;
    hl_heads_run r = {0};
    hl_status s = gate_every_layer(&r, m, err);
    if (s == HL_OK)
        s = accumulate_gate_grads(m, set, &r.run, raw, err);
    hl_heads_run_free(&r);
    /* The backward passes also filled the weights' gradients: leave them zeroed. */
    hl_params_zero_grad(m->params);
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

/* Whether importance a ranks ahead of b (NaN behind every number). */
static bool ahead(double a, double b)
{
    return !isnan(a) && (isnan(b) || a > b);
}

int hl_heads_importance_order(const hl_gpt_config *c, const double *normalised, int *order)
{
    int n = 0;
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++)
            order[n++] = l * c->n_heads + h;
    /* Insertion: stable, so ties keep layer and head order. */
    for (int i = 1; i < n; i++) {
        const int k = order[i];
        int j = i;
        for (; j > 0 && ahead(normalised[k], normalised[order[j - 1]]); j--)
            order[j] = order[j - 1];
        order[j] = k;
    }
    return n;
}
