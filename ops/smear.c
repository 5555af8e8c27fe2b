/* Smeared keys (Olsson et al. 2022): see ops/smear.h. */
#include <math.h>

#include "ops/internal.h"

static double sigmoid(double a) { return 1 / (1 + exp(-a)); }

hl_tensor *hl_smear(hl_graph *g, hl_tensor *k, hl_tensor *alpha)
{
    hl_tensor *in[2] = {k, alpha};
    if (!hl_op_inputs_ok(g, HL_OP_SMEAR, 2, in))
        return &g->poison;
    char ks[HL_SHAPE_STR_MAX], as[HL_SHAPE_STR_MAX];
    if (k->rank != 4 || alpha->rank != 1 || alpha->shape[0] != k->shape[1])
        return hl_op_fail(g, HL_OP_SMEAR, HL_ERR_SHAPE,
                          "keys %s and alpha %s must be (B,H,S,D) and (H)", hl_shape_str(k, ks),
                          hl_shape_str(alpha, as));
    hl_tensor *out = hl_op_output(g, HL_OP_SMEAR, 4, k->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const int B = k->shape[0], H = k->shape[1], S = k->shape[2], D = k->shape[3];
#pragma omp parallel for if (k->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const double w = sigmoid((double)alpha->data[bh % H]);
        const hl_real *src = k->data + (size_t)bh * S * D;
        hl_real *dst = out->data + (size_t)bh * S * D;
        for (int j = 0; j < D; j++)
            dst[j] = src[j];
        for (size_t i = D; i < (size_t)S * D; i++)
            dst[i] = (hl_real)(w * (double)src[i] + (1 - w) * (double)src[i - D]);
    }
    hl_op_record(g, HL_OP_SMEAR, out, 2, in);
    return hl_graph_failed(g) ? &g->poison : out;
}

/* dk[s] (+)= w·dy[s] + (1 - w)·dy[s+1] (dk[0] takes dy[0] whole), and
 * dalpha_h += w(1 - w)·Σ (k[s] - k[s-1])·dy[s] over b, s >= 1 and d: each
 * (b,h) slice summed on its own, then the slices added in order of b. */
void hl_smear_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *k = n->inputs[0], *alpha = n->inputs[1];
    const int B = k->shape[0], H = k->shape[1], S = k->shape[2], D = k->shape[3];
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
        const size_t at = (size_t)bh * S * D, last = (size_t)(S - 1) * D;
        const hl_real *dyr = dy + at, *kr = k->data + at;
        if (slice) {
            double sum = 0;
            for (size_t i = D; i < (size_t)S * D; i++)
                sum += ((double)kr[i] - (double)kr[i - D]) * (double)dyr[i];
            slice[bh] = w * (1 - w) * sum;
        }
        if (!dk)
            continue;
        hl_real *dkr = dk + at;
        for (size_t i = 0; i < (size_t)S * D; i++) {
            const double own = i < (size_t)D ? (double)dyr[i] : w * (double)dyr[i];
            const double next = i < last ? (1 - w) * (double)dyr[i + D] : 0;
            const hl_real v = (hl_real)(own + next);
            dkr[i] = overwrite ? v : dkr[i] + v;
        }
    }
    for (int h = 0; dalpha && h < H; h++) {
        double sum = 0;
        for (int b = 0; b < B; b++)
            sum += slice[(size_t)b * H + h];
        dalpha[h] += (hl_real)sum;
    }
}
