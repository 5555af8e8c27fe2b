/* Head detectors on attention maps: see detectors.h. */
#include "analysis/detectors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/copying.h"

static const char *const detector_names[HL_DETECTORS][2] = {
    {"previous_token", "prev"}, {"duplicate_token", "dup"}, {"induction", "induct"},
    {"copying", "copy"},        {"first_token", "first"},   {"local", "local"},
    {"self", "self"},           {"entropy", "entropy"},     {"two_back", "2back"},
    {"previous_token_tl", "prev_tl"}, {"duplicate_token_tl", "dup_tl"},
    {"induction_tl", "ind_tl"},
};

const char *hl_detector_name(hl_detector d)
{
    return d >= 0 && d < HL_DETECTORS ? detector_names[d][0] : "?";
}

const char *hl_detector_short(hl_detector d)
{
    return d >= 0 && d < HL_DETECTORS ? detector_names[d][1] : "?";
}

/* ---- attention detectors ------------------------------------------------- */

void hl_detector_sums_begin(hl_detector_sums *s, int H)
{
    memset(s, 0, sizeof *s);
    s->H = H;
}

/* Σ A[t,j] over j < t with x_j = x (at = 0) or over j+1 for j < t-3 with
 * x_j = x (at = 1: induction, its target before the two-back position); -1
 * when there is no such j. */
static double matched_mass(const int32_t *x, const hl_real *row, int t, int at)
{
    double mass = 0;
    bool any = false;
    for (int j = 0; j + 3 * at < t; j++)
        if (x[j] == x[t]) {
            any = true;
            mass += row[j + at];
        }
    return any ? mass : -1;
}

static bool wanted(unsigned skip, hl_detector d)
{
    return !(skip >> d & 1u);
}

/* One query row of one head; repeat is the sequence's, or NULL for text. */
static void add_row(double *sum, unsigned skip, const int32_t *x, const hl_real *row, int t,
                    const hl_repeat *repeat)
{
    sum[HL_DETECT_PREVIOUS] += row[t - 1];
    if (t >= 2)
        sum[HL_DETECT_TWO_BACK] += row[t - 2];
    sum[HL_DETECT_FIRST] += row[0];
    sum[HL_DETECT_SELF] += row[t];
    for (int j = t - 3 < 0 ? 0 : t - 3; j < t; j++)
        sum[HL_DETECT_LOCAL] += row[j];
    if (wanted(skip, HL_DETECT_ENTROPY)) {
        double entropy = 0;
        for (int j = 0; j <= t; j++)
            if (row[j] > 0)
                entropy -= row[j] * log(row[j]);
        sum[HL_DETECT_ENTROPY] += entropy;
    }
    double dup = wanted(skip, HL_DETECT_DUPLICATE) ? matched_mass(x, row, t, 0) : -1;
    if (dup >= 0)
        sum[HL_DETECT_DUPLICATE] += dup;
    if (repeat) {
        if (t >= repeat->begin && t < repeat->end && repeat->lag > 3)
            sum[HL_DETECT_INDUCTION] += row[t - repeat->lag + 1];
    } else if (wanted(skip, HL_DETECT_INDUCTION)) {
        double ind = matched_mass(x, row, t, 1);
        if (ind >= 0)
            sum[HL_DETECT_INDUCTION] += ind;
    }
}

/* TransformerLens's three scores of one head's map A (T,T) of sequence x. */
static void add_transformer_lens(double *sum, const int32_t *x, const hl_real *A, int T)
{
    double matched[3] = {0, 0, 0}, total = 0;
    for (int t = 0; t < T; t++) {
        const hl_real *row = A + (size_t)t * T;
        for (int j = 0; j <= t; j++) {
            total += row[j];
            matched[0] += j == t - 1 ? row[j] : 0;
            matched[1] += j < t && x[j] == x[t] ? row[j] : 0;
            matched[2] += j >= 1 && x[j - 1] == x[t] ? row[j] : 0;
        }
    }
    sum[HL_DETECT_PREVIOUS_TL] += matched[0] / total;
    sum[HL_DETECT_DUPLICATE_TL] += matched[1] / total;
    sum[HL_DETECT_INDUCTION_TL] += matched[2] / total;
}

static bool is_transformer_lens(int d)
{
    return d == HL_DETECT_PREVIOUS_TL || d == HL_DETECT_DUPLICATE_TL || d == HL_DETECT_INDUCTION_TL;
}

/* How many rows of sequence x each detector averages over (TransformerLens's:
 * how many sequences). */
