/* Activation, path and attribution patching, direct logit attribution and the
 * logit lens: see patching.h. */
#include "analysis/patching.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "ops/ops.h"
#include "train/eval.h"

/* ---- the task and its metric ------------------------------------------------ */

static hl_status check_task(const hl_gpt *m, const hl_patch_task *t, hl_error *err)
{
    const hl_gpt_config *c = &m->cfg;
    if (!t || !t->clean || !t->corrupt || !t->answer || t->B < 1 || t->T < 1 || t->T > c->n_ctx)
        return hl_error_set(err, HL_ERR_ARG, "patching: the task needs clean, corrupted and "
                            "answer tokens (B,T) with 1 <= T <= n_ctx %d", c->n_ctx);
    if (t->metric == HL_METRIC_LOGIT_DIFF && !t->wrong)
        return hl_error_set(err, HL_ERR_ARG, "patching: a logit difference needs wrong tokens");
    int scored = 0;
    for (int i = 0; i < t->B * t->T; i++) {
        const int32_t a = t->answer[i], w = t->wrong ? t->wrong[i] : -1;
        if (t->clean[i] < 0 || t->clean[i] >= c->vocab_in || t->corrupt[i] < 0 ||
            t->corrupt[i] >= c->vocab_in)
            return hl_error_set(err, HL_ERR_ARG, "patching: token at %d is not an input token "
                                "(vocab_in %d)", i, c->vocab_in);
        if (a >= c->vocab_out || w >= c->vocab_out || a < -1 || w < -1)
            return hl_error_set(err, HL_ERR_ARG, "patching: answer at %d is not an output token "
                                "(vocab_out %d)", i, c->vocab_out);
        if (t->metric == HL_METRIC_LOGIT_DIFF && (a >= 0) != (w >= 0))
            return hl_error_set(err, HL_ERR_ARG, "patching: position %d has an answer without "
                                "a wrong token, or the other way round", i);
        scored += a >= 0;
    }
    if (!scored)
        return hl_error_set(err, HL_ERR_ARG, "patching: no position has an answer");
    return HL_OK;
}

hl_status hl_patch_induction_task(const hl_gpt *m, int sequences, int bos, int lo, int hi,
                                  uint64_t seed, hl_patch_task *t, int32_t **buf, hl_error *err)
{
    const hl_gpt_config *c = &m->cfg;
    const int start = bos >= 0 ? 1 : 0, fit = (c->n_ctx - start) / 2;
    const int half = fit < HL_REPEAT_HALF_MAX ? fit : HL_REPEAT_HALF_MAX, T = start + 2 * half;
    *buf = NULL;
    if (half < 3)
        return hl_error_set(err, HL_ERR_ARG, "induction task: the model's context of %d holds "
                            "halves of %d token%s%s; the task needs 3 or more (a context of %d "
                            "at least)", c->n_ctx, half, half == 1 ? "" : "s",
                            bos >= 0 ? " after BOS" : "", 6 + start);
    if (sequences < 1 || lo < 0 || hi - lo < 2 || hi > c->vocab_in ||
        hi > c->vocab_out || bos >= c->vocab_in)
        return hl_error_set(err, HL_ERR_ARG, "induction task: %d sequences of tokens %d..%d%s "
                            "do not fit a model of context %d and %d/%d tokens", sequences, lo,
                            hi - 1, bos >= 0 ? " after BOS" : "", c->n_ctx, c->vocab_in,
                            c->vocab_out);
    const size_t BT = (size_t)sequences * T;
    int32_t *x = malloc(sizeof *x * BT * 4);
    if (!x)
        return hl_error_set(err, HL_ERR_NOMEM, "induction task: out of memory");
    int32_t *clean = x, *corrupt = x + BT, *answer = x + 2 * BT, *wrong = x + 3 * BT;
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    for (int b = 0; b < sequences; b++) {
        int32_t *c1 = clean + (size_t)b * T, *c2 = corrupt + (size_t)b * T;
        if (start)
            c1[0] = c2[0] = bos;
        for (int k = 0; k < half; k++) {
            c1[start + k] = c1[start + half + k] = c2[start + half + k] =
                lo + (int32_t)hl_rng_below(&rng, (uint32_t)(hi - lo));
            c2[start + k] = c1[start + k];
            while (k % 2 == 0 && c2[start + k] == c1[start + k])
                c2[start + k] = lo + (int32_t)hl_rng_below(&rng, (uint32_t)(hi - lo));
        }
        for (int i = 0; i < T; i++) {
            const int j = i - start - half;
            const bool scored = j >= 0 && j % 2 == 0 && i + 1 < T;
            answer[(size_t)b * T + i] = scored ? c1[i + 1] : -1;
            wrong[(size_t)b * T + i] = scored ? c2[start + j] : -1;
        }
    }
    *t = (hl_patch_task){.B = sequences, .T = T, .clean = clean, .corrupt = corrupt,
                         .answer = answer, .wrong = wrong, .metric = HL_METRIC_LOSS};
    *buf = x;
    return HL_OK;
}

