/* Self-attention's packed projection split into heads, rotary positions
 * included: see hl_qkv_heads in ops.h. Each (b,t) row of qkv holds q, k and v
 * for every head side by side; each goes to its head's (T,D) block, rotated
 * on the way by the kernel set's row kernel where hl_rope would rotate it. */
#include <math.h>
#include <string.h>

#include "ops/internal.h"
#include "ops/kernels.h"

/* Where each part's rows go: head h of part p of row (b,t) is the D values at
 * qkv row (b,t), offset p·E + h·D, and at ((b·H + h)·T + t)·D in part p. */
typedef struct {
    int B, T, H, D;
} heads_geometry;

static size_t head_row(const heads_geometry *h, size_t r, int head)
{
    const size_t b = r / (size_t)h->T, t = r % (size_t)h->T;
    return ((b * (size_t)h->H + (size_t)head) * (size_t)h->T + t) * (size_t)h->D;
}

hl_tensor *hl_qkv_heads(hl_graph *g, hl_tensor *qkv, int heads, hl_real rope_base,
                        hl_tensor **k, hl_tensor **v)
{
    *k = *v = &g->poison;
    if (!hl_op_inputs_ok(g, HL_OP_QKV_HEADS, 1, &qkv))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX];
    if (qkv->rank != 3 || heads < 1 || qkv->shape[2] % (3 * heads))
        return hl_op_fail(g, HL_OP_QKV_HEADS, HL_ERR_SHAPE,
                          "input %s must be (B,T,3E) with E divisible by %d heads",
                          hl_shape_str(qkv, xs), heads);
    const int B = qkv->shape[0], T = qkv->shape[1], D = qkv->shape[2] / 3 / heads;
    const bool rotate = rope_base != 0;
    if (rotate && (!(rope_base > 1) || !isfinite((double)rope_base)))
        return hl_op_fail(g, HL_OP_QKV_HEADS, HL_ERR_ARG,
                          "rope base %g must be 0 (none) or a finite number > 1",
                          (double)rope_base);
    if (rotate && D % 2)
        return hl_op_fail(g, HL_OP_QKV_HEADS, HL_ERR_SHAPE,
                          "rotary positions need an even head width, not %d (input %s, %d heads)",
                          D, hl_shape_str(qkv, xs), heads);
    const int shape[4] = {B, heads, T, D};
    hl_tensor *out[3] = {hl_op_output(g, HL_OP_QKV_HEADS, 4, shape),
                         hl_op_output(g, HL_OP_QKV_HEADS, 4, shape),
                         hl_op_output(g, HL_OP_QKV_HEADS, 4, shape)};
    hl_rope_table *tab = rotate ? hl_graph_alloc(g, sizeof *tab) : NULL;
    if (hl_graph_failed(g) || (rotate && !hl_rope_table_make(g, T, D, (double)rope_base, tab)))
        return &g->poison;
    const heads_geometry geo = {B, T, heads, D};
    hl_rope_row_fn *rope_row = hl_kernels()->rope_row;
    const size_t rows = (size_t)B * T, width = (size_t)qkv->shape[2], half = (size_t)D / 2;
#pragma omp parallel for if (qkv->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const size_t t = r % (size_t)T;
        const hl_real *src = qkv->data + r * width;
        for (int p = 0; p < 3; p++)
            for (int h = 0; h < heads; h++, src += D) {
                hl_real *dst = out[p]->data + head_row(&geo, r, h);
                if (tab && p < 2)
                    rope_row(src, tab->cosines + t * half, tab->sines + t * half, 1, dst, half,
                             false);
                else
                    memcpy(dst, src, (size_t)D * sizeof *dst);
            }
    }
    hl_node *n = hl_op_record(g, HL_OP_QKV_HEADS, out[0], 1, &qkv);
    hl_op_record_output(n, out[1]);
    hl_op_record_output(n, out[2]);
    if (n) {
        n->ints[0] = heads;
        n->saved = tab;
    }
    if (hl_graph_failed(g))
        return &g->poison;
    *k = out[1];
    *v = out[2];
    return out[0];
}

/* Each head's gradient back to its place in the row, rotated back (a
 * rotation's transpose is the rotation by -θ) where forward rotated. A part
 * that no gradient reached contributes nothing. */
void hl_qkv_heads_backward(hl_graph *g, hl_node *n)
{
    hl_tensor *qkv = n->inputs[0];
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, qkv, &overwrite);
    if (!dx)
        return;
    const hl_tensor *out = n->out;
    const hl_real *dy[3] = {out->grad, n->extra_out[0]->grad, n->extra_out[1]->grad};
    const hl_rope_table *tab = n->saved;
    const heads_geometry geo = {out->shape[0], out->shape[2], n->ints[0], out->shape[3]};
    const int T = geo.T, D = geo.D, heads = geo.H;
    hl_rope_row_fn *rope_row = hl_kernels()->rope_row;
    const size_t rows = (size_t)geo.B * T, width = (size_t)qkv->shape[2], half = (size_t)D / 2;
#pragma omp parallel for if (qkv->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const size_t t = r % (size_t)T;
        hl_real *dst = dx + r * width;
        for (int p = 0; p < 3; p++)
            for (int h = 0; h < heads; h++, dst += D) {
                if (!dy[p]) {
                    if (overwrite)
                        memset(dst, 0, (size_t)D * sizeof *dst);
                    continue;
                }
                const hl_real *src = dy[p] + head_row(&geo, r, h);
                if (tab && p < 2)
                    rope_row(src, tab->cosines + t * half, tab->sines + t * half, -1, dst, half,
                             !overwrite);
                else if (overwrite)
                    memcpy(dst, src, (size_t)D * sizeof *dst);
                else
                    for (int i = 0; i < D; i++)
                        dst[i] += src[i];
            }
    }
}
