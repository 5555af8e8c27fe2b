/* Head detectors on attention maps and weights, and the induction probe: see detectors.h. */
#include "analysis/detectors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/composition.h"
#include "analysis/linalg.h"
#include "core/rng.h"

static const char *const detector_names[HL_DETECTORS][2] = {
    {"previous_token", "prev"}, {"duplicate_token", "dup"}, {"induction", "induct"},
    {"copying", "copy"},        {"first_token", "first"},   {"local", "local"},
    {"self", "self"},           {"entropy", "entropy"},
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

/* Σ A[t,j] over j < t with x_j = x (at = 0) or over j+1 for j < t-1 with
 * x_j = x (at = 1); -1 when there is no such j. */
static double matched_mass(const int32_t *x, const hl_real *row, int t, int at)
{
    double mass = 0;
    bool any = false;
    for (int j = 0; j + at < t; j++)
        if (x[j] == x[t]) {
            any = true;
            mass += row[j + at];
        }
    return any ? mass : -1;
}

/* One query row of one head. */
static void add_row(double *sum, const int32_t *x, const hl_real *row, int t, int T,
                    int probe_start)
{
    sum[HL_DETECT_PREVIOUS] += row[t - 1];
    sum[HL_DETECT_FIRST] += row[0];
    sum[HL_DETECT_SELF] += row[t];
    for (int j = t - 3 < 0 ? 0 : t - 3; j < t; j++)
        sum[HL_DETECT_LOCAL] += row[j];
    double entropy = 0;
    for (int j = 0; j <= t; j++)
        if (row[j] > 0)
            entropy -= row[j] * log(row[j]);
    sum[HL_DETECT_ENTROPY] += entropy;
    double dup = matched_mass(x, row, t, 0);
    if (dup >= 0)
        sum[HL_DETECT_DUPLICATE] += dup;
    if (probe_start >= 0) {
        const int n = (T - probe_start) / 2;
        if (t >= probe_start + n && t < probe_start + 2 * n)
            sum[HL_DETECT_INDUCTION] += row[t - n + 1];
    } else {
        double ind = matched_mass(x, row, t, 1);
        if (ind >= 0)
            sum[HL_DETECT_INDUCTION] += ind;
    }
}

/* How many rows of sequence x each detector averages over. */
static void add_counts(double *count, const int32_t *x, int T, int probe_start)
{
    for (int t = 1; t < T; t++) {
        for (int d = 0; d < HL_DETECTORS; d++)
            if (d != HL_DETECT_DUPLICATE && d != HL_DETECT_INDUCTION && d != HL_DETECT_COPYING)
                count[d]++;
        bool dup = false, ind = false;
        for (int j = 0; j < t; j++)
            if (x[j] == x[t]) {
                dup = true;
                ind |= j + 1 < t;
            }
        count[HL_DETECT_DUPLICATE] += dup;
        if (probe_start < 0)
            count[HL_DETECT_INDUCTION] += ind;
    }
    if (probe_start >= 0)
        count[HL_DETECT_INDUCTION] += (T - probe_start) / 2;
}

hl_status hl_detector_sums_add(hl_detector_sums *s, const int32_t *tokens, const hl_tensor *attn,
                               int probe_start, hl_error *err)
{
    if (!attn || attn->rank != 4 || attn->shape[1] != s->H || attn->shape[2] != attn->shape[3])
        return hl_error_set(err, HL_ERR_SHAPE, "detectors: attention must be (B,%d,T,T)", s->H);
    const int B = attn->shape[0], H = s->H, T = attn->shape[2];
    if (probe_start >= 0 && (T - probe_start) / 2 < 1)
        return hl_error_set(err, HL_ERR_ARG, "detectors: a probe starting at %d does not fit "
                            "in %d positions", probe_start, T);
    for (int b = 0; b < B; b++) {
        const int32_t *x = tokens + (size_t)b * T;
        for (int h = 0; h < H; h++) {
            const hl_real *A = attn->data + ((size_t)b * H + h) * T * T;
            for (int t = 1; t < T; t++)
                add_row(s->sum[h], x, A + (size_t)t * T, t, T, probe_start);
        }
        add_counts(s->count, x, T, probe_start);
    }
    return HL_OK;
}

void hl_detector_sums_finish(const hl_detector_sums *s, hl_head_scores *out)
{
    for (int h = 0; h < s->H; h++)
        for (int d = 0; d < HL_DETECTORS; d++)
            out[h].v[d] = d != HL_DETECT_COPYING && s->count[d] > 0
                              ? s->sum[h][d] / s->count[d] : NAN;
}

/* ---- the probe and text windows ------------------------------------------- */

void hl_probe_free(hl_probe *p)
{
    hl_eval_set_free(p->set);
    memset(p, 0, sizeof *p);
}

hl_status hl_probe_new(const hl_gpt *m, const hl_probe_opts *opts, hl_probe *p, hl_error *err)
{
    memset(p, 0, sizeof *p);
    const hl_probe_opts o = opts ? *opts : (hl_probe_opts){.bos = -1};
    const int common = m->cfg.vocab_in < m->cfg.vocab_out ? m->cfg.vocab_in : m->cfg.vocab_out;
    const int lo = o.token_lo || o.token_hi ? o.token_lo : 0;
    const int hi = o.token_lo || o.token_hi ? o.token_hi : common;
    const int start = o.bos >= 0 ? 1 : 0;
    const int half = o.half ? o.half : (m->cfg.n_ctx - start) / 2;
    if (lo < 0 || hi > common || lo >= hi)
        return hl_error_set(err, HL_ERR_ARG, "probe: tokens %d..%d are not inside the model's "
                            "%d shared input and output tokens", lo, hi - 1, common);
    if (o.bos >= m->cfg.vocab_in)
        return hl_error_set(err, HL_ERR_ARG, "probe: BOS %d is not an input token (vocab_in %d)",
                            o.bos, m->cfg.vocab_in);
    if (half < 1 || start + 2 * half > m->cfg.n_ctx || o.sequences < 0 || o.batch < 0)
        return hl_error_set(err, HL_ERR_ARG, "probe: %d repeated tokens%s do not fit in the "
                            "model's context of %d", 2 * half, start ? " after BOS" : "",
                            m->cfg.n_ctx);
    const int T = start + 2 * half, n = o.sequences ? o.sequences : 100;
    if (!(p->set = hl_eval_set_new(n, T, 1, o.batch ? o.batch : 50, err)))
        return err->status;
    snprintf(p->set->group_names[0], sizeof p->set->group_names[0], "repeat");
    hl_rng rng;
    hl_rng_seed(&rng, o.seed);
    for (int i = 0; i < n; i++) {
        int32_t *x = p->set->tokens + (size_t)i * T, *y = p->set->targets[0] + (size_t)i * T;
        if (start)
            x[0] = o.bos;
        for (int k = 0; k < half; k++)
            x[start + k] = x[start + half + k] = lo + (int32_t)hl_rng_below(&rng, (uint32_t)(hi - lo));
        for (int t = start + half - 1; t + 1 < T; t++)
            y[t] = x[t + 1]; /* predictable from the first half */
    }
    p->start = start;
    p->half = half;
    return HL_OK;
}

hl_eval_set *hl_text_windows(const unsigned char *text, size_t size, int windows, int T,
                             int batch, hl_error *err)
{
    if (!text || T < 1 || windows < 1 || size < (size_t)T + 1) {
        hl_error_set(err, HL_ERR_ARG, "text windows: %zu bytes do not hold a window of %d",
                     size, T + 1);
        return NULL;
    }
    hl_eval_set *set = hl_eval_set_new(windows, T, 1, batch, err);
    if (!set)
        return NULL;
    snprintf(set->group_names[0], sizeof set->group_names[0], "text");
    const size_t room = size - (size_t)T - 1;
    for (int w = 0; w < windows; w++) {
        const size_t at = windows > 1 ? room * (size_t)w / (size_t)(windows - 1) : 0;
        for (int t = 0; t < T; t++) {
            set->tokens[(size_t)w * T + t] = text[at + t];
            set->targets[0][(size_t)w * T + t] = text[at + t + 1];
        }
    }
    return set;
}

/* ---- every head ------------------------------------------------------------ */

typedef struct {
    hl_detector_sums *sums; /* one per layer */
    int n_layers, probe_start;
} detect_ctx;

static hl_status detect_hook(void *ctx, const hl_eval_batch *b, const hl_tensor *logits,
                             const hl_gpt_run *run, hl_error *err)
{
    (void)logits;
    const detect_ctx *c = ctx;
    for (int l = 0; l < c->n_layers; l++)
        if (hl_detector_sums_add(&c->sums[l], b->tokens, run->trace[l].attn, c->probe_start,
                                 err) != HL_OK)
            return err->status;
    return HL_OK;
}

hl_status hl_heads_detect(const hl_gpt *m, const hl_eval_set *set, int probe_start,
                          const hl_gpt_run *run, hl_head_scores *out, hl_error *err)
{
    if (hl_eval_set_check(set, m, err) != HL_OK)
        return err->status;
    const int L = m->cfg.n_layers, stride = m->cfg.n_heads;
    detect_ctx c = {calloc((size_t)L, sizeof *c.sums), L, probe_start};
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
    hl_status s = hl_evaluate(m, set, &traced, detect_hook, &c, &ignored, err);
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

/* ---- copying ----------------------------------------------------------------- */

/* W_U's first K rows times the final LayerNorm gain, centred over the K rows. */
static double *unembedding(const hl_gpt *m, int K)
{
    const int E = m->cfg.d_model;
    double *u = malloc(sizeof *u * (size_t)K * E);
    for (int e = 0; u && e < E; e++) {
        double mean = 0;
        for (int v = 0; v < K; v++) {
            double g = m->lnf_w ? m->lnf_w->data[e] : 1;
            mean += (u[(size_t)v * E + e] = m->head_w->data[(size_t)v * E + e] * g) / K;
        }
        for (int v = 0; v < K; v++)
            u[(size_t)v * E + e] -= mean;
    }
    return u;
}

/* Σλ/Σ|λ| of (v·Eᵀ)(U·o) for one head; scratch holds 2·D·K + D·E + 3·D·D doubles. */
static hl_status head_copying(const hl_gpt *m, int l, int h, const double *emb, const double *u,
                              int K, double *scratch, double *score, hl_error *err)
{
    hl_head_weights w;
    if (hl_head_weights_get(m, l, h, &w, err) != HL_OK)
        return err->status;
    const int E = w.E, D = w.D;
    double *ve = scratch, *uo = ve + (size_t)D * K, *mat = uo + (size_t)K * D;
    double *re = mat + (size_t)D * D, *im = re + D;
    hl_matmul_d(D, K, E, w.v, 0, emb, 1, ve); /* v (D,E) · embᵀ (E,K) */
    hl_matmul_d(K, D, E, u, 0, w.o, 0, uo);   /* u (K,E) · o (E,D) */
    hl_matmul_d(D, D, K, ve, 0, uo, 0, mat);
    hl_head_weights_free(&w);
    if (hl_eigenvalues(D, mat, re, im, err) != HL_OK)
        return hl_error_set(err, err->status, "copying: L%dH%d: %s", l, h, err->message);
    double sum = 0, abs_sum = 0;
    for (int i = 0; i < D; i++) {
        sum += re[i];
        abs_sum += hypot(re[i], im[i]);
    }
    *score = abs_sum > 0 ? sum / abs_sum : 0;
    return HL_OK;
}

hl_status hl_heads_copying(const hl_gpt *m, double *out, hl_error *err)
{
    const int L = m->cfg.n_layers, stride = m->cfg.n_heads, E = m->cfg.d_model;
    const int D = E / stride;
    const int K = m->cfg.vocab_in < m->cfg.vocab_out ? m->cfg.vocab_in : m->cfg.vocab_out;
    double *emb = malloc(sizeof *emb * (size_t)K * E), *u = unembedding(m, K);
    double *scratch = malloc(sizeof *scratch * ((size_t)2 * D * K + (size_t)3 * D * D));
    hl_status s = emb && u && scratch ? HL_OK
                                      : hl_error_set(err, HL_ERR_NOMEM, "copying: out of memory");
    for (size_t i = 0; emb && i < (size_t)K * E; i++)
        emb[i] = m->tok_emb->data[i];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < stride; h++) {
            out[l * stride + h] = NAN;
            if (s == HL_OK && h < hl_gpt_layer_heads(&m->cfg, l))
                s = head_copying(m, l, h, emb, u, K, scratch, &out[l * stride + h], err);
        }
    free(emb);
    free(u);
    free(scratch);
    return s;
}

/* ---- roles ------------------------------------------------------------------- */

const char *hl_head_roles(const hl_head_scores *s, char *buf, size_t size)
{
    const double *v = s->v;
    const struct { bool on; const char *name; } roles[] = {
        {v[HL_DETECT_PREVIOUS] >= HL_ROLE_PREVIOUS, "previous-token"},
        {v[HL_DETECT_DUPLICATE] >= HL_ROLE_DUPLICATE, "duplicate-token"},
        {v[HL_DETECT_INDUCTION] >= HL_ROLE_INDUCTION, "induction"},
        {v[HL_DETECT_COPYING] >= HL_ROLE_COPYING, "copying"},
        {v[HL_DETECT_FIRST] >= HL_ROLE_FIRST, "first-token"},
        {v[HL_DETECT_LOCAL] >= HL_ROLE_LOCAL && !(v[HL_DETECT_PREVIOUS] >= HL_ROLE_PREVIOUS),
         "local"},
        {v[HL_DETECT_SELF] >= HL_ROLE_SELF, "self"},
    };
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (roles[i].on && n < size)
            n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? "+" : "", roles[i].name);
    if (!n)
        snprintf(buf, size, "-");
    return buf;
}

hl_detector hl_head_main_detector(const hl_head_scores *s)
{
    if (s->v[HL_DETECT_INDUCTION] >= HL_ROLE_INDUCTION)
        return HL_DETECT_INDUCTION;
    const hl_detector candidates[] = {HL_DETECT_PREVIOUS, HL_DETECT_DUPLICATE, HL_DETECT_INDUCTION,
                                      HL_DETECT_FIRST, HL_DETECT_SELF};
    hl_detector best = HL_DETECT_PREVIOUS;
    for (size_t i = 1; i < sizeof candidates / sizeof candidates[0]; i++)
        if (s->v[candidates[i]] > s->v[best])
            best = candidates[i];
    return best;
}