/* The metric at scored position i (of B·T) from its row of V logits, read
 * as the model predicts with them: soft-capped when it caps (cfg). */
static double position_metric(const hl_gpt_config *cfg, const hl_patch_task *t,
                              const hl_real *row, int V, int i)
{
    const int32_t a = t->answer[i];
    if (t->metric != HL_METRIC_LOGIT_DIFF)
        return hl_eval_token_loss(cfg, row, V, a);
    return (double)hl_gpt_logit(cfg, row[a]) - (double)hl_gpt_logit(cfg, row[t->wrong[i]]);
}

/* The metric of each of `copies` blocks of B rows of logits (copies·B, T, V)
 * of the model of cfg. */
static void metric_of_logits(const hl_gpt_config *cfg, const hl_patch_task *t,
                             const hl_tensor *logits, int copies, double *out)
{
    const int V = logits->shape[2], BT = t->B * t->T;
    for (int c = 0; c < copies; c++) {
        double sum = 0;
        int n = 0;
        for (int i = 0; i < BT; i++) {
            if (t->answer[i] < 0)
                continue;
            sum += position_metric(cfg, t, logits->data + ((size_t)c * BT + i) * V, V, i);
            n++;
        }
        out[c] = sum / n;
    }
}

/* tokens (B,T) repeated `copies` times, malloc'ed. */
static int32_t *repeat_tokens(const int32_t *tokens, int BT, int copies)
{
    int32_t *r = malloc(sizeof *r * (size_t)BT * copies);
    for (int c = 0; r && c < copies; c++)
        memcpy(r + (size_t)c * BT, tokens, sizeof *r * (size_t)BT);
    return r;
}

/* Runs `copies` copies of tokens (already repeated) with run, the metric of
 * each into out. */
static hl_status run_metric(hl_graph *g, const hl_gpt *m, const hl_patch_task *t,
                            const int32_t *tokens, int copies, const hl_gpt_run *run, double *out,
                            hl_error *err)
{
    hl_graph_reset(g);
    hl_graph_set_grad_enabled(g, false);
    hl_tensor *logits = hl_gpt_forward(g, m, tokens, copies * t->B, t->T, run);
    if (hl_graph_failed(g))
        return hl_error_set(err, hl_graph_status(g), "patching: %s", hl_graph_message(g));
    metric_of_logits(&m->cfg, t, logits, copies, out);
    return HL_OK;
}

/* A graph in evaluation mode: no dropout in any pass, whatever the model
 * was trained with (a graph starts in training mode). NULL when out of
 * memory. */
static hl_graph *eval_graph(void)
{
    hl_graph *g = hl_graph_new(0);
    if (g)
        hl_graph_set_training(g, false);
    return g;
}

/* Whether two metrics differ enough to normalise by (HL_ERR_ARG if not). */
static hl_status check_gap(double clean, double corrupt, hl_error *err)
{
    if (fabs(clean - corrupt) > 1e-9 * fmax(1, fabs(clean)))
        return HL_OK;
    return hl_error_set(err, HL_ERR_ARG, "patching: the clean and corrupted inputs score the "
                        "same (%.6g): nothing to restore", clean);
}

hl_status hl_patch_baselines(const hl_gpt *m, const hl_patch_task *t, double *clean,
                             double *corrupt, hl_error *err)
{
    if (check_task(m, t, err) != HL_OK)
        return err->status;
    hl_graph *g = eval_graph();
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    hl_status s = run_metric(g, m, t, t->clean, 1, NULL, clean, err);
    if (s == HL_OK)
        s = run_metric(g, m, t, t->corrupt, 1, NULL, corrupt, err);
    hl_graph_free(g);
    return s == HL_OK ? check_gap(*clean, *corrupt, err) : s;
}

