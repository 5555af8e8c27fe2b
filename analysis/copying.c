/* Copying scores from the OV circuit: see copying.h. */
#include "analysis/copying.h"

#include <math.h>
#include <stdlib.h>

#include "analysis/composition.h"
#include "analysis/linalg.h"

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

/* Rows of both operands taken together in gram: a block of both (2 x 64 x E
 * doubles) stays in cache while every row of the product passes over it. */
#define GRAM_ROWS 64

/* out (E,E) = aᵀ (E,K) · b (K,E), each element summed over k in order (the
 * same bits for any thread count), in blocks of GRAM_ROWS rows of both. */
static void gram(const double *a, const double *b, int K, int E, double *out)
{
    for (size_t i = 0; i < (size_t)E * E; i++)
        out[i] = 0;
    for (int k0 = 0; k0 < K; k0 += GRAM_ROWS) {
        const int k1 = k0 + GRAM_ROWS < K ? k0 + GRAM_ROWS : K;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < E; i++)
            for (int k = k0; k < k1; k++) {
                const double x = a[(size_t)k * E + i];
                const double *row = b + (size_t)k * E;
                double *sum = out + (size_t)i * E;
                for (int j = 0; j < E; j++)
                    sum[j] += x * row[j];
            }
    }
}

/* Σλ/Σ|λ| of (v·Eᵀ)(U·o) = v·(EᵀU)·o for one head, ue = UᵀE = (EᵀU)ᵀ (E,E)
 * computed once for every head (the vocabulary's K rows enter once, not per
 * head; transposed, so the product reads its rows); scratch holds D·E + 3·D·D
 * doubles. */
static hl_status head_copying(const hl_gpt *m, int l, int h, const double *ue, double *scratch,
                              double *score, hl_error *err)
{
    hl_head_weights w;
    if (hl_head_weights_get(m, l, h, &w, err) != HL_OK)
        return err->status;
    const int E = w.E, D = w.D;
    double *veu = scratch, *mat = veu + (size_t)D * E;
    double *re = mat + (size_t)D * D, *im = re + D;
    hl_matmul_d(D, E, E, w.v, 0, ue, 1, veu); /* v (D,E) · EᵀU (E,E) */
    hl_matmul_d(D, D, E, veu, 0, w.o, 0, mat); /* · o (E,D) */
    hl_head_weights_free(&w);
    hl_error local = {0}; /* err keeps its first message: this one gets the head's name */
    if (hl_eigenvalues(D, mat, re, im, &local) != HL_OK)
        return hl_error_set(err, local.status, "copying: L%dH%d: %s", l, h, local.message);
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
    double *ue = malloc(sizeof *ue * (size_t)E * E);
    double *scratch = malloc(sizeof *scratch * ((size_t)D * E + (size_t)3 * D * D));
    hl_status s = emb && u && ue && scratch
                      ? HL_OK
                      : hl_error_set(err, HL_ERR_NOMEM, "copying: out of memory");
    for (size_t i = 0; emb && i < (size_t)K * E; i++)
        emb[i] = m->tok_emb->data[i];
    if (s == HL_OK)
        gram(u, emb, K, E, ue);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < stride; h++) {
            out[l * stride + h] = NAN;
            if (s != HL_OK || h >= hl_gpt_layer_heads(&m->cfg, l))
                continue;
            /* A head whose eigenvalues cannot be found (non-finite weights,
             * no convergence) keeps NaN: one score lost, not the study (nor
             * a training run that reports its heads). */
            hl_error head_err = {0};
            s = head_copying(m, l, h, ue, scratch, &out[l * stride + h], &head_err);
            if (s == HL_ERR_NUMERIC)
                s = HL_OK;
            else if (s != HL_OK)
                hl_error_set(err, s, "%s", head_err.message);
        }
    free(emb);
    free(u);
    free(ue);
    free(scratch);
    return s;
}
