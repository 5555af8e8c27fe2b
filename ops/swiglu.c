/* SwiGLU's gate, silu(a)·b over the two halves of the last dim: see ops/swiglu.h.
 * The row kernels are in ops/kernels/vmath.c. */
#include "ops/internal.h"
#include "ops/vmath.h"

hl_tensor *hl_swiglu(hl_graph *g, hl_tensor *x)
{
    if (!hl_op_inputs_ok(g, HL_OP_SWIGLU, 1, &x))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX];
    const int cols = x->shape[x->rank - 1];
    if (cols % 2)
        return hl_op_fail(g, HL_OP_SWIGLU, HL_ERR_SHAPE,
                          "input %s must have an even last dim (gate and up halves)",
                          hl_shape_str(x, xs));
    int shape[HL_MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        shape[i] = x->shape[i];
    const int F = cols / 2;
    shape[x->rank - 1] = F;
    hl_tensor *out = hl_op_output(g, HL_OP_SWIGLU, x->rank, shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const size_t rows = x->numel / (size_t)cols;
#pragma omp parallel for if (x->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const hl_real *row = x->data + r * cols;
        hl_vmath_swiglu(row, row + F, out->data + r * F, (size_t)F);
    }
    hl_op_record(g, HL_OP_SWIGLU, out, 1, &x);
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_swiglu_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *x = n->inputs[0];
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, x, &overwrite);
    if (!dx)
        return;
    const int cols = x->shape[x->rank - 1], F = cols / 2;
    const size_t rows = x->numel / (size_t)cols;
    const hl_real *dy = n->out->grad;
#pragma omp parallel for if (x->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const hl_real *row = x->data + r * cols;
        hl_real *drow = dx + r * cols;
        hl_vmath_swiglu_grad(row, row + F, dy + r * F, drow, drow + F, (size_t)F, overwrite);
    }
}
