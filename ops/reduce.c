/* Reductions to one element: sum and mean. */
#include "ops/internal.h"

/* Partial sums over fixed chunks, then the partials in order: the result is
 * the same for any thread count. */
#define SUM_CHUNK 4096

static double sum_all(hl_graph *g, const hl_real *x, size_t count)
{
    size_t n_chunks = (count + SUM_CHUNK - 1) / SUM_CHUNK;
    double *partial = hl_graph_alloc(g, n_chunks * sizeof *partial);
    if (!partial)
        return 0;
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t c = 0; c < n_chunks; c++) {
        size_t end = (c + 1) * SUM_CHUNK < count ? (c + 1) * SUM_CHUNK : count;
        double s = 0;
        for (size_t i = c * SUM_CHUNK; i < end; i++)
            s += x[i];
        partial[c] = s;
    }
    double total = 0;
    for (size_t c = 0; c < n_chunks; c++)
        total += partial[c];
    return total;
}

static hl_tensor *reduce(hl_graph *g, hl_op op, hl_tensor *x, bool mean)
{
    if (!hl_op_inputs_ok(g, op, 1, &x))
        return &g->poison;
    hl_tensor *out = hl_op_output(g, op, 1, (int[]){1});
    if (hl_graph_failed(g))
        return &g->poison;
    double total = sum_all(g, x->data, x->numel);
    out->data[0] = (hl_real)(mean ? total / (double)x->numel : total);
    hl_op_record(g, op, out, 1, &x);
    return hl_graph_failed(g) ? &g->poison : out;
}

static void reduce_backward(hl_graph *g, hl_node *n, bool mean)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (!dx)
        return;
    size_t count = n->inputs[0]->numel;
    hl_real d = mean ? (hl_real)(n->out->grad[0] / (double)count) : n->out->grad[0];
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t i = 0; i < count; i++)
        dx[i] = overwrite ? d : dx[i] + d;
}

hl_tensor *hl_sum(hl_graph *g, hl_tensor *x) { return reduce(g, HL_OP_SUM, x, false); }
hl_tensor *hl_mean(hl_graph *g, hl_tensor *x) { return reduce(g, HL_OP_MEAN, x, true); }
void hl_sum_backward(hl_graph *g, hl_node *n) { reduce_backward(g, n, false); }
void hl_mean_backward(hl_graph *g, hl_node *n) { reduce_backward(g, n, true); }