static void add_counts(double *count, const int32_t *x, int T, const hl_repeat *repeat)
{
    for (int d = 0; d < HL_DETECTORS; d++)
        count[d] += is_transformer_lens(d);
    for (int t = 1; t < T; t++) {
        for (int d = 0; d < HL_DETECTORS; d++)
            if (d != HL_DETECT_DUPLICATE && d != HL_DETECT_INDUCTION && d != HL_DETECT_COPYING &&
                d != HL_DETECT_TWO_BACK && !is_transformer_lens(d))
                count[d]++;
        count[HL_DETECT_TWO_BACK] += t >= 2;
        bool dup = false, ind = false;
        for (int j = 0; j < t; j++)
            if (x[j] == x[t]) {
                dup = true;
                ind |= j + 3 < t;
            }
        count[HL_DETECT_DUPLICATE] += dup;
        if (!repeat)
            count[HL_DETECT_INDUCTION] += ind;
    }
    /* A lag of 1, 2 or 3 puts the induction target on the query itself, the
     * previous or the two-back token: no measure of its own, so none (NaN). */
    if (repeat && repeat->lag > 3)
        count[HL_DETECT_INDUCTION] += repeat->end - repeat->begin;
}

hl_status hl_detector_sums_add(hl_detector_sums *s, const int32_t *tokens, const hl_tensor *attn,
                               const hl_repeat *repeats, hl_error *err)
{
    if (!attn || attn->rank != 4 || attn->shape[1] != s->H || attn->shape[2] != attn->shape[3])
        return hl_error_set(err, HL_ERR_SHAPE, "detectors: attention must be (B,%d,T,T)", s->H);
    const int B = attn->shape[0], H = s->H, T = attn->shape[2];
    if (repeats && hl_eval_repeats_check(repeats, B, T, "detectors", err) != HL_OK)
        return err->status;
    const unsigned tl = 1u << HL_DETECT_PREVIOUS_TL | 1u << HL_DETECT_DUPLICATE_TL |
                        1u << HL_DETECT_INDUCTION_TL;
    const bool any_tl = (s->skip & tl) != tl;
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++)
        for (int b = 0; b < B; b++) {
            const int32_t *x = tokens + (size_t)b * T;
            const hl_repeat *repeat = repeats ? &repeats[b] : NULL;
            const hl_real *A = attn->data + ((size_t)b * H + h) * T * T;
            for (int t = 1; t < T; t++)
                add_row(s->sum[h], s->skip, x, A + (size_t)t * T, t, repeat);
            if (any_tl)
                add_transformer_lens(s->sum[h], x, A, T);
        }
    for (int b = 0; b < B; b++)
        add_counts(s->count, tokens + (size_t)b * T, T, repeats ? &repeats[b] : NULL);
    return HL_OK;
}

void hl_detector_sums_finish(const hl_detector_sums *s, hl_head_scores *out)
{
    for (int h = 0; h < s->H; h++)
        for (int d = 0; d < HL_DETECTORS; d++)
            out[h].v[d] = d != HL_DETECT_COPYING && wanted(s->skip, d) && s->count[d] > 0
                              ? s->sum[h][d] / s->count[d] : NAN;
}

/* ---- every head ------------------------------------------------------------ */

typedef struct {
    hl_detector_sums *sums; /* one per layer */
    int n_layers;
} detect_ctx;

static hl_status detect_hook(void *ctx, const hl_eval_batch *b, const hl_tensor *logits,
                             const hl_gpt_run *run, hl_error *err)
{
    (void)logits;
    const detect_ctx *c = ctx;
    for (int l = 0; l < c->n_layers; l++)
        if (hl_detector_sums_add(&c->sums[l], b->tokens, run->trace[l].attn, b->repeats,
                                 err) != HL_OK)
            return err->status;
    return HL_OK;
}

hl_status hl_heads_detect(const hl_gpt *m, const hl_eval_set *set, const hl_gpt_run *run,
                          hl_head_scores *out, hl_error *err)
{
    if (hl_eval_set_check(set, m, err) != HL_OK)
        return err->status;
    const int L = m->cfg.n_layers, stride = m->cfg.n_heads;
    detect_ctx c = {calloc((size_t)L, sizeof *c.sums), L};
    double *copying = malloc(sizeof *copying * (size_t)L * stride);
    if (!c.sums || !copying) {
        free(c.sums);
        free(copying);
        return hl_error_set(err, HL_ERR_NOMEM, "detectors: out of memory");
    }
    for (int l = 0; l < L; l++)
        hl_detector_sums_begin(&c.sums[l], hl_gpt_layer_heads(&m->cfg, l));
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    hl_gpt_run traced = run ? *run : (hl_gpt_run){0};
    traced.trace = trace;
    hl_eval_result ignored;
    hl_status s = hl_eval_loss(m, set, &traced, detect_hook, &c, &ignored, err);
    if (s == HL_OK)
        s = hl_heads_copying(m, copying, err);
    for (int l = 0; s == HL_OK && l < L; l++) {
        hl_detector_sums_finish(&c.sums[l], out + l * stride);
        for (int h = 0; h < stride; h++) {
            if (h >= c.sums[l].H)
                for (int d = 0; d < HL_DETECTORS; d++)
                    out[l * stride + h].v[d] = NAN;
            out[l * stride + h].v[HL_DETECT_COPYING] = copying[l * stride + h];
        }
    }
    free(c.sums);
    free(copying);
    return s;
}
