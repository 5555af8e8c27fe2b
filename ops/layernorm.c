/* Layer normalisation over the last dim, as torch.nn.LayerNorm. */
#include <math.h>

#include "ops/internal.h"
#include "ops/kernels.h"

/* Per-row statistics saved for backward. Kept in double rather than hl_real:
 * for a row like 1000 + noise, a float mean is off by up to half an ulp of
 * 1000 (3e-5), a visible shift of x̂ when the noise is small. */
typedef struct {
    double mean, rstd;
} row_stats;
/* Backward reads the means and the rstds as two arrays of stride 2. */
_Static_assert(sizeof(row_stats) == 2 * sizeof(double), "row_stats is two doubles");

/* Fails unless p (gamma or beta) is NULL or a vector of n values. */
static bool param_ok(hl_graph *g, hl_op op, const hl_tensor *p, const char *what,
                     const hl_tensor *x, int n)
{
    if (!p)
        return true;
    char ps[HL_SHAPE_STR_MAX], xs[HL_SHAPE_STR_MAX];
    if (hl_tensor_is_poison(p)) {
        hl_op_fail(g, op, HL_ERR_ARG, "%s is a poisoned tensor", what);
        return false;
    }
    if (p->rank != 1 || p->shape[0] != n) {
        hl_op_fail(g, op, HL_ERR_SHAPE,
                   "%s %s does not match the last dim of input %s (it must be (%d))", what,
                   hl_shape_str(p, ps), hl_shape_str(x, xs), n);
        return false;
    }
    return true;
}

/* Mean and variance by two passes in double: stable for rows with a large
 * offset, where E[x²] - E[x]² would cancel. */
static row_stats row_stats_of(const hl_norm_kernels *k, const hl_real *x, int n, double eps)
{
    const double mean = k->sum(x, 0, false, (size_t)n) / n;
    const double var = k->sum(x, mean, true, (size_t)n) / n;
    return (row_stats){mean, 1.0 / sqrt(var + eps)};
}

/* LayerNorm of x, or of x + b into sum when b is given (hl_add_layernorm):
 * each row's sum is taken just before its statistics. */
static hl_tensor *layernorm(hl_graph *g, hl_op op, hl_tensor *x, hl_tensor *b, hl_tensor *sum,
                            hl_tensor *gamma, hl_tensor *beta, hl_real eps)
{
    const int cols = x->shape[x->rank - 1];
    if (!param_ok(g, op, gamma, "gamma", x, cols) || !param_ok(g, op, beta, "beta", x, cols))
        return &g->poison;
    if (!(eps > 0))
        return hl_op_fail(g, op, HL_ERR_ARG, "eps %g must be > 0", (double)eps);
    const size_t rows = x->numel / (size_t)cols;
    hl_tensor *out = hl_op_output(g, op, x->rank, x->shape);
    /* Saved even when no node is recorded: 16 bytes a row, and one code path. */
    row_stats *stats = hl_graph_alloc(g, rows * sizeof *stats);
    if (hl_graph_failed(g))
        return &g->poison;
    const hl_real *gw = gamma ? gamma->data : NULL, *bw = beta ? beta->data : NULL;
    const hl_norm_kernels *k = &hl_kernels()->norm;
#pragma omp parallel for if (x->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const hl_real *xr = x->data + r * cols;
        if (b)
            xr = hl_residual_row(xr, b->data + r * cols, sum->data + r * cols, cols);
        const row_stats s = stats[r] = row_stats_of(k, xr, cols, (double)eps);
        k->scale(xr, s.mean, s.rstd, gw, bw, out->data + r * cols, (size_t)cols);
    }
    hl_node *n;
    if (b) {
        n = hl_op_record(g, op, out, 4, (hl_tensor *[]){x, b, gamma, beta});
        hl_op_record_output(n, sum);
    } else {
        n = hl_op_record(g, op, out, 3, (hl_tensor *[]){x, gamma, beta});
    }
    if (n)
        n->saved = stats;
    return hl_graph_failed(g) ? &g->poison : out;
}