/* Each sequence's metric over its own scored positions (NaN without one). */
static hl_status sequence_metrics(hl_graph *g, const hl_gpt *m, const hl_patch_task *t,
                                  const int32_t *tokens, double *out, hl_error *err)
{
    hl_graph_reset(g);
    hl_graph_set_grad_enabled(g, false);
    hl_tensor *logits = hl_gpt_forward(g, m, tokens, t->B, t->T, NULL);
    if (hl_graph_failed(g))
        return hl_error_set(err, hl_graph_status(g), "patching: %s", hl_graph_message(g));
    const int V = logits->shape[2];
    for (int b = 0; b < t->B; b++) {
        double sum = 0;
        int n = 0;
        for (int i = b * t->T; i < (b + 1) * t->T; i++)
            if (t->answer[i] >= 0) {
                sum += position_metric(&m->cfg, t, logits->data + (size_t)i * V, V, i);
                n++;
            }
        out[b] = n ? sum / n : NAN;
    }
    return HL_OK;
}

hl_status hl_patch_sequence_metrics(const hl_gpt *m, const hl_patch_task *t, double *clean,
                                    double *corrupt, hl_error *err)
{
    if (check_task(m, t, err) != HL_OK)
        return err->status;
    hl_graph *g = eval_graph();
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    hl_status s = sequence_metrics(g, m, t, t->clean, clean, err);
    if (s == HL_OK)
        s = sequence_metrics(g, m, t, t->corrupt, corrupt, err);
    hl_graph_free(g);
    return s;
}

/* ---- captured activations ---------------------------------------------------- */

/* One run's activations of every layer, copied out of its graph. */
typedef struct {
    int L;
    hl_tensor *act[HL_GPT_MAX_LAYERS][HL_ACTS]; /* Q, K, V, PATTERN, Z (per layer) */
    hl_tensor *resid[HL_GPT_MAX_LAYERS + 1];
} captured;

static void captured_free(captured *c)
{
    for (int l = 0; l < c->L; l++)
        for (int a = 0; a < HL_ACTS; a++)
            hl_tensor_free(c->act[l][a]);
    for (int l = 0; l <= c->L; l++)
        hl_tensor_free(c->resid[l]);
    memset(c, 0, sizeof *c);
}

static hl_tensor *heap_copy(const hl_tensor *t)
{
    hl_tensor *c = hl_tensor_new(t->name, t->rank, t->shape, false);
    if (c)
        memcpy(c->data, t->data, t->numel * sizeof(hl_real));
    return c;
}

static hl_tensor *of_trace(const hl_mha_trace *tr, hl_act act)
{
    switch (act) {
    case HL_ACT_Q: return tr->q;
    case HL_ACT_K: return tr->k;
    case HL_ACT_V: return tr->v;
    case HL_ACT_PATTERN: return tr->attn;
    default: return tr->heads;
    }
}

/* Every layer's activations and residual stream on tokens (B,T); with a
 * task, also the metric of this run into *metric. */
static hl_status capture(hl_graph *g, const hl_gpt *m, const int32_t *tokens, int B, int T,
                         captured *c, const hl_patch_task *task, double *metric, hl_error *err)
{
    memset(c, 0, sizeof *c);
    c->L = m->cfg.n_layers;
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    hl_tensor *resid[HL_GPT_MAX_LAYERS + 1];
    hl_graph_reset(g);
    hl_graph_set_grad_enabled(g, false);
    hl_tensor *logits =
        hl_gpt_forward(g, m, tokens, B, T, &(hl_gpt_run){.trace = trace, .resid = resid});
    if (hl_graph_failed(g))
        return hl_error_set(err, hl_graph_status(g), "patching: %s", hl_graph_message(g));
    if (task)
        metric_of_logits(&m->cfg, task, logits, 1, metric);
    bool ok = true;
    for (int l = 0; l < c->L; l++)
        for (int a = HL_ACT_Q; a <= HL_ACT_Z; a++)
            ok &= (c->act[l][a] = heap_copy(of_trace(&trace[l], a))) != NULL;
    for (int l = 0; l <= c->L; l++)
        ok &= (c->resid[l] = heap_copy(resid[l])) != NULL;
    if (!ok) {
        captured_free(c);
        return hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    }
    return HL_OK;
}

/* ---- activation patching ------------------------------------------------------- */

