/* GELU, exact and in its tanh form.
 *
 * The exact GELU, x·Φ(x) with Φ the standard normal CDF, as torch.nn.GELU():
 * Φ(x) = 0.5·(1 + erf(x/√2)) as in PyTorch's CPU kernel, with a float erf
 * within 3 ulp of libm's (3.5 without FMA). The tanh form, GPT-2's gelu_new,
 * as x·σ(2u) (see hl_vmath_gelu_tanh). The row kernels are in ops/vmath.h. */
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

/* The op (GELU or GELU_TANH) of x through the set's row kernel for it. */
static hl_tensor *gelu_op(hl_graph *g, hl_op op, hl_tensor *x)
{
    if (!hl_op_inputs_ok(g, op, 1, &x))
        return &g->poison;
    hl_tensor *out = hl_op_output(g, op, x->rank, x->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const hl_vmath_kernels *vm = &hl_kernels()->vmath;
    void (*row)(const hl_real *, hl_real *, size_t) = op == HL_OP_GELU ? vm->gelu : vm->gelu_tanh;
    const hl_real *src = x->data;
    hl_real *dst = out->data;
    const size_t count = x->numel, n_chunks = chunks(count);
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t c = 0; c < n_chunks; c++)
        row(src + c * GELU_CHUNK, dst + c * GELU_CHUNK, chunk_len(c, count));
    hl_op_record(g, op, out, 1, &x);
    return hl_graph_failed(g) ? &g->poison : out;
}

hl_tensor *hl_gelu(hl_graph *g, hl_tensor *x) { return gelu_op(g, HL_OP_GELU, x); }

hl_tensor *hl_gelu_tanh(hl_graph *g, hl_tensor *x) { return gelu_op(g, HL_OP_GELU_TANH, x); }

void hl_gelu_grad_rows(hl_gelu_form form, const hl_real *x, const hl_real *dy, hl_real *dx,
                       size_t count, bool overwrite)
{
    const hl_vmath_kernels *vm = &hl_kernels()->vmath;
    void (*grad)(const hl_real *, const hl_real *, hl_real *, size_t, bool) =
        form == HL_GELU_EXACT ? vm->gelu_grad : vm->gelu_tanh_grad;
    const size_t n_chunks = chunks(count);
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t c = 0; c < n_chunks; c++)
        grad(x + c * GELU_CHUNK, dy + c * GELU_CHUNK, dx + c * GELU_CHUNK, chunk_len(c, count),
             overwrite);
}

static void gelu_backward(hl_graph *g, hl_node *n, hl_gelu_form form)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (dx)
        hl_gelu_grad_rows(form, n->inputs[0]->data, n->out->grad, dx, n->out->numel, overwrite);
}

void hl_gelu_backward(hl_graph *g, hl_node *n) { gelu_backward(g, n, HL_GELU_EXACT); }

void hl_gelu_tanh_backward(hl_graph *g, hl_node *n) { gelu_backward(g, n, HL_GELU_TANH); }
