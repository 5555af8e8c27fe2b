/* The exact GELU, x·Φ(x) with Φ the standard normal CDF, as torch.nn.GELU().
 * The kernels are in ops/vmath.c: Φ(x) = 0.5·(1 + erf(x/√2)) as in PyTorch's
 * CPU kernel, with a float erf within 3 ulp of libm's (3.5 without FMA). */
#include "ops/internal.h"
#include "ops/vmath.h"

/* Elements per parallel chunk: whole cache lines, vectors and a few pages. */
#define GELU_CHUNK 4096

/* Chunks of GELU_CHUNK elements, the last one partial. */
static size_t chunks(size_t count) { return (count + GELU_CHUNK - 1) / GELU_CHUNK; }
static size_t chunk_len(size_t c, size_t count)
{
    const size_t left = count - c * GELU_CHUNK;
    return left < GELU_CHUNK ? left : GELU_CHUNK;
}

hl_tensor *hl_gelu(hl_graph *g, hl_tensor *x)
{
    if (!hl_op_inputs_ok(g, HL_OP_GELU, 1, &x))
        return &g->poison;
    hl_tensor *out = hl_op_output(g, HL_OP_GELU, x->rank, x->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const hl_real *src = x->data;
    hl_real *dst = out->data;
    const size_t count = x->numel, n_chunks = chunks(count);
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t c = 0; c < n_chunks; c++)
        hl_vmath_gelu(src + c * GELU_CHUNK, dst + c * GELU_CHUNK, chunk_len(c, count));
    hl_op_record(g, HL_OP_GELU, out, 1, &x);
    return hl_graph_failed(g) ? &g->poison : out;
}

/* dx (+)= dy·(Φ(x) + x·φ(x)), φ the standard normal density. */
void hl_gelu_grad_rows(const hl_real *x, const hl_real *dy, hl_real *dx, size_t count,
                       bool overwrite)
{
    const size_t n_chunks = chunks(count);
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t c = 0; c < n_chunks; c++)
        hl_vmath_gelu_grad(x + c * GELU_CHUNK, dy + c * GELU_CHUNK, dx + c * GELU_CHUNK,
                           chunk_len(c, count), overwrite);
}

void hl_gelu_backward(hl_graph *g, hl_node *n)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (dx)
        hl_gelu_grad_rows(n->inputs[0]->data, n->out->grad, dx, n->out->numel, overwrite);
}
