/* Smeared keys (Olsson et al. 2022): see ops/smear.h. */
#include <math.h>
#include <stdint.h>

#include "ops/internal.h"

static double sigmoid(double a) { return 1 / (1 + exp(-a)); }

/* Whether key s of batch b begins a document: s = 0, or another document's
 * id than key s - 1's. */
static bool starts_document(const hl_tensor *doc_ids, int b, int s)
{
    if (s == 0)
        return true;
    if (!doc_ids)
        return false;
    const hl_real *ids = doc_ids->data + (size_t)b * doc_ids->shape[1];
    return ids[s] != ids[s - 1];
}

hl_tensor *hl_smear_docs(hl_graph *g, hl_tensor *k, hl_tensor *alpha, const hl_tensor *doc_ids)
{
    hl_tensor *in[2] = {k, alpha};
    if (!hl_op_inputs_ok(g, HL_OP_SMEAR, 2, in))
        return &g->poison;
    char ks[HL_SHAPE_STR_MAX], as[HL_SHAPE_STR_MAX];
    if (k->rank != 4 || alpha->rank != 1 || alpha->shape[0] != k->shape[1])
        return hl_op_fail(g, HL_OP_SMEAR, HL_ERR_SHAPE,
                          "keys %s and alpha %s must be (B,H,S,D) and (H)", hl_shape_str(k, ks),
                          hl_shape_str(alpha, as));
    const int B = k->shape[0], H = k->shape[1], S = k->shape[2], D = k->shape[3];
    /* doc_ids is no recorded input (nothing flows back to it): checked here. */
    if (doc_ids && hl_tensor_is_poison(doc_ids))
        return hl_op_fail(g, HL_OP_SMEAR, HL_ERR_ARG, "doc_ids is a poisoned tensor");
    if (doc_ids && (doc_ids->rank != 2 || doc_ids->shape[0] != B || doc_ids->shape[1] != S))
        return hl_op_fail(g, HL_OP_SMEAR, HL_ERR_SHAPE, "doc_ids %s does not match keys %s "
                          "(it must be (B,S))", hl_shape_str(doc_ids, as), hl_shape_str(k, ks));
    hl_tensor *out = hl_op_output(g, HL_OP_SMEAR, 4, k->shape);
    if (hl_graph_failed(g))
        return &g->poison;
#pragma omp parallel for if (k->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const double w = sigmoid((double)alpha->data[bh % H]);
        const hl_real *src = k->data + (size_t)bh * S * D;
        hl_real *dst = out->data + (size_t)bh * S * D;
        for (int s = 0; s < S; s++) {
            const size_t at = (size_t)s * D;
            if (starts_document(doc_ids, bh / H, s))
                for (int j = 0; j < D; j++)
                    dst[at + j] = src[at + j];
            else
                for (size_t i = at; i < at + (size_t)D; i++)
                    dst[i] = (hl_real)(w * (double)src[i] + (1 - w) * (double)src[i - D]);
        }
    }
    hl_node *n = hl_op_record(g, HL_OP_SMEAR, out, 2, in);
    /* Backward's document starts, kept only when a node is recorded. */
    uint8_t *starts = n && doc_ids ? hl_graph_alloc(g, (size_t)B * S) : NULL;
    if (starts)
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++)
                starts[(size_t)b * S + s] = starts_document(doc_ids, b, s);
    if (n)
        n->saved = starts;
    return hl_graph_failed(g) ? &g->poison : out;
}

hl_tensor *hl_smear(hl_graph *g, hl_tensor *k, hl_tensor *alpha)
{
    return hl_smear_docs(g, k, alpha, NULL);
}

/* dk[s] (+)= w·dy[s] + (1 - w)·dy[s+1], where a key that begins a document
 * takes its dy[s] whole and gives nothing to the key before it; dalpha_h +=
 * w(1 - w)·Σ (k[s] - k[s-1])·dy[s] over b, the keys s that do not begin one,
 * and d: each (b,h) slice summed on its own, then the slices added in order
 * of b. */
void hl_smear_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *k = n->inputs[0], *alpha = n->inputs[1];
    const int B = k->shape[0], H = k->shape[1], S = k->shape[2], D = k->shape[3];
    const uint8_t *saved = n->saved;
    const hl_real *dy = n->out->grad;
    hl_real *dalpha = hl_op_grad(g, alpha);
    double *slice = dalpha ? hl_graph_alloc(g, (size_t)B * H * sizeof *slice) : NULL;
    if (dalpha && !slice)
        return;
    bool overwrite;
    hl_real *dk = hl_op_grad_first(g, k, &overwrite);
#pragma omp parallel for if (k->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const double w = sigmoid((double)alpha->data[bh % H]);
        const size_t at = (size_t)bh * S * D;
        const hl_real *dyr = dy + at, *kr = k->data + at;
        const uint8_t *starts = saved ? saved + (size_t)(bh / H) * S : NULL;
        double sum = 0;
        hl_real *dkr = dk ? dk + at : NULL;
        for (int s = 0; s < S; s++) {
            const bool start = s == 0 || (starts && starts[s]);
            const bool next_smeared = s + 1 < S && !(starts && starts[s + 1]);
            for (size_t i = (size_t)s * D; i < (size_t)(s + 1) * D; i++) {
                if (slice && !start)
                    sum += ((double)kr[i] - (double)kr[i - D]) * (double)dyr[i];
                if (!dkr)
                    continue;
                const double own = start ? (double)dyr[i] : w * (double)dyr[i];
                const double next = next_smeared ? (1 - w) * (double)dyr[i + D] : 0;
                const hl_real v = (hl_real)(own + next);
                dkr[i] = overwrite ? v : dkr[i] + v;
            }
        }
        if (slice)
            slice[bh] = w * (1 - w) * sum;
    }
    for (int h = 0; dalpha && h < H; h++) {
        double sum = 0;
        for (int b = 0; b < B; b++)
            sum += slice[(size_t)b * H + h];
        dalpha[h] += (hl_real)sum;
    }
}
