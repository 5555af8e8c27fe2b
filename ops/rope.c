/* Rotary position embedding, rotate-half convention: see ops.h. The rows are
 * rotated by the kernel set's row kernel (ops/kernels/rotary.c). */
#include <math.h>

#include "ops/internal.h"
#include "ops/kernels.h"

bool hl_rope_table_make(hl_graph *g, int T, int D, double base, hl_rope_table *tab)
{
    const int half = D / 2;
    tab->cosines = hl_graph_alloc(g, 2 * (size_t)T * half * sizeof(hl_real));
    if (!tab->cosines)
        return false;
    tab->sines = tab->cosines + (size_t)T * half;
    for (int i = 0; i < half; i++) {
        const double inv_freq = pow(base, -2.0 * i / D);
        for (int t = 0; t < T; t++) {
            const double angle = t * inv_freq;
            tab->cosines[(size_t)t * half + i] = (hl_real)cos(angle);
            tab->sines[(size_t)t * half + i] = (hl_real)sin(angle);
        }
    }
    return true;
}

/* Rotates every row of D values of src by its position's angles times sign
 * into dst (added when accumulate). */
static void rotate_rows(const hl_real *src, const hl_rope_table *tab, hl_real sign, hl_real *dst,
                        size_t rows, int T, int D, bool accumulate)
{
    hl_rope_row_fn *row = hl_kernels()->rope_row;
    const size_t half = (size_t)D / 2;
#pragma omp parallel for if (rows * (size_t)D >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const size_t t = r % (size_t)T;
        row(src + r * D, tab->cosines + t * half, tab->sines + t * half, sign, dst + r * D, half,
            accumulate);
    }
}

hl_tensor *hl_rope(hl_graph *g, hl_tensor *x, hl_real base)
{
    if (!hl_op_inputs_ok(g, HL_OP_ROPE, 1, &x))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX];
    if (x->rank < 2 || x->shape[x->rank - 1] % 2)
        return hl_op_fail(g, HL_OP_ROPE, HL_ERR_SHAPE,
                          "input %s must be (...,T,D) with D even", hl_shape_str(x, xs));
    if (!(base > 1) || !isfinite((double)base))
        return hl_op_fail(g, HL_OP_ROPE, HL_ERR_ARG, "base %g must be a finite number > 1",
                          (double)base);
    const int T = x->shape[x->rank - 2], D = x->shape[x->rank - 1];
    hl_tensor *out = hl_op_output(g, HL_OP_ROPE, x->rank, x->shape);
    hl_rope_table *tab = hl_graph_alloc(g, sizeof *tab);
    if (hl_graph_failed(g) || !hl_rope_table_make(g, T, D, (double)base, tab))
        return &g->poison;
    rotate_rows(x->data, tab, 1, out->data, x->numel / (size_t)D, T, D, false);
    hl_node *n = hl_op_record(g, HL_OP_ROPE, out, 1, &x);
    if (n)
        n->saved = tab;
    return hl_graph_failed(g) ? &g->poison : out;
}

/* A rotation's transpose is the rotation back: dx (+)= R(-θ)·dy. */
void hl_rope_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *x = n->inputs[0];
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, x, &overwrite);
    if (!dx)
        return;
    const int T = x->shape[x->rank - 2], D = x->shape[x->rank - 1];
    rotate_rows(n->out->grad, n->saved, -1, dx, x->numel / (size_t)D, T, D, !overwrite);
}
