/* Root-mean-square normalisation over the last dim: see ops/rmsnorm.h. Statistics and
 * each element's arithmetic in double on LayerNorm's row kernels, with the
 * mean held at 0 (ops/kernels/norm.c). */
#include <math.h>

#include "ops/internal.h"
#include "ops/kernels.h"

/* RMSNorm of x, or of x + b into sum when b is given (hl_add_rmsnorm). gamma
 * is checked by the callers. */
static hl_tensor *rmsnorm(hl_graph *g, hl_op op, hl_tensor *x, hl_tensor *b, hl_tensor *sum,
                          hl_tensor *gamma, hl_real eps)
{
    const int cols = x->shape[x->rank - 1];
    char gs[HL_SHAPE_STR_MAX], xs[HL_SHAPE_STR_MAX];
    if (gamma && hl_tensor_is_poison(gamma))
        return hl_op_fail(g, op, HL_ERR_ARG, "gamma is a poisoned tensor");
    if (gamma && !hl_op_inputs_ok(g, op, 1, &gamma)) /* e.g. not committed */
        return &g->poison;
    if (gamma && (gamma->rank != 1 || gamma->shape[0] != cols))
        return hl_op_fail(g, op, HL_ERR_SHAPE,
                          "gamma %s does not match the last dim of input %s (it must be (%d))",
                          hl_shape_str(gamma, gs), hl_shape_str(x, xs), cols);
    if (!(eps > 0))
        return hl_op_fail(g, op, HL_ERR_ARG, "eps %g must be > 0", (double)eps);
    const size_t rows = x->numel / (size_t)cols;
    hl_tensor *out = hl_op_output(g, op, x->rank, x->shape);
    double *rstd = hl_graph_alloc(g, rows * sizeof *rstd);
    if (hl_graph_failed(g))
        return &g->poison;
    const hl_real *gw = gamma ? gamma->data : NULL;
    const hl_norm_kernels *k = &hl_kernels()->norm;
#pragma omp parallel for if (x->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const hl_real *xr = x->data + r * cols;
        if (b)
            xr = hl_residual_row(xr, b->data + r * cols, sum->data + r * cols, cols);
        const double s = rstd[r] = 1.0 / sqrt(k->sum(xr, 0, true, (size_t)cols) / cols + eps);
        k->scale(xr, 0, s, gw, NULL, out->data + r * cols, (size_t)cols);
    }
    hl_node *n;
    if (b) {
        n = hl_op_record(g, op, out, 3, (hl_tensor *[]){x, b, gamma});
        hl_op_record_output(n, sum);
    } else {
        n = hl_op_record(g, op, out, 2, (hl_tensor *[]){x, gamma});
    }
    if (n)
        n->saved = rstd;
    return hl_graph_failed(g) ? &g->poison : out;
}

hl_tensor *hl_rmsnorm(hl_graph *g, hl_tensor *x, hl_tensor *gamma, hl_real eps)
{
    if (!hl_op_inputs_ok(g, HL_OP_RMSNORM, 1, &x))
        return &g->poison;
    return rmsnorm(g, HL_OP_RMSNORM, x, NULL, NULL, gamma, eps);
}

hl_tensor *hl_add_rmsnorm(hl_graph *g, hl_tensor *a, hl_tensor *b, hl_tensor *gamma, hl_real eps,
                          hl_tensor **sum)
{
    if (!sum)
        return hl_op_fail(g, HL_OP_ADD_RMSNORM, HL_ERR_ARG,
                          "sum must point to a place for the residual sum");
    hl_tensor *s;
    if (!hl_residual_begin(g, HL_OP_ADD_RMSNORM, a, b, &s)) {
        *sum = &g->poison;
        return &g->poison;
    }
    hl_tensor *out = rmsnorm(g, HL_OP_ADD_RMSNORM, a, b, s, gamma, eps);
    *sum = hl_graph_failed(g) ? &g->poison : s;
    return out;
}

/* dx (+)= rstd·(dŷ - x̂·mean(dŷ·x̂)) for one row, with dŷ = dy·gamma and
 * x̂ = x·rstd. */
static void row_grad(const hl_norm_kernels *k, const hl_real *x, const hl_real *dy,
                     const hl_real *gamma, double rstd, int cols, hl_real *dx, bool overwrite)
{
    double sum_d, sum_dxhat; /* Σ d unused: the mean is not subtracted */
    k->grad_sums(x, dy, gamma, 0, rstd, (size_t)cols, &sum_d, &sum_dxhat);
    k->grad(x, dy, gamma, 0, rstd, 0, sum_dxhat / cols, dx, (size_t)cols, overwrite);
}

void hl_rmsnorm_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *x = n->inputs[0], *gamma = n->inputs[1];
    const double *rstd = n->saved;
    const hl_real *dy = n->out->grad, *gw = gamma ? gamma->data : NULL;
    const int cols = x->shape[x->rank - 1];
    const size_t rows = x->numel / (size_t)cols;
    hl_real *dgamma = hl_op_grad(g, gamma);
    if (dgamma)
        hl_column_sums(dy, x->data, NULL, rstd, 1, rows, cols, NULL, dgamma);
    /* Fetched last: x may also be gamma, whose sum is in by now. */
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, x, &overwrite);
    if (!dx)
        return;
    const hl_norm_kernels *k = &hl_kernels()->norm;
#pragma omp parallel for if (x->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++)
        row_grad(k, x->data + r * cols, dy + r * cols, gw, rstd[r], cols, dx + r * cols,
                 overwrite);
}

/* As hl_add_layernorm_backward (ops/layernorm.c): the norm's backward on the
 * sum, then each row on to a and b. dy is NULL when only the sum reached the
 * loss. */
void hl_add_rmsnorm_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *sum = n->extra_out[0], *gamma = n->inputs[2];
    const double *rstd = n->saved;
    const hl_real *dy = n->out->grad, *gw = gamma ? gamma->data : NULL;
    const int cols = sum->shape[sum->rank - 1];
    const size_t rows = sum->numel / (size_t)cols;
    hl_real *dgamma = dy ? hl_op_grad(g, gamma) : NULL;
    if (dgamma)
        hl_column_sums(dy, sum->data, NULL, rstd, 1, rows, cols, NULL, dgamma);
    hl_residual_grads r;
    if (!hl_residual_grads_begin(g, n, &r))
        return;
    const hl_norm_kernels *k = &hl_kernels()->norm;
#pragma omp parallel for if (sum->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t row = 0; row < rows; row++) {
        const size_t at = row * cols;
        if (dy)
            row_grad(k, sum->data + at, dy + at, gw, rstd[row], cols, r.work + at, r.overwrite);
        hl_residual_grads_row(&r, at, (size_t)cols);
    }
    hl_residual_grads_end(g, n, &r);
}
