/* The exact GELU, x·Φ(x) with Φ the standard normal CDF, as torch.nn.GELU(). */
#include "ops/internal.h"

#define GELU_SQRT1_2 0.70710678118654752440      /* 1/√2 */
#define GELU_INV_SQRT_2PI 0.39894228040143267794 /* 1/√(2π) */

/* Φ(x) by the same formula as PyTorch's CPU kernel, 0.5·(1 + erf(x/√2)). */
static inline hl_real normal_cdf(hl_real x)
{
    return (hl_real)0.5 * (1 + HL_ERF(x * (hl_real)GELU_SQRT1_2));
}

hl_tensor *hl_gelu(hl_graph *g, hl_tensor *x)
{
    if (!hl_op_inputs_ok(g, HL_OP_GELU, 1, &x))
        return &g->poison;
    hl_tensor *out = hl_op_output(g, HL_OP_GELU, x->rank, x->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const hl_real *src = x->data;
    hl_real *dst = out->data;
    size_t count = x->numel;
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t i = 0; i < count; i++)
        dst[i] = src[i] * normal_cdf(src[i]);
    hl_op_record(g, HL_OP_GELU, out, 1, &x);
    return hl_graph_failed(g) ? &g->poison : out;
}

/* d/dx x·Φ(x) = Φ(x) + x·φ(x), φ the standard normal density. */
void hl_gelu_backward(hl_graph *g, hl_node *n)
{
    hl_real *dx = hl_op_grad(g, n->inputs[0]);
    if (!dx)
        return;
    const hl_real *x = n->inputs[0]->data, *dy = n->out->grad;
    size_t count = n->out->numel;
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t i = 0; i < count; i++) {
        hl_real pdf = (hl_real)GELU_INV_SQRT_2PI * HL_EXP((hl_real)-0.5 * x[i] * x[i]);
        dx[i] += dy[i] * (normal_cdf(x[i]) + x[i] * pdf);
    }
}