/* `value` (rows, ...) repeated `copies` times along dim 0, as a new tensor. */
static hl_tensor *repeat_rows(const hl_tensor *value, int copies)
{
    int shape[HL_MAX_RANK];
    memcpy(shape, value->shape, sizeof(int) * (size_t)value->rank);
    shape[0] *= copies;
    hl_tensor *r = hl_tensor_new("patch", value->rank, shape, false);
    for (int c = 0; r && c < copies; c++)
        memcpy(r->data + (size_t)c * value->numel, value->data, value->numel * sizeof(hl_real));
    return r;
}

/* Units of one layer patched together: unit u covers head u / per and, with
 * per = T, query position u % T; units [u0, u1) run as copies of the batch. */
typedef struct {
    int H, per, u0, u1;
} unit_range;

/* A (copies·B, H, per, 1) mask with ones at each copy's unit (with per = 1
 * it broadcasts over positions); for the residual stream (H = 1) the same
 * values as (copies·B, per, 1). */
static hl_tensor *unit_mask(const unit_range *r, int B, bool resid)
{
    const int copies = r->u1 - r->u0;
    hl_tensor *w = resid ? hl_tensor_new("where", 3, (int[]){copies * B, r->per, 1}, false)
                         : hl_tensor_new("where", 4, (int[]){copies * B, r->H, r->per, 1}, false);
    if (!w)
        return NULL;
    memset(w->data, 0, w->numel * sizeof(hl_real));
    for (int c = 0; c < copies; c++) {
        const int u = r->u0 + c, h = u / r->per, t = u % r->per;
        for (int b = 0; b < B; b++)
            w->data[(((size_t)c * B + b) * r->H + h) * r->per + t] = 1;
    }
    return w;
}

/* Copies per forward pass: copies·B within HL_PATCH_MAX_ROWS sequences, and
 * the pass's logits and activations (about T·(V + 16·L·E) values a sequence)
 * within HL_EVAL_PASS_BYTES. A GPT-2-sized model's 20 induction sequences of
 * 257 tokens are then one copy a pass, where 256 rows would hold 12 GB of
 * logits alone. */
static int copies_per_pass(const hl_gpt *m, int B, int T)
{
    const hl_gpt_config *c = &m->cfg;
    const double per_sequence =
        (double)T * (c->vocab_out + 16.0 * c->n_layers * c->d_model) * sizeof(hl_real);
    const double rows = fmin(HL_PATCH_MAX_ROWS, HL_EVAL_PASS_BYTES / per_sequence);
    return rows <= B ? 1 : (int)(rows / B);
}

/* Runs the corrupted input with, in copy c, `value` patched into activation
 * `act` of `layer` where unit u0 + c's mask is 1; the normalised metric of
 * each copy into out[u - u0]. */
static hl_status patched_units(hl_graph *g, const hl_gpt *m, const hl_patch_task *t, int layer,
                               hl_act act, const hl_tensor *value, const unit_range *r,
                               double clean, double corrupt, double *out, hl_error *err)
{
    const int copies = r->u1 - r->u0;
    const bool resid = act == HL_ACT_RESID_PRE || act == HL_ACT_RESID_POST;
    int32_t *tokens = repeat_tokens(t->corrupt, t->B * t->T, copies);
    hl_tensor *values = repeat_rows(value, copies), *where = unit_mask(r, t->B, resid);
    hl_status s = tokens && values && where
                      ? HL_OK
                      : hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    if (s == HL_OK) {
        const hl_act_patch p = {layer, act, values, where};
        s = run_metric(g, m, t, tokens, copies, &(hl_gpt_run){.patches = &p, .n_patches = 1},
                       out, err);
    }
    for (int c = 0; s == HL_OK && c < copies; c++)
        out[c] = (out[c] - corrupt) / (clean - corrupt);
    free(tokens);
    hl_tensor_free(values);
    hl_tensor_free(where);
    return s;
}

static bool is_head_act(hl_act act)
{
    return act == HL_ACT_Q || act == HL_ACT_K || act == HL_ACT_V || act == HL_ACT_PATTERN ||
           act == HL_ACT_Z;
}

/* out's entries (per head, or per head and position) all NaN. */
static void fill_nan(double *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = NAN;
}

