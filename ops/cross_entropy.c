/* Cross-entropy: the mean negative log-softmax of each row's target logit, over
 * the rows that are not ignored. */
#include "ops/internal.h"

/* What backward needs; it recomputes the softmax from the saved logsumexp,
 * which costs one value per row instead of a copy of the logits' size. */
typedef struct ce_saved {
    const int32_t *targets; /* (rows) */
    const double *lse;      /* (rows): logsumexp of each counted row */
    int32_t ignore_index;
    size_t counted;         /* rows whose target is not ignore_index */
} ce_saved;

hl_tensor *hl_cross_entropy(hl_graph *g, hl_tensor *logits, const int32_t *targets,
                            int32_t ignore_index)
{
    if (!hl_op_inputs_ok(g, HL_OP_CROSS_ENTROPY, 1, &logits))
        return &g->poison;
    if (!targets)
        return hl_op_fail(g, HL_OP_CROSS_ENTROPY, HL_ERR_ARG, "targets is NULL");
    const int V = logits->shape[logits->rank - 1];
    const size_t rows = logits->numel / (size_t)V;
    char ls[HL_SHAPE_STR_MAX];
    size_t counted = 0;
    for (size_t r = 0; r < rows; r++) {
        if (targets[r] == ignore_index)
            continue;
        if (targets[r] < 0 || targets[r] >= V)
            return hl_op_fail(g, HL_OP_CROSS_ENTROPY, HL_ERR_ARG,
                              "target %d in row %zu is outside [0,V) for logits %s with "
                              "V = %d, and is not ignore_index %d",
                              (int)targets[r], r, hl_shape_str(logits, ls), V,
                              (int)ignore_index);
        counted++;
    }
    hl_tensor *out = hl_op_output(g, HL_OP_CROSS_ENTROPY, 1, (int[]){1});
    double *lse = hl_graph_alloc(g, rows * sizeof *lse);
    if (hl_graph_failed(g))
        return &g->poison;

    const hl_real *x = logits->data;
#pragma omp parallel for if (logits->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        lse[r] = 0;
        if (targets[r] == ignore_index)
            continue;
        const hl_real *row = x + r * V;
        hl_real m = row[0];
        for (int j = 1; j < V; j++)
            m = row[j] > m ? row[j] : m;
        double s = 0;
        for (int j = 0; j < V; j++)
            s += (double)HL_EXP(row[j] - m);
        lse[r] = (double)m + log(s);
    }
    /* Summed on one thread in row order, so the loss never depends on the
     * thread count. */
    double loss = 0;
    for (size_t r = 0; r < rows; r++)
        if (targets[r] != ignore_index)
            loss += lse[r] - (double)x[r * V + targets[r]];
    out->data[0] = counted ? (hl_real)(loss / (double)counted) : 0;

    hl_node *n = hl_op_record(g, HL_OP_CROSS_ENTROPY, out, 1, &logits);
    if (n) {
        ce_saved *saved = hl_graph_alloc(g, sizeof *saved);
        const int32_t *copy = hl_op_save_ints(g, targets, rows);
        if (saved && copy) {
            *saved = (ce_saved){copy, lse, ignore_index, counted};
            n->saved = saved;
        }
    }
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_cross_entropy_backward(hl_graph *g, hl_node *n)
{
    hl_real *dx = hl_op_grad(g, n->inputs[0]);
    const ce_saved *saved = n->saved;
    if (!dx || saved->counted == 0)
        return; /* every row ignored: the loss is the constant 0 */
    const hl_tensor *logits = n->inputs[0];
    const int V = logits->shape[logits->rank - 1];
    const size_t rows = logits->numel / (size_t)V;
    const hl_real scale = (hl_real)((double)n->out->grad[0] / (double)saved->counted);
    const hl_real *x = logits->data;
#pragma omp parallel for if (logits->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const int32_t target = saved->targets[r];
        if (target == saved->ignore_index)
            continue;
        const hl_real *row = x + r * V;
        hl_real *drow = dx + r * V;
        const hl_real lse = (hl_real)saved->lse[r];
        /* d loss / d x_j = softmax_j - [j == target], times dy / counted. */
        for (int j = 0; j < V; j++)
            drow[j] += scale * (HL_EXP(row[j] - lse) - (hl_real)(j == target));
    }
}
