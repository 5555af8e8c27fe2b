/* Argmax over the last dim, for predictions and accuracy. Not differentiable:
 * its op table entry has no backward, so hl_op_record refuses it on a path
 * that needs gradients. */
#include "ops/internal.h"

/* Index of the largest value of row[0..N). The first of equal values wins; NaN
 * is never chosen, except that a row of only NaNs gives 0. Indices are exact
 * as hl_real up to 2^24 in the float build. */
static int row_argmax(const hl_real *row, int N)
{
    int best = -1;
    for (int j = 0; j < N; j++)
        if (!isnan(row[j]) && (best < 0 || row[j] > row[best]))
            best = j;
    return best < 0 ? 0 : best;
}

hl_tensor *hl_argmax(hl_graph *g, hl_tensor *x)
{
    if (!hl_op_inputs_ok(g, HL_OP_ARGMAX, 1, &x))
        return &g->poison;
    const int N = x->shape[x->rank - 1];
    const size_t rows = x->numel / (size_t)N;
    /* (...,N) -> (...); a rank-1 input gives (1). */
    const int out_rank = x->rank > 1 ? x->rank - 1 : 1;
    const int *out_shape = x->rank > 1 ? x->shape : (int[]){1};
    hl_tensor *out = hl_op_output(g, HL_OP_ARGMAX, out_rank, out_shape);
    /* Records nothing without grad; an error when x needs one. */
    hl_op_record(g, HL_OP_ARGMAX, out, 1, &x);
    if (hl_graph_failed(g))
        return &g->poison;
    const hl_real *data = x->data;
    hl_real *y = out->data;
#pragma omp parallel for if (x->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++)
        y[r] = (hl_real)row_argmax(data + r * N, N);
    return out;
}
