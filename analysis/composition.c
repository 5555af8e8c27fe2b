/* Composition scores between heads: see composition.h. */
#include "analysis/composition.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/linalg.h"
#include "core/rng.h"

const char *hl_compose_kind_name(hl_compose_kind kind)
{
    static const char *const names[HL_COMPOSE_KINDS] = {"q", "k", "v"};
    return kind >= 0 && kind < HL_COMPOSE_KINDS ? names[kind] : "?";
}

void hl_head_weights_free(hl_head_weights *w)
{
    free(w->q);
    free(w->k);
    free(w->v);
    free(w->o);
    memset(w, 0, sizeof *w);
}

/* Rows [row0, row0+D) of the (·,E) weight, times the gain per column (NULL:
 * 1), each row centred when asked. */
static void read_rows(double *dst, const hl_tensor *w, int row0, int D, int E,
                      const hl_tensor *gain, bool centre)
{
    for (int i = 0; i < D; i++) {
        double mean = 0;
        for (int e = 0; e < E; e++) {
            double x = w->data[(size_t)(row0 + i) * E + e];
            dst[i * E + e] = gain ? x * gain->data[e] : x;
            mean += dst[i * E + e] / E;
        }
        for (int e = 0; centre && e < E; e++)
            dst[i * E + e] -= mean;
    }
}

hl_status hl_head_weights_get(const hl_gpt *m, int l, int h, hl_head_weights *w, hl_error *err)
{
    memset(w, 0, sizeof *w);
    if (l < 0 || l >= m->cfg.n_layers || h < 0 || h >= hl_gpt_layer_heads(&m->cfg, l))
        return hl_error_set(err, HL_ERR_ARG, "composition: the model has no head L%dH%d", l, h);
    const hl_gpt_block *b = &m->blocks[l];
    const hl_mha *a = &b->attn;
    if (!a->packed)
        return hl_error_set(err, HL_ERR_ARG, "composition: layer %d's attention is not packed", l);
    const int E = a->cfg.embed_dim, D = a->cfg.head_dim, inner = hl_mha_inner_dim(a);
    /* LayerNorm removes the mean, so its readers and writers are centred;
     * RMSNorm does not (TransformerLens skips the centring there too). Both
     * gains are folded in. */
    const bool ln = m->cfg.norm == HL_GPT_NORM_LAYER;
    w->E = E;
    w->D = D;
    w->q = malloc(sizeof *w->q * (size_t)D * E);
    w->k = malloc(sizeof *w->k * (size_t)D * E);
    w->v = malloc(sizeof *w->v * (size_t)D * E);
    w->o = malloc(sizeof *w->o * (size_t)E * D);
    if (!w->q || !w->k || !w->v || !w->o) {
        hl_head_weights_free(w);
        return hl_error_set(err, HL_ERR_NOMEM, "composition: out of memory for L%dH%d", l, h);
    }
    /* The in-projection's rows: q of the H query heads, then k and v of the
     * K key/value heads (models/mha.h); head h reads key/value head kv. */
    const int kv = hl_mha_kv_head(a, h), kv_inner = a->cfg.kv_heads * D;
    read_rows(w->q, a->in_proj_weight, h * D, D, E, b->ln1_w, ln);
    read_rows(w->k, a->in_proj_weight, inner + kv * D, D, E, b->ln1_w, ln);
    read_rows(w->v, a->in_proj_weight, inner + kv_inner + kv * D, D, E, b->ln1_w, ln);
    for (int j = 0; j < D; j++) {
        double mean = 0;
        for (int e = 0; e < E; e++)
            mean += (w->o[e * D + j] = a->out_proj_weight->data[(size_t)e * inner + h * D + j]) / E;
        for (int e = 0; ln && e < E; e++)
            w->o[e * D + j] -= mean;
    }
    return HL_OK;
}

/* ---- scores from Gram matrices ------------------------------------------ */

/* What a head contributes to every score: its weights and their (D,D) Grams. */
typedef struct {
    hl_head_weights w;
    double *gq, *gk, *gv, *go; /* q·qᵀ, k·kᵀ, v·vᵀ, oᵀ·o */
    double ov2, qk2;           /* ‖W_OV‖², ‖W_QK‖² */
} head_grams;

/* Leaves g empty, so a second call (the caller's cleanup after
 * head_grams_get failed) frees nothing twice. */
static void head_grams_free(head_grams *g)
{
    hl_head_weights_free(&g->w);
    free(g->gq);
    free(g->gk);
    free(g->gv);
    free(g->go);
    memset(g, 0, sizeof *g);
}

static hl_status head_grams_get(const hl_gpt *m, int l, int h, head_grams *g, hl_error *err)
{
    memset(g, 0, sizeof *g);
    if (hl_head_weights_get(m, l, h, &g->w, err) != HL_OK)
        return err->status;
    const int E = g->w.E, D = g->w.D;
    double **grams[4] = {&g->gq, &g->gk, &g->gv, &g->go};
    for (int i = 0; i < 4; i++)
        if (!(*grams[i] = malloc(sizeof(double) * (size_t)D * D))) {
            head_grams_free(g);
            return hl_error_set(err, HL_ERR_NOMEM, "composition: out of memory");
        }
    hl_matmul_d(D, D, E, g->w.q, 0, g->w.q, 1, g->gq);
    hl_matmul_d(D, D, E, g->w.k, 0, g->w.k, 1, g->gk);
    hl_matmul_d(D, D, E, g->w.v, 0, g->w.v, 1, g->gv);
    hl_matmul_d(D, D, E, g->w.o, 1, g->w.o, 0, g->go);
    /* ‖A·B‖² = tr((AᵀA)(BBᵀ)); W_OV = vᵀoᵀ, W_QK = qᵀk. */
    g->ov2 = hl_dot_d(g->gv, g->go, (long)D * D);
    g->qk2 = hl_dot_d(g->gq, g->gk, (long)D * D);
    return HL_OK;
}