hl_status hl_patch_heads(const hl_gpt *m, const hl_patch_task *t, hl_act act, bool per_position,
                         double *out, hl_error *err)
{
    if (!is_head_act(act))
        return hl_error_set(err, HL_ERR_ARG, "patching: heads are patched at q, k, v, "
                            "pattern or z, not activation %d", (int)act);
    double clean, corrupt;
    if (hl_patch_baselines(m, t, &clean, &corrupt, err) != HL_OK)
        return err->status;
    const hl_gpt_config *c = &m->cfg;
    const int per = per_position ? t->T : 1;
    fill_nan(out, (size_t)c->n_layers * c->n_heads * per);
    hl_graph *g = eval_graph();
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    captured cl;
    hl_status s = capture(g, m, t->clean, t->B, t->T, &cl, NULL, NULL, err);
    const int step = copies_per_pass(m, t->B, t->T);
    for (int l = 0; s == HL_OK && l < c->n_layers; l++) {
        const int H = hl_gpt_layer_heads(c, l), units = H * per;
        for (int u0 = 0; s == HL_OK && u0 < units; u0 += step) {
            const unit_range r = {H, per, u0, u0 + step < units ? u0 + step : units};
            s = patched_units(g, m, t, l, act, cl.act[l][act], &r, clean, corrupt,
                              out + (size_t)l * c->n_heads * per + u0, err);
        }
    }
    captured_free(&cl);
    hl_graph_free(g);
    return s;
}

hl_status hl_patch_resid(const hl_gpt *m, const hl_patch_task *t, double *out, hl_error *err)
{
    double clean, corrupt;
    if (hl_patch_baselines(m, t, &clean, &corrupt, err) != HL_OK)
        return err->status;
    const int L = m->cfg.n_layers, T = t->T;
    hl_graph *g = eval_graph();
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    captured cl;
    hl_status s = capture(g, m, t->clean, t->B, T, &cl, NULL, NULL, err);
    const int step = copies_per_pass(m, t->B, t->T);
    for (int l = 0; s == HL_OK && l <= L; l++) {
        /* After the last layer: leaving it (resid_post) instead of entering. */
        const int layer = l < L ? l : L - 1;
        const hl_act act = l < L ? HL_ACT_RESID_PRE : HL_ACT_RESID_POST;
        for (int u0 = 0; s == HL_OK && u0 < T; u0 += step) {
            const unit_range r = {1, T, u0, u0 + step < T ? u0 + step : T};
            s = patched_units(g, m, t, layer, act, cl.resid[l], &r, clean, corrupt,
                              out + (size_t)l * T + u0, err);
        }
    }
    captured_free(&cl);
    hl_graph_free(g);
    return s;
}

/* ---- path patching -------------------------------------------------------------- */

/* The (B,H,T,D) act (q, k or v) that layer lr computes from its corrupted
 * input plus sender (ls, hs)'s clean-minus-corrupted output through W_O. With
 * grouped-query attention k and v are projected per key/value head and then
 * handed to each query head, so a receiver's k or v is its own copy of its
 * group's head, the activation hl_patch_heads patches: the path changes what
 * the receiver reads, not what the other heads of its group read. */
static hl_tensor *receiver_input(hl_graph *g, const hl_gpt *m, const captured *cl,
                                 const captured *co, int ls, int hs, int lr, hl_act act)
{
    const hl_mha *sender = &m->blocks[ls].attn;
    const hl_tensor *zc = cl->act[ls][HL_ACT_Z], *zx = co->act[ls][HL_ACT_Z];
    const int B = zc->shape[0], Hs = zc->shape[1], T = zc->shape[2], D = zc->shape[3];
    const int E = m->cfg.d_model, inner_s = Hs * D;
    /* delta (B,T,E) = (zc - zx)[:, hs] · W_O[:, hs·D:(hs+1)·D]ᵀ, in double. */
    hl_tensor *x = hl_graph_tensor(g, "resid", 3, (int[]){B, T, E});
    if (hl_graph_failed(g))
        return &g->poison;
    const hl_real *wo = sender->out_proj_weight->data;
    for (int b = 0; b < B; b++)
        for (int tt = 0; tt < T; tt++) {
            const size_t z_at = (((size_t)b * Hs + hs) * T + tt) * D;
            for (int e = 0; e < E; e++) {
                double sum = 0;
                for (int d = 0; d < D; d++)
                    sum += ((double)zc->data[z_at + d] - (double)zx->data[z_at + d]) *
                           (double)wo[(size_t)e * inner_s + (size_t)hs * D + d];
                const size_t at = ((size_t)b * T + tt) * E + e;
                x->data[at] = (hl_real)((double)co->resid[lr]->data[at] + sum);
            }
        }
    const hl_gpt_block *blk = &m->blocks[lr];
    const hl_mha *recv = &blk->attn;
    /* The in-projection's rows: q of the H query heads, then k and v of the
     * K key/value heads (models/mha.h). */
    const int Dr = recv->cfg.head_dim, inner = recv->cfg.num_heads * Dr;
    const int heads = act == HL_ACT_Q ? recv->cfg.num_heads : recv->cfg.kv_heads;
    const int width = heads * Dr;
    const int start = act == HL_ACT_Q ? 0 : act == HL_ACT_K ? inner : inner + width;
    hl_tensor *a = hl_gpt_normalize(g, m, x, blk->ln1_w, blk->ln1_b);
    hl_tensor *w = hl_narrow(g, recv->in_proj_weight, 0, start, width);
    hl_tensor *bias = recv->in_proj_bias ? hl_narrow(g, recv->in_proj_bias, 0, start, width)
                                         : NULL;
    hl_tensor *p = hl_linear(g, a, w, bias);
    p = hl_reshape(g, p, 4, (int[]){B, T, heads, Dr});
    p = hl_permute(g, p, (int[]){0, 2, 1, 3});
    /* as the module does before its patches apply */
    return act == HL_ACT_Q ? p : hl_mha_ungroup(g, recv, p);
}

