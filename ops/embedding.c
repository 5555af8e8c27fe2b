/* Embedding: gather rows of a weight table by token id; backward scatter-adds
 * the output gradient back into the rows it came from. */
#include <limits.h>
#include <string.h>

#include "ops/internal.h"
#include "ops/vmath.h"

/* Backward gives each thread whole blocks of embedding columns (see below). */
#define EMBEDDING_COLUMN_BLOCK 32

hl_tensor *hl_embedding(hl_graph *g, hl_tensor *weight, const int32_t *ids, int rank,
                        const int *shape)
{
    if (!hl_op_inputs_ok(g, HL_OP_EMBEDDING, 1, &weight))
        return &g->poison;
    char ws[HL_SHAPE_STR_MAX];
    if (weight->rank != 2)
        return hl_op_fail(g, HL_OP_EMBEDDING, HL_ERR_SHAPE, "weight %s must be (V,E)",
                          hl_shape_str(weight, ws));
    if (!ids)
        return hl_op_fail(g, HL_OP_EMBEDDING, HL_ERR_ARG, "ids is NULL");
    /* The output appends E to the ids' shape, so ids may have at most 3 dims. */
    if (rank < 1 || rank > HL_MAX_RANK - 1 || !shape)
        return hl_op_fail(g, HL_OP_EMBEDDING, HL_ERR_SHAPE, "ids rank %d is not 1..%d", rank,
                          HL_MAX_RANK - 1);
    const int V = weight->shape[0], E = weight->shape[1];
    int out_shape[HL_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 1)
            return hl_op_fail(g, HL_OP_EMBEDDING, HL_ERR_SHAPE, "ids dim %d is %d", i, shape[i]);
        out_shape[i] = shape[i];
    }
    out_shape[rank] = E;
    hl_tensor probe = {0};
    if (!hl_tensor_set_shape(&probe, rank, shape) || probe.numel > INT_MAX)
        return hl_op_fail(g, HL_OP_EMBEDDING, HL_ERR_SHAPE, "too many ids (more than %d)",
                          INT_MAX);
    const size_t count = probe.numel;
    for (size_t t = 0; t < count; t++)
        if (ids[t] < 0 || ids[t] >= V)
            return hl_op_fail(g, HL_OP_EMBEDDING, HL_ERR_ARG,
                              "id %d at position %zu is out of range [0,%d) for weight %s",
                              (int)ids[t], t, V, hl_shape_str(weight, ws));
    hl_tensor *out = hl_op_output(g, HL_OP_EMBEDDING, rank + 1, out_shape);
    if (hl_graph_failed(g))
        return &g->poison;

    const hl_real *w = weight->data;
    hl_real *y = out->data;
#pragma omp parallel for if (out->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t t = 0; t < count; t++)
        memcpy(y + t * E, w + (size_t)ids[t] * E, (size_t)E * sizeof *y);

    hl_node *n = hl_op_record(g, HL_OP_EMBEDDING, out, 1, &weight);
    if (n) {
        n->saved = hl_op_save_ints(g, ids, count);
        n->ints[0] = (int)count;
    }
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_embedding_backward(hl_graph *g, hl_node *n)
{
    hl_real *dw = hl_op_grad(g, n->inputs[0]);
    if (!dw)
        return;
    const int32_t *ids = n->saved;
    const size_t count = (size_t)n->ints[0];
    const int E = n->inputs[0]->shape[1];
    const hl_real *dy = n->out->grad;
    /* A repeated id makes several tokens add into the same weight row, so we
     * split the work over columns instead of tokens: each thread owns whole
     * column blocks and walks every token in order, so each weight element
     * receives its additions in token order whatever the thread count. */
    const int n_blocks = (E + EMBEDDING_COLUMN_BLOCK - 1) / EMBEDDING_COLUMN_BLOCK;
#pragma omp parallel for if (n->out->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (int b = 0; b < n_blocks; b++) {
        const int j0 = b * EMBEDDING_COLUMN_BLOCK;
        const int j1 = j0 + EMBEDDING_COLUMN_BLOCK < E ? j0 + EMBEDDING_COLUMN_BLOCK : E;
        for (size_t t = 0; t < count; t++)
            hl_vmath_add(dy + t * E + j0, dw + (size_t)ids[t] * E + j0, (size_t)(j1 - j0));
    }
}
