/* ReLU², relu(x)² (So et al. 2021, "Primer"; modded-nanogpt's MLP): see
 * ops/relu2.h. The row kernels are in ops/kernels/relu2.c. */
#include "ops/internal.h"
#include "ops/kernels/relu2.h"

/* Elements per parallel chunk, as ops/gelu.c takes them. */
#define RELU2_CHUNK 4096

static size_t chunks(size_t count) { return (count + RELU2_CHUNK - 1) / RELU2_CHUNK; }
static size_t chunk_len(size_t c, size_t count)
{
    const size_t left = count - c * RELU2_CHUNK;
    return left < RELU2_CHUNK ? left : RELU2_CHUNK;
}

hl_tensor *hl_relu2(hl_graph *g, hl_tensor *x)
{
    if (!hl_op_inputs_ok(g, HL_OP_RELU2, 1, &x))
        return &g->poison;
    hl_tensor *out = hl_op_output(g, HL_OP_RELU2, x->rank, x->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const size_t count = x->numel, n_chunks = chunks(count);
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t c = 0; c < n_chunks; c++)
        HL_KERNEL(hl_relu2_row)(x->data + c * RELU2_CHUNK, out->data + c * RELU2_CHUNK,
                                chunk_len(c, count));
    hl_op_record(g, HL_OP_RELU2, out, 1, &x);
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_relu2_backward(hl_graph *g, hl_node *n)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (!dx)
        return;
    const hl_real *x = n->inputs[0]->data, *dy = n->out->grad;
    const size_t count = n->out->numel, n_chunks = chunks(count);
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t c = 0; c < n_chunks; c++)
        HL_KERNEL(hl_relu2_grad_row)(x + c * RELU2_CHUNK, dy + c * RELU2_CHUNK,
                                     dx + c * RELU2_CHUNK, chunk_len(c, count), overwrite);
}