hl_status hl_patch_paths(const hl_gpt *m, const hl_patch_task *t, hl_act act, double *out,
                         hl_error *err)
{
    return hl_patch_paths_from(m, t, act, NULL, out, err);
}

hl_status hl_patch_paths_from(const hl_gpt *m, const hl_patch_task *t, hl_act act,
                              const hl_head_set *senders, double *out, hl_error *err)
{
    if (act != HL_ACT_Q && act != HL_ACT_K && act != HL_ACT_V)
        return hl_error_set(err, HL_ERR_ARG, "path patching: a receiver reads its input "
                            "through q, k or v, not activation %d", (int)act);
    double clean, corrupt;
    if (hl_patch_baselines(m, t, &clean, &corrupt, err) != HL_OK)
        return err->status;
    const hl_gpt_config *c = &m->cfg;
    const int N = hl_gpt_total_heads(c);
    fill_nan(out, (size_t)N * N);
    hl_graph *g = eval_graph(), *side = eval_graph();
    captured cl = {0}, co = {0};
    hl_status s = g && side ? HL_OK : hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    if (s == HL_OK)
        s = capture(g, m, t->clean, t->B, t->T, &cl, NULL, NULL, err);
    if (s == HL_OK)
        s = capture(g, m, t->corrupt, t->B, t->T, &co, NULL, NULL, err);
    const int step = copies_per_pass(m, t->B, t->T);
    for (int ls = 0; s == HL_OK && ls < c->n_layers; ls++)
        for (int hs = 0; s == HL_OK && hs < hl_gpt_layer_heads(c, ls); hs++)
            for (int lr = ls + 1; s == HL_OK && lr < c->n_layers &&
                                  (!senders || senders->on[ls][hs]); lr++) {
                hl_graph_reset(side);
                hl_graph_set_grad_enabled(side, false);
                hl_tensor *input = receiver_input(side, m, &cl, &co, ls, hs, lr, act);
                if (hl_graph_failed(side)) {
                    s = hl_error_set(err, hl_graph_status(side), "path patching: %s",
                                     hl_graph_message(side));
                    break;
                }
                const int H = hl_gpt_layer_heads(c, lr);
                double *row = malloc(sizeof *row * (size_t)H);
                if (!row)
                    s = hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
                /* Each receiver a copy of the batch, as many a pass as fit. */
                for (int u0 = 0; s == HL_OK && u0 < H; u0 += step) {
                    const unit_range r = {H, 1, u0, u0 + step < H ? u0 + step : H};
                    s = patched_units(g, m, t, lr, act, input, &r, clean, corrupt, row + u0,
                                      err);
                }
                for (int hr = 0; s == HL_OK && hr < H; hr++)
                    out[(size_t)hl_gpt_head_index(c, ls, hs) * N + hl_gpt_head_index(c, lr, hr)] =
                        row[hr];
                free(row);
            }
    captured_free(&cl);
    captured_free(&co);
    hl_graph_free(side);
    hl_graph_free(g);
    return s;
}

/* ---- attribution patching ---------------------------------------------------------- */

