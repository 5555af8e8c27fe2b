/* Rotary position embedding, rotate-half convention, over all of each row
 * (hl_rope) or its first rot_dims values (hl_rope_partial): see ops/rope.h. The
 * rows are rotated by the kernel set's row kernel (ops/kernels/rotary.c). */
#include <math.h>
#include <string.h>

#include "ops/internal.h"
#include "ops/kernels.h"

bool hl_rope_table_make(hl_graph *g, int T, int rot, double base, hl_rope_table *tab)
{
    const int half = rot / 2;
    tab->rot = rot;
    tab->cosines = hl_graph_alloc(g, 2 * (size_t)T * half * sizeof(hl_real));
    if (!tab->cosines)
        return false;
    tab->sines = tab->cosines + (size_t)T * half;
    for (int i = 0; i < half; i++) {
        const double inv_freq = pow(base, -2.0 * i / rot);
        for (int t = 0; t < T; t++) {
            const double angle = t * inv_freq;
            tab->cosines[(size_t)t * half + i] = (hl_real)cos(angle);
            tab->sines[(size_t)t * half + i] = (hl_real)sin(angle);
        }
    }
    return true;
}

void hl_rope_apply_row(const hl_rope_table *tab, size_t t, const hl_real *src, hl_real sign,
                       hl_real *dst, int D, bool accumulate)
{
    const size_t half = (size_t)tab->rot / 2;
    hl_kernels()->rope_row(src, tab->cosines + t * half, tab->sines + t * half, sign, dst, half,
                           accumulate);
    if (accumulate)
        for (int i = tab->rot; i < D; i++)
            dst[i] += src[i];
    else if (tab->rot < D)
        memcpy(dst + tab->rot, src + tab->rot, (size_t)(D - tab->rot) * sizeof *dst);
}

/* Rotates every row of D values of src by its position's angles times sign
 * into dst (added when accumulate). */
static void rotate_rows(const hl_real *src, const hl_rope_table *tab, hl_real sign, hl_real *dst,
                        size_t rows, int T, int D, bool accumulate)
{
#pragma omp parallel for if (rows * (size_t)D >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++)
        hl_rope_apply_row(tab, r % (size_t)T, src + r * D, sign, dst + r * D, D, accumulate);
}

/* The op of both, named `name` in errors: rotating the whole of D (all) or
 * its first rot_dims values. */
static hl_tensor *rope(hl_graph *g, const char *name, hl_tensor *x, hl_real base, bool all,
                       int rot_dims)
{
    if (!hl_op_inputs_ok_as(g, name, 1, &x))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX];
    if (x->rank < 2 || (all && x->shape[x->rank - 1] % 2))
        return hl_op_fail_as(g, name, HL_ERR_SHAPE, "input %s must be (...,T,D)%s",
                             hl_shape_str(x, xs), all ? " with D even" : "");
    const int T = x->shape[x->rank - 2], D = x->shape[x->rank - 1];
    const int rot = all ? D : rot_dims;
    if (rot < 2 || rot > D || rot % 2)
        return hl_op_fail_as(g, name, HL_ERR_ARG,
                             "rot_dims %d must be even and in 2..D = %d (input %s)", rot, D,
                             hl_shape_str(x, xs));
    if (!(base > 1) || !isfinite((double)base))
        return hl_op_fail_as(g, name, HL_ERR_ARG, "base %g must be a finite number > 1",
                             (double)base);
    hl_tensor *out = hl_op_output(g, HL_OP_ROPE, x->rank, x->shape);
    hl_rope_table *tab = hl_graph_alloc(g, sizeof *tab);
    if (hl_graph_failed(g) || !hl_rope_table_make(g, T, rot, (double)base, tab))
        return &g->poison;
    rotate_rows(x->data, tab, 1, out->data, x->numel / (size_t)D, T, D, false);
    hl_node *n = hl_op_record(g, HL_OP_ROPE, out, 1, &x);
    if (n)
        n->saved = tab;
    return hl_graph_failed(g) ? &g->poison : out;
}

hl_tensor *hl_rope(hl_graph *g, hl_tensor *x, hl_real base)
{
    return rope(g, "rope", x, base, true, 0);
}

hl_tensor *hl_rope_partial(hl_graph *g, hl_tensor *x, hl_real base, int rot_dims)
{
    return rope(g, "rope_partial", x, base, false, rot_dims);
}

/* A rotation's transpose is the rotation back: dx (+)= R(-θ)·dy; the
 * values passed through pass their gradient through. */
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
