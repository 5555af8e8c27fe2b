/* Cross-entropy: the mean negative log-softmax of each row's target logit, over
 * the rows that are not ignored. */
#include "ops/internal.h"
#include "ops/vmath.h"

/* A counted row's log-softmax is (x - max) - log_sum, kept in two parts as
 * PyTorch does: folded into one number max + log_sum, it would round away
 * log_sum beside a large max (1e7 + log 2 is 1e7 in float). */
typedef struct ce_row {
    double log_sum; /* log Σ exp(x - max) */
    hl_real max;
} ce_row;

/* What backward needs; it recomputes the softmax from each row's max and
 * log_sum, which costs two values per row instead of a copy of the logits. */
typedef struct ce_saved {
    const int32_t *targets; /* (rows) */
    const ce_row *stats;    /* (rows), for counted rows only */
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
    ce_row *stats = hl_graph_alloc(g, rows * sizeof *stats);
    if (hl_graph_failed(g))
        return &g->poison;

    const hl_real *x = logits->data;
#pragma omp parallel for if (logits->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        if (targets[r] == ignore_index)
            continue;
        const hl_real *row = x + r * V;
        const hl_real max = hl_vmath_max(row, (size_t)V);
        stats[r] = (ce_row){log(hl_vmath_exp_sum(row, max, NULL, (size_t)V)), max};
    }
    /* -log_softmax[target], summed on one thread in row order, so the loss
     * never depends on the thread count. */
    double loss = 0;
    for (size_t r = 0; r < rows; r++)
        if (targets[r] != ignore_index)
            loss += stats[r].log_sum - ((double)x[r * V + targets[r]] - (double)stats[r].max);
    out->data[0] = counted ? (hl_real)(loss / (double)counted) : 0;

    hl_node *n = hl_op_record(g, HL_OP_CROSS_ENTROPY, out, 1, &logits);
    if (n) {
        ce_saved *saved = hl_graph_alloc(g, sizeof *saved);
        const int32_t *copy = hl_op_save_ints(g, targets, rows);
        if (saved && copy) {
            *saved = (ce_saved){copy, stats, ignore_index, counted};
            n->saved = saved;
        }
    }
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_cross_entropy_backward(hl_graph *g, hl_node *n)
{
    const ce_saved *saved = n->saved;
    if (saved->counted == 0) {
        hl_op_grad(g, n->inputs[0]); /* every row ignored: the loss is the constant 0 */
        return;
    }
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (!dx)
        return;
    const hl_tensor *logits = n->inputs[0];
    const int V = logits->shape[logits->rank - 1];
    const size_t rows = logits->numel / (size_t)V;
    const hl_real scale = (hl_real)((double)n->out->grad[0] / (double)saved->counted);
    const hl_real *x = logits->data;
#pragma omp parallel for if (logits->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const int32_t target = saved->targets[r];
        hl_real *drow = dx + r * V;
        const ce_row *st = &saved->stats[r];
        if (target != saved->ignore_index) /* drow (+)= scale·(softmax - onehot(target)) */
            hl_vmath_xent_grad(x + r * V, st->max, (hl_real)st->log_sum, scale, (size_t)target,
                               drow, (size_t)V, overwrite);
        else if (overwrite)
            for (int j = 0; j < V; j++)
                drow[j] = 0;
    }
}