/* ‖A1·M·B2‖_F for A1ᵀA1 = ga (D1,D1), M (D1,D2), B2·B2ᵀ = gb (D2,D2):
 * tr(Mᵀ·ga·M·gb) = <ga·M, M·gb>. */
static double middle_norm(int D1, int D2, const double *ga, const double *mid, const double *gb,
                          double *t1, double *t2)
{
    hl_matmul_d(D1, D2, D1, ga, 0, mid, 0, t1);
    hl_matmul_d(D1, D2, D2, mid, 0, gb, 0, t2);
    double s = hl_dot_d(t1, t2, (long)D1 * D2);
    return sqrt(s > 0 ? s : 0);
}

/* W_OV^s · X^d = vₛᵀ·(oₛᵀ·R)·B with the destination's factors R (E,D) and
 * B (D,E): Q R = qᵀ, B = k; K R = kᵀ, B = q; V R = vᵀ, B = oᵀ. */
static double pair_score(const head_grams *s, const head_grams *d, hl_compose_kind kind,
                         double *mid, double *t1, double *t2)
{
    const int E = s->w.E, D1 = s->w.D, D2 = d->w.D;
    const double *r = kind == HL_COMPOSE_Q ? d->w.q : kind == HL_COMPOSE_K ? d->w.k : d->w.v;
    const double *gb = kind == HL_COMPOSE_Q ? d->gk : kind == HL_COMPOSE_K ? d->gq : d->go;
    hl_matmul_d(D1, D2, E, s->w.o, 1, r, 1, mid); /* oₛᵀ (D1,E) · rᵀ (E,D2) */
    const double denom = sqrt(s->ov2) * sqrt(kind == HL_COMPOSE_V ? d->ov2 : d->qk2);
    return denom > 0 ? middle_norm(D1, D2, s->gv, mid, gb, t1, t2) / denom : 0;
}

hl_status hl_composition_scores(const hl_gpt *m, hl_compose_kind kind, double *scores,
                                hl_error *err)
{
    if (kind < 0 || kind >= HL_COMPOSE_KINDS || !scores)
        return hl_error_set(err, HL_ERR_ARG, "composition: bad kind %d or no output", (int)kind);
    const int N = hl_gpt_total_heads(&m->cfg), D = m->cfg.d_model / m->cfg.n_heads;
    head_grams *g = calloc((size_t)N, sizeof *g);
    double *tmp = malloc(sizeof *tmp * 3 * (size_t)D * D);
    hl_status s = g && tmp ? HL_OK : hl_error_set(err, HL_ERR_NOMEM, "composition: out of memory");
    int *layer = malloc(sizeof *layer * (size_t)N);
    if (!layer)
        s = hl_error_set(err, HL_ERR_NOMEM, "composition: out of memory");
    for (int l = 0, i = 0; s == HL_OK && l < m->cfg.n_layers; l++)
        for (int h = 0; s == HL_OK && h < hl_gpt_layer_heads(&m->cfg, l); h++, i++) {
            layer[i] = l;
            s = head_grams_get(m, l, h, &g[i], err);
        }
    for (int i = 0; s == HL_OK && i < N; i++)
        for (int j = 0; j < N; j++)
            scores[(size_t)i * N + j] =
                layer[i] < layer[j]
                    ? pair_score(&g[i], &g[j], kind, tmp, tmp + D * D, tmp + 2 * D * D)
                    : NAN;
    for (int i = 0; g && i < N; i++)
        head_grams_free(&g[i]);
    free(g);
    free(tmp);
    free(layer);
    return s;
}

double hl_composition_baseline(int E, int D, int samples, uint64_t seed)
{
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    const size_t n = (size_t)E * D;
    double *f = malloc(sizeof *f * 4 * n), *g = malloc(sizeof *g * 5 * (size_t)D * D);
    if (!f || !g || samples < 1) {
        free(f);
        free(g);
        return NAN;
    }
    double *a1 = f, *b1 = f + n, *a2 = f + 2 * n, *b2 = f + 3 * n; /* (E,D) (D,E) (E,D) (D,E) */
    double *ga = g, *gb1 = g + D * D, *ga2 = g + 2 * D * D, *gb = g + 3 * D * D;
    double *mid = g + 4 * D * D, total = 0;
    double *t1 = malloc(sizeof *t1 * 2 * (size_t)D * D);
    for (int s = 0; t1 && s < samples; s++) {
        for (size_t i = 0; i < 4 * n; i++)
            f[i] = hl_rng_normal(&rng);
        hl_matmul_d(D, D, E, a1, 1, a1, 0, ga);  /* a1ᵀa1 */
        hl_matmul_d(D, D, E, b1, 0, b1, 1, gb1); /* b1b1ᵀ */
        hl_matmul_d(D, D, E, a2, 1, a2, 0, ga2);
        hl_matmul_d(D, D, E, b2, 0, b2, 1, gb);
        hl_matmul_d(D, D, E, b1, 0, a2, 0, mid); /* b1·a2 */
        double left = sqrt(hl_dot_d(ga, gb1, (long)D * D));
        double right = sqrt(hl_dot_d(ga2, gb, (long)D * D));
        total += middle_norm(D, D, ga, mid, gb, t1, t1 + D * D) / (left * right);
    }
    const double mean = t1 ? total / samples : NAN;
    free(t1);
    free(f);
    free(g);
    return mean;
}