hl_status hl_patch_attrib_heads(const hl_gpt *m, const hl_patch_task *t, hl_act act,
                                bool per_position, double *out, hl_error *err)
{
    if (!is_head_act(act))
        return hl_error_set(err, HL_ERR_ARG, "attribution patching: heads are read at q, k, v, "
                            "pattern or z, not activation %d", (int)act);
    if (check_task(m, t, err) != HL_OK)
        return err->status;
    const hl_gpt_config *c = &m->cfg;
    const int per = per_position ? t->T : 1;
    fill_nan(out, (size_t)c->n_layers * c->n_heads * per);
    hl_graph *g = eval_graph();
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    /* Two forward passes and one backward: the clean run's activations and
     * metric, then the corrupted run with gradients to its metric. */
    captured cl;
    double clean, corrupt;
    hl_status s = capture(g, m, t->clean, t->B, t->T, &cl, t, &clean, err);
    if (s != HL_OK) {
        hl_graph_free(g);
        return s;
    }
    hl_graph_reset(g);
    hl_graph_set_grad_enabled(g, true);
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    hl_tensor *logits = hl_gpt_forward(g, m, t->corrupt, t->B, t->T,
                                       &(hl_gpt_run){.trace = trace});
    /* the model's loss: soft-capped when it caps, as position_metric reads */
    hl_tensor *metric = hl_gpt_loss(g, m, logits, t->answer, -1);
    if (t->metric == HL_METRIC_LOGIT_DIFF) /* CE(wrong) - CE(answer) = logit diff */
        metric = hl_add(g, hl_gpt_loss(g, m, logits, t->wrong, -1), hl_scale(g, metric, -1));
    if (!hl_graph_failed(g)) {
        metric_of_logits(&m->cfg, t, logits, 1, &corrupt);
        s = check_gap(clean, corrupt, err);
    }
    if (s == HL_OK && !hl_graph_failed(g)) {
        for (int l = 0; l < c->n_layers; l++) /* their gradients are read below */
            hl_tensor_retain_grad(of_trace(&trace[l], act));
        hl_graph_backward(g, metric);
    }
    if (s == HL_OK && hl_graph_failed(g))
        s = hl_error_set(err, hl_graph_status(g), "attribution patching: %s",
                         hl_graph_message(g));
    for (int l = 0; s == HL_OK && l < c->n_layers; l++) {
        const hl_tensor *a = of_trace(&trace[l], act), *ref = cl.act[l][act];
        const int B = a->shape[0], H = a->shape[1], T = a->shape[2];
        const size_t X = a->numel / ((size_t)B * H * T);
        for (int h = 0; h < H; h++)
            for (int tt = 0; tt < T; tt++) {
                double sum = 0;
                for (int b = 0; b < B; b++) {
                    const size_t at = (((size_t)b * H + h) * T + tt) * X;
                    for (size_t x = 0; x < X; x++)
                        sum += ((double)ref->data[at + x] - (double)a->data[at + x]) *
                               (double)(a->grad ? a->grad[at + x] : 0);
                }
                double *cell = &out[((size_t)l * c->n_heads + h) * per + (per > 1 ? tt : 0)];
                *cell = (isnan(*cell) ? 0 : *cell) + sum / (clean - corrupt);
            }
    }
    /* The backward pass also filled the weights' gradients: leave them zeroed. */
    hl_params_zero_grad(m->params);
    captured_free(&cl);
    hl_graph_free(g);
    return s;
}

/* ---- direct logit attribution and the logit lens ------------------------------------- */

/* The unembedding direction read at position i: W_U[answer] (- W_U[wrong]),
 * times the final LayerNorm's gain, into dir (E). */
static void read_direction(const hl_gpt *m, const hl_patch_task *t, int i, double *dir)
{
    const int E = m->cfg.d_model;
    const hl_real *wu = m->head_w->data;
    for (int e = 0; e < E; e++) {
        double d = wu[(size_t)t->answer[i] * E + e];
        if (t->metric == HL_METRIC_LOGIT_DIFF)
            d -= wu[(size_t)t->wrong[i] * E + e];
        dir[e] = d * (m->lnf_w ? (double)m->lnf_w->data[e] : 1);
    }
}

