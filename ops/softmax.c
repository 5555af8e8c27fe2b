/* Softmax over the last dim, stable under large inputs and -inf masks. */
#include "ops/internal.h"
#include "ops/vmath.h"

/* y = exp(x - max) / Σ exp(x - max) per row of n values. A row whose max is
 * -inf (every key masked) has no distribution to give: it becomes zeros
 * rather than the NaN of 0/0, and its backward then adds zero (y = 0). A row
 * holding a NaN becomes all NaN, as in PyTorch, even among -inf masks. */
void hl_softmax_row(const hl_real *x, hl_real *y, int n)
{
    const hl_real max = hl_vmath_max(x, (size_t)n);
    if (max == -INFINITY || isnan(max)) {
        const hl_real fill = isnan(max) ? max : 0;
        for (int j = 0; j < n; j++)
            y[j] = fill;
        return;
    }
    /* sum >= 1: the max term is exp(0). */
    hl_vmath_mul_double(y, 1.0 / hl_vmath_exp_sum(x, max, y, (size_t)n), y, (size_t)n);
}

hl_tensor *hl_softmax(hl_graph *g, hl_tensor *x)
{
    if (!hl_op_inputs_ok(g, HL_OP_SOFTMAX, 1, &x))
        return &g->poison;
    hl_tensor *out = hl_op_output(g, HL_OP_SOFTMAX, x->rank, x->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const int cols = x->shape[x->rank - 1];
    const size_t rows = x->numel / (size_t)cols;
#pragma omp parallel for if (x->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++)
        hl_softmax_row(x->data + r * cols, out->data + r * cols, cols);
    /* Backward needs only the output, which the node keeps as n->out. */
    hl_op_record(g, HL_OP_SOFTMAX, out, 1, &x);
    return hl_graph_failed(g) ? &g->poison : out;
}

/* dx (+)= y ⊙ (dy - Σ dy·y), per row; the dot product in double (hl_vmath_dot). */
void hl_softmax_backward(hl_graph *g, hl_node *n)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (!dx)
        return;
    const hl_tensor *out = n->out;
    const hl_real *y = out->data, *dy = out->grad;
    const int cols = out->shape[out->rank - 1];
    const size_t rows = out->numel / (size_t)cols;
#pragma omp parallel for if (out->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const hl_real *yr = y + r * cols, *dyr = dy + r * cols;
        hl_real *dxr = dx + r * cols;
        hl_vmath_softmax_grad(yr, dyr, hl_vmath_dot(dyr, yr, (size_t)cols), 1, dxr, (size_t)cols,
                              overwrite);
    }
}
