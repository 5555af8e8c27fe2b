/* Dropout: a seeded random keep-mask in training, the identity otherwise. */
#include <stdint.h>

#include "ops/internal.h"

hl_tensor *hl_dropout(hl_graph *g, hl_tensor *x, hl_real p)
{
    if (!hl_op_inputs_ok(g, HL_OP_DROPOUT, 1, &x))
        return &g->poison;
    if (!(p >= 0 && p < 1))
        return hl_op_fail(g, HL_OP_DROPOUT, HL_ERR_ARG, "p %g is not in [0, 1)", (double)p);
    /* Nothing to drop: return x itself rather than a copy with a pass-through
     * backward. Gradients then reach x through its existing uses, with no node,
     * no memory and no RNG draws. */
    if (!g->training || p == 0)
        return x;
    hl_tensor *out = hl_op_output(g, HL_OP_DROPOUT, x->rank, x->shape);
    uint8_t *keep = hl_graph_alloc(g, x->numel);
    if (hl_graph_failed(g))
        return &g->poison;
    /* The mask is drawn on one thread, in element order, so a seed gives the
     * same mask for any thread count. */
    for (size_t i = 0; i < x->numel; i++)
        keep[i] = hl_rng_uniform(&g->rng) >= (double)p;
    const hl_real scale = (hl_real)(1.0 / (1.0 - (double)p));
    const hl_real *src = x->data;
    hl_real *dst = out->data;
    size_t count = x->numel;
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t i = 0; i < count; i++)
        dst[i] = keep[i] ? src[i] * scale : 0;
    hl_node *n = hl_op_record(g, HL_OP_DROPOUT, out, 1, &x);
    if (n) {
        n->saved = keep;
        n->reals[0] = scale;
    }
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_dropout_backward(hl_graph *g, hl_node *n)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (!dx)
        return;
    const uint8_t *keep = n->saved;
    const hl_real *dy = n->out->grad;
    const hl_real scale = n->reals[0];
    size_t count = n->out->numel;
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t i = 0; i < count; i++) {
        const hl_real d = keep[i] ? dy[i] * scale : 0;
        dx[i] = overwrite ? d : dx[i] + d;
    }
}