hl_status hl_patch_logit_attribution(const hl_gpt *m, const hl_patch_task *t, double *out,
                                     hl_error *err)
{
    if (check_task(m, t, err) != HL_OK)
        return err->status;
    const hl_gpt_config *c = &m->cfg;
    const int L = c->n_layers, E = c->d_model, T = t->T;
    fill_nan(out, (size_t)L * c->n_heads);
    hl_graph *g = eval_graph();
    double *dir = malloc(sizeof *dir * (size_t)E), *vec = malloc(sizeof *vec * (size_t)E);
    captured cl = {0};
    hl_status s = g && dir && vec ? capture(g, m, t->clean, t->B, T, &cl, NULL, NULL, err)
                                  : hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    int scored = 0;
    for (int i = 0; i < t->B * T; i++)
        scored += t->answer[i] >= 0;
    for (int l = 0; s == HL_OK && l < L; l++) {
        const hl_tensor *z = cl.act[l][HL_ACT_Z];
        const int H = z->shape[1], D = z->shape[3];
        const hl_real *wo = m->blocks[l].attn.out_proj_weight->data;
        for (int h = 0; h < H; h++) {
            double total = 0;
            for (int i = 0; i < t->B * T; i++) {
                if (t->answer[i] < 0)
                    continue;
                const int b = i / T, tt = i % T;
                /* The head's output in the stream, centred and scaled as the
                 * final LayerNorm did to the whole stream here. */
                const size_t z_at = (((size_t)b * H + h) * T + tt) * D;
                double mean = 0;
                for (int e = 0; e < E; e++) {
                    double sum = 0;
                    for (int d = 0; d < D; d++)
                        sum += (double)z->data[z_at + d] * (double)wo[(size_t)e * H * D + h * D + d];
                    vec[e] = sum;
                    mean += sum / E;
                }
                /* The final norm's scale is frozen at the clean run's; LayerNorm
                 * also removes the mean, RMSNorm does not. */
                double scale = 1;
                if (m->lnf_w) {
                    const hl_real *r = cl.resid[L]->data + (size_t)i * E;
                    const bool centred = c->norm == HL_GPT_NORM_LAYER;
                    double mu = 0, var = 0;
                    for (int e = 0; centred && e < E; e++)
                        mu += (double)r[e] / E;
                    for (int e = 0; e < E; e++)
                        var += ((double)r[e] - mu) * ((double)r[e] - mu) / E;
                    scale = 1 / sqrt(var + hl_gpt_norm_eps(c));
                    if (!centred)
                        mean = 0;
                } else {
                    mean = 0;
                }
                read_direction(m, t, i, dir);
                double logit = 0;
                for (int e = 0; e < E; e++)
                    logit += (vec[e] - mean) * scale * dir[e];
                total += logit;
            }
            out[l * c->n_heads + h] = total / scored;
        }
    }
    captured_free(&cl);
    free(dir);
    free(vec);
    hl_graph_free(g);
    return s;
}

hl_status hl_patch_logit_lens(const hl_gpt *m, const hl_patch_task *t, int k, double *metric,
                              int32_t *top, hl_error *err)
{
    if (check_task(m, t, err) != HL_OK)
        return err->status;
    const hl_gpt_config *c = &m->cfg;
    const int L = c->n_layers, T = t->T, V = c->vocab_out;
    if (k < 0 || k > V)
        return hl_error_set(err, HL_ERR_ARG, "logit lens: k %d is not in 0..%d", k, V);
    hl_graph *g = eval_graph();
    if (!g)
        return hl_error_set(err, HL_ERR_NOMEM, "patching: out of memory");
    captured cl;
    hl_status s = capture(g, m, t->clean, t->B, T, &cl, NULL, NULL, err);
    for (int l = 0; s == HL_OK && l <= L; l++) {
        hl_graph_reset(g);
        hl_tensor *x = cl.resid[l];
        x = hl_gpt_normalize(g, m, x, m->lnf_w, m->lnf_b);
        hl_tensor *logits = hl_linear(g, x, m->head_w, m->head_b);
        if (hl_graph_failed(g)) {
            s = hl_error_set(err, hl_graph_status(g), "logit lens: %s", hl_graph_message(g));
            break;
        }
        metric_of_logits(c, t, logits, 1, &metric[l]);
        for (int tt = 0; tt < T && k > 0; tt++) {
            const hl_real *row = logits->data + (size_t)tt * V; /* sequence 0 */
            int32_t *best = top + ((size_t)l * T + tt) * k;
            for (int i = 0; i < k; i++)
                best[i] = -1;
            for (int v = 0; v < V; v++) {
                int i = k;
                while (i > 0 && (best[i - 1] < 0 || row[v] > row[best[i - 1]]))
                    i--;
                if (i == k)
                    continue;
                memmove(best + i + 1, best + i, sizeof *best * (size_t)(k - 1 - i));
                best[i] = v;
            }
        }
    }
    captured_free(&cl);
    hl_graph_free(g);
    return s;
}
