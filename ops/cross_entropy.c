/* Cross-entropy: the mean negative log-softmax of each row's target logit, over
 * the rows that are not ignored; soft-capped, of cap·tanh(logits/cap). */
#include <math.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/internal.h"
#include "ops/vmath.h"

/* A counted row's log-softmax is (x - max) - log_sum, kept in two parts as
 * PyTorch does: folded into one number max + log_sum, it would round away
 * log_sum beside a large max (1e7 + log 2 is 1e7 in float). */
typedef struct ce_row {
    double log_sum; /* log Σ exp(x - max) */
    hl_real max;
    hl_real hot;    /* the target's logit (capped when the op caps) */
} ce_row;

/* What backward needs; it recomputes the softmax from each row's max and
 * log_sum, which costs two values per row instead of a copy of the logits. */
typedef struct ce_saved {
    const int32_t *targets; /* (rows) */
    const ce_row *stats;    /* (rows), for counted rows only */
    int32_t ignore_index;
    size_t counted;         /* rows whose target is not ignore_index */
    hl_real cap;            /* > 0: the logits were soft-capped; 0: not */
} ce_saved;

/* The op (CROSS_ENTROPY, or CROSS_ENTROPY_SOFTCAP with cap > 0). */
static hl_tensor *cross_entropy(hl_graph *g, hl_op op, hl_tensor *logits,
                                const int32_t *targets, int32_t ignore_index, hl_real cap)
{
    if (!hl_op_inputs_ok(g, op, 1, &logits))
        return &g->poison;
    if (!targets)
        return hl_op_fail(g, op, HL_ERR_ARG, "targets is NULL");
    char ls[HL_SHAPE_STR_MAX];
    if (op == HL_OP_CROSS_ENTROPY_SOFTCAP && !(cap > 0 && isfinite(cap)))
        return hl_op_fail(g, op, HL_ERR_ARG, "cap %g for logits %s must be > 0 and finite",
                          (double)cap, hl_shape_str(logits, ls));
    const int V = logits->shape[logits->rank - 1];
    const size_t rows = logits->numel / (size_t)V;
    size_t counted = 0;
    for (size_t r = 0; r < rows; r++) {
        if (targets[r] == ignore_index)
            continue;
        if (targets[r] < 0 || targets[r] >= V)
            return hl_op_fail(g, op, HL_ERR_ARG,
                              "target %d in row %zu is outside [0,V) for logits %s with "
                              "V = %d, and is not ignore_index %d",
                              (int)targets[r], r, hl_shape_str(logits, ls), V,
                              (int)ignore_index);
        counted++;
    }
    hl_tensor *out = hl_op_output(g, op, 1, (int[]){1});
    ce_row *stats = hl_graph_alloc(g, rows * sizeof *stats);
    /* A row of capped logits per thread. */
    size_t threads = 1;
#ifdef _OPENMP
    threads = (size_t)omp_get_max_threads();
#endif
    hl_real *scratch = cap > 0 ? hl_graph_alloc(g, threads * (size_t)V * sizeof *scratch) : NULL;
    if (hl_graph_failed(g))
        return &g->poison;

    const hl_real *x = logits->data;
#pragma omp parallel if (logits->numel >= HL_PARALLEL_MIN_WORK)
    {
        int thread = 0;
#ifdef _OPENMP
        thread = omp_get_thread_num();
#endif
        hl_real *capped = scratch ? scratch + (size_t)thread * V : NULL;
#pragma omp for schedule(static)
        for (size_t r = 0; r < rows; r++) {
            if (targets[r] == ignore_index)
                continue;
            const hl_real *row = x + r * V;
            if (capped) {
                hl_vmath_softcap(row, cap, capped, (size_t)V);
                row = capped;
            }
            const hl_real max = hl_vmath_max(row, (size_t)V);
            stats[r] = (ce_row){log(hl_vmath_exp_sum(row, max, NULL, (size_t)V)), max,
                                row[targets[r]]};
        }
    }
    /* -log_softmax[target], summed on one thread in row order, so the loss
     * never depends on the thread count. */
    double loss = 0;
    for (size_t r = 0; r < rows; r++)
        if (targets[r] != ignore_index)
            loss += stats[r].log_sum - ((double)stats[r].hot - (double)stats[r].max);
    out->data[0] = counted ? (hl_real)(loss / (double)counted) : 0;

    hl_node *n = hl_op_record(g, op, out, 1, &logits);
    if (n) {
        ce_saved *saved = hl_graph_alloc(g, sizeof *saved);
        const int32_t *copy = hl_op_save_ints(g, targets, rows);
        if (saved && copy) {
            *saved = (ce_saved){copy, stats, ignore_index, counted, cap};
            n->saved = saved;
        }
    }
    return hl_graph_failed(g) ? &g->poison : out;
}

hl_tensor *hl_cross_entropy(hl_graph *g, hl_tensor *logits, const int32_t *targets,
                            int32_t ignore_index)
{
    return cross_entropy(g, HL_OP_CROSS_ENTROPY, logits, targets, ignore_index, 0);
}

hl_tensor *hl_cross_entropy_softcap(hl_graph *g, hl_tensor *logits, const int32_t *targets,
                                    int32_t ignore_index, hl_real cap)
{
    return cross_entropy(g, HL_OP_CROSS_ENTROPY_SOFTCAP, logits, targets, ignore_index, cap);
}

/* Both ops: drow (+)= scale·(softmax(y) - onehot(target))·dy/dx, y the
 * logits or their capped values (dy/dx = 1 - tanh², in the same pass). */
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
        if (target == saved->ignore_index) {
            if (overwrite)
                for (int j = 0; j < V; j++)
                    drow[j] = 0;
        } else if (saved->cap > 0) {
            hl_vmath_softcap_xent_grad(x + r * V, saved->cap, st->max, (hl_real)st->log_sum,
                                       scale, (size_t)target, drow, (size_t)V, overwrite);
        } else {
            hl_vmath_xent_grad(x + r * V, st->max, (hl_real)st->log_sum, scale, (size_t)target,
                               drow, (size_t)V, overwrite);
        }
    }
}