hl_tensor *hl_layernorm(hl_graph *g, hl_tensor *x, hl_tensor *gamma, hl_tensor *beta,
                        hl_real eps)
{
    /* gamma and beta may be NULL, which hl_op_inputs_ok would reject. */
    if (!hl_op_inputs_ok(g, HL_OP_LAYERNORM, 1, &x))
        return &g->poison;
    return layernorm(g, HL_OP_LAYERNORM, x, NULL, NULL, gamma, beta, eps);
}

hl_tensor *hl_add_layernorm(hl_graph *g, hl_tensor *a, hl_tensor *b, hl_tensor *gamma,
                            hl_tensor *beta, hl_real eps, hl_tensor **sum)
{
    if (!sum)
        return hl_op_fail(g, HL_OP_ADD_LAYERNORM, HL_ERR_ARG,
                          "sum must point to a place for the residual sum");
    hl_tensor *s;
    if (!hl_residual_begin(g, HL_OP_ADD_LAYERNORM, a, b, &s)) {
        *sum = &g->poison;
        return &g->poison;
    }
    hl_tensor *out = layernorm(g, HL_OP_ADD_LAYERNORM, a, b, s, gamma, beta, eps);
    *sum = hl_graph_failed(g) ? &g->poison : s;
    return out;
}

/* dx (+)= rstd·(dŷ - mean(dŷ) - x̂·mean(dŷ·x̂)) for one row, with dŷ = dy·gamma. */
static void row_grad(const hl_norm_kernels *k, const hl_real *x, const hl_real *dy,
                     const hl_real *gamma, row_stats s, int cols, hl_real *dx, bool overwrite)
{
    double sum_d, sum_dxhat;
    k->grad_sums(x, dy, gamma, s.mean, s.rstd, (size_t)cols, &sum_d, &sum_dxhat);
    k->grad(x, dy, gamma, s.mean, s.rstd, sum_d / cols, sum_dxhat / cols, dx, (size_t)cols,
            overwrite);
}

void hl_layernorm_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *x = n->inputs[0], *gamma = n->inputs[1], *beta = n->inputs[2];
    hl_real *dgamma = hl_op_grad(g, gamma), *dbeta = hl_op_grad(g, beta);
    const row_stats *stats = n->saved;
    const hl_real *dy = n->out->grad, *gw = gamma ? gamma->data : NULL;
    const int cols = x->shape[x->rank - 1];
    const size_t rows = x->numel / (size_t)cols;
    if (dgamma || dbeta)
        hl_column_sums(dy, x->data, &stats->mean, &stats->rstd, 2, rows, cols, dbeta, dgamma);
    /* Fetched last: x may also be gamma or beta, whose sums are in by now. */
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, x, &overwrite);
    if (!dx)
        return;
    const hl_norm_kernels *k = &hl_kernels()->norm;
#pragma omp parallel for if (x->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++)
        row_grad(k, x->data + r * cols, dy + r * cols, gw, stats[r], cols, dx + r * cols,
                 overwrite);
}

/* The norm's backward on the sum, then each row on to a and b while it is in
 * cache. dy is NULL when only the sum reached the loss. */
void hl_add_layernorm_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *sum = n->extra_out[0], *gamma = n->inputs[2], *beta = n->inputs[3];
    const row_stats *stats = n->saved;
    const hl_real *dy = n->out->grad, *gw = gamma ? gamma->data : NULL;
    const int cols = sum->shape[sum->rank - 1];
    const size_t rows = sum->numel / (size_t)cols;
    hl_real *dgamma = dy ? hl_op_grad(g, gamma) : NULL, *dbeta = dy ? hl_op_grad(g, beta) : NULL;
    if (dgamma || dbeta)
        hl_column_sums(dy, sum->data, &stats->mean, &stats->rstd, 2, rows, cols, dbeta, dgamma);
    hl_residual_grads r;
    if (!hl_residual_grads_begin(g, n, &r))
        return;
    const hl_norm_kernels *k = &hl_kernels()->norm;
#pragma omp parallel for if (sum->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t row = 0; row < rows; row++) {
        const size_t at = row * cols;
        if (dy)
            row_grad(k, sum->data + at, dy + at, gw, stats[row], cols, r.work + at, r.overwrite);
        hl_residual_grads_row(&r, at, (size_t)cols);
    }
    hl_residual_grads_end(g, n, &r);
}
