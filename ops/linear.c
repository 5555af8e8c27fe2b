/* linear: x (...,K) · w (N,K)ᵀ + b (N) -> (...,N), on top of hl_gemm; and
 * linear_gelu and linear_gelu_tanh, the same followed by a GELU in the
 * product's epilogue. */
#include "ops/gemm.h"
#include "ops/internal.h"
#include "ops/kernels.h"

/* The output of op (linear or one with a GELU) for x, w and b after checking
 * their shapes, or the poisoned tensor. */
static hl_tensor *linear_output(hl_graph *g, hl_op op, hl_tensor *x, hl_tensor *w, hl_tensor *b)
{
    hl_tensor *inputs[3] = {x, w, b};
    if (!hl_op_inputs_ok(g, op, b ? 3 : 2, inputs))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX], ws[HL_SHAPE_STR_MAX], bs[HL_SHAPE_STR_MAX];
    if (w->rank != 2)
        return hl_op_fail(g, op, HL_ERR_SHAPE, "weight %s is not rank 2 (N,K)",
                          hl_shape_str(w, ws));
    const int N = w->shape[0], K = w->shape[1];
    if (x->shape[x->rank - 1] != K)
        return hl_op_fail(g, op, HL_ERR_SHAPE, "input %s does not match weight %s",
                          hl_shape_str(x, xs), hl_shape_str(w, ws));
    if (b && (b->rank != 1 || b->shape[0] != N))
        return hl_op_fail(g, op, HL_ERR_SHAPE, "bias %s does not match weight %s",
                          hl_shape_str(b, bs), hl_shape_str(w, ws));
    int shape[HL_MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        shape[i] = x->shape[i];
    shape[x->rank - 1] = N;
    hl_tensor *out = hl_op_output(g, op, x->rank, shape);
    return hl_graph_failed(g) ? &g->poison : out;
}

/* y (rows,N) = x·wᵀ + b, and gelu = act(y) when not NULL: the bias is where
 * each tile of the product starts, the GELU taken as it ends. */
static void linear_forward(const hl_tensor *x, const hl_tensor *w, const hl_tensor *b,
                           hl_real *y, hl_gemm_act_fn *act, hl_real *gelu)
{
    const int N = w->shape[0], K = w->shape[1];
    const int rows = (int)(x->numel / (size_t)K);
    hl_gemm_bias_gelu(false, true, rows, N, K, x->data, K, w->data, K, b ? b->data : NULL, y,
                      act, gelu, N);
}

hl_tensor *hl_linear(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b)
{
    hl_tensor *out = linear_output(g, HL_OP_LINEAR, x, w, b);
    if (hl_graph_failed(g))
        return &g->poison;
    linear_forward(x, w, b, out->data, NULL, NULL);
    hl_op_record(g, HL_OP_LINEAR, out, 3, (hl_tensor *[]){x, w, b});
    return hl_graph_failed(g) ? &g->poison : out;
}

/* op (LINEAR_GELU or LINEAR_GELU_TANH) with its GELU's row kernel. */
static hl_tensor *linear_gelu(hl_graph *g, hl_op op, hl_tensor *x, hl_tensor *w, hl_tensor *b)
{
    hl_tensor *out = linear_output(g, op, x, w, b);
    if (hl_graph_failed(g))
        return &g->poison;
    /* The pre-activation, which backward needs for GELU's slope. */
    hl_real *pre = hl_graph_alloc(g, out->numel * sizeof(hl_real));
    if (!pre)
        return &g->poison;
    const hl_vmath_kernels *vm = &hl_kernels()->vmath;
    linear_forward(x, w, b, pre, op == HL_OP_LINEAR_GELU ? vm->gelu : vm->gelu_tanh, out->data);
    hl_node *n = hl_op_record(g, op, out, 3, (hl_tensor *[]){x, w, b});
    if (n)
        n->saved = pre;
    return hl_graph_failed(g) ? &g->poison : out;
}

hl_tensor *hl_linear_gelu(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b)
{
    return linear_gelu(g, HL_OP_LINEAR_GELU, x, w, b);
}

hl_tensor *hl_linear_gelu_tanh(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b)
{
    return linear_gelu(g, HL_OP_LINEAR_GELU_TANH, x, w, b);
}

/* The gradients of x, w and b from dy (rows,N), the gradient of x·wᵀ + b. */
static void linear_grads(hl_graph *g, const hl_node *n, const hl_real *dy)
{
    hl_tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->inputs[2];
    const int N = w->shape[0], K = w->shape[1];
    const int rows = (int)(x->numel / (size_t)K);
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, x, &overwrite);
    if (dx) /* dx (rows,K) (+)= dy · w */
        hl_gemm(false, false, rows, K, N, 1, dy, N, w->data, K, overwrite ? 0 : 1, dx, K);
    hl_real *dw = hl_op_grad(g, w);
    if (dw) /* dw (N,K) += dyᵀ · x, over every leading row */
        hl_gemm(true, false, N, K, rows, 1, dy, N, x->data, K, 1, dw, K);
    hl_real *db = hl_op_grad(g, b);
    if (db)
        hl_column_sums(dy, NULL, NULL, NULL, 0, (size_t)rows, N, db, NULL);
}

void hl_linear_backward(hl_graph *g, hl_node *n) { linear_grads(g, n, n->out->grad); }

/* GELU's backward into a buffer of the output's size, then linear's: the
 * arithmetic of hl_gelu's (hl_gelu_tanh's) backward followed by hl_linear's. */
static void linear_gelu_backward(hl_graph *g, hl_node *n, hl_gelu_form form)
{
    hl_real *dpre = hl_graph_grad_alloc(g, n->out, false);
    if (!dpre)
        return;
    hl_gelu_grad_rows(form, n->saved, n->out->grad, dpre, n->out->numel, true);
    linear_grads(g, n, dpre);
    hl_graph_grad_release(g, n->out, dpre);
}

void hl_linear_gelu_backward(hl_graph *g, hl_node *n)
{
    linear_gelu_backward(g, n, HL_GELU_EXACT);
}

void hl_linear_gelu_tanh_backward(hl_graph *g, hl_node *n)
{
    linear_gelu_backward(g, n, HL_GELU_TANH);
}
