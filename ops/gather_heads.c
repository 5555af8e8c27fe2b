/* Heads gathered from a tensor of fewer heads: see ops/gather_heads.h.
 * Grouped-query attention repeats each key/value head for the query heads
 * that share it; forward copies whole (S,D) blocks, backward adds each
 * output head's gradient into its source head. */
#include <string.h>

#include "ops/internal.h"

hl_tensor *hl_gather_heads(hl_graph *g, hl_tensor *x, const int *src, int heads)
{
    if (!hl_op_inputs_ok(g, HL_OP_GATHER_HEADS, 1, &x))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX];
    if (x->rank != 4)
        return hl_op_fail(g, HL_OP_GATHER_HEADS, HL_ERR_SHAPE, "input %s must be (B,Hkv,S,D)",
                          hl_shape_str(x, xs));
    if (heads < 1 || !src)
        return hl_op_fail(g, HL_OP_GATHER_HEADS, HL_ERR_ARG,
                          "needs %d >= 1 heads and their source heads (src %s) for input %s",
                          heads, src ? "given" : "NULL", hl_shape_str(x, xs));
    const int B = x->shape[0], H_kv = x->shape[1];
    for (int h = 0; h < heads; h++)
        if (src[h] < 0 || src[h] >= H_kv)
            return hl_op_fail(g, HL_OP_GATHER_HEADS, HL_ERR_ARG,
                              "src[%d] = %d is not a head of input %s (0..%d)", h, src[h],
                              hl_shape_str(x, xs), H_kv - 1);
    const int shape[4] = {B, heads, x->shape[2], x->shape[3]};
    hl_tensor *out = hl_op_output(g, HL_OP_GATHER_HEADS, 4, shape);
    int *saved = hl_graph_alloc(g, (size_t)heads * sizeof *saved);
    if (hl_graph_failed(g) || !saved)
        return &g->poison;
    memcpy(saved, src, (size_t)heads * sizeof *saved);
    const size_t block = (size_t)x->shape[2] * (size_t)x->shape[3];
    const size_t blocks = (size_t)B * (size_t)heads;
#pragma omp parallel for if (blocks * block >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t bh = 0; bh < blocks; bh++) {
        const size_t b = bh / (size_t)heads, h = bh % (size_t)heads;
        memcpy(out->data + bh * block, x->data + (b * (size_t)H_kv + (size_t)saved[h]) * block,
               block * sizeof(hl_real));
    }
    hl_node *n = hl_op_record(g, HL_OP_GATHER_HEADS, out, 1, &x);
    if (n) {
        n->ints[0] = heads;
        n->saved = saved;
    }
    return hl_graph_failed(g) ? &g->poison : out;
}

/* dx[b,j] (+)= Σ dy[b,h] over the heads h with src[h] = j, in h order: each
 * (b, j) is one thread's, so the sums do not depend on the thread count. A
 * head no output reads gets no gradient (zeros, when storing). */
void hl_gather_heads_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *x = n->inputs[0];
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, x, &overwrite);
    if (!dx)
        return;
    const int *src = n->saved;
    const int heads = n->ints[0], H_kv = x->shape[1];
    const hl_real *dy = n->out->grad;
    const size_t block = (size_t)x->shape[2] * (size_t)x->shape[3];
    const size_t blocks = (size_t)x->shape[0] * (size_t)H_kv;
#pragma omp parallel for if (n->out->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t bj = 0; bj < blocks; bj++) {
        const size_t b = bj / (size_t)H_kv;
        const int j = (int)(bj % (size_t)H_kv);
        hl_real *d = dx + bj * block;
        bool store = overwrite;
        for (int h = 0; h < heads; h++) {
            if (src[h] != j)
                continue;
            const hl_real *g_h = dy + (b * (size_t)heads + (size_t)h) * block;
            if (store)
                memcpy(d, g_h, block * sizeof *d);
            else
                for (size_t i = 0; i < block; i++)
                    d[i] += g_h[i];
            store = false;
        }
        if (store)
            memset(d, 0, block * sizeof *d);
    }
}
