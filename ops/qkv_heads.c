/* Self-attention's packed projection split into heads, rotary positions
 * included: see ops/qkv_heads.h. Each (b,t) row of qkv holds q for every
 * query head, then k and v for every key/value head, side by side; each goes
 * to its head's (T,D) block, rotated on the way (hl_rope_apply_row) where
 * hl_rope_partial would rotate it. */
#include <math.h>
#include <string.h>

#include "ops/internal.h"

/* The heads of part p (q, k or v): q has `heads`, k and v `kv_heads`. Head
 * h of part p of row (b,t) goes to ((b·H_p + h)·T + t)·D in part p. */
typedef struct {
    int B, T, D, heads, kv_heads;
} heads_geometry;

static int part_heads(const heads_geometry *geo, int p) { return p ? geo->kv_heads : geo->heads; }

static size_t head_row(const heads_geometry *geo, int p, size_t r, int head)
{
    const size_t b = r / (size_t)geo->T, t = r % (size_t)geo->T;
    return ((b * (size_t)part_heads(geo, p) + (size_t)head) * (size_t)geo->T + t) *
           (size_t)geo->D;
}

/* The op of both, named `name` in errors; grouped: the messages of the
 * general form (the plain one keeps its own). */
static hl_tensor *qkv_heads(hl_graph *g, const char *name, bool grouped, hl_tensor *qkv,
                            int heads, int kv_heads, hl_real rope_base, int rot_dims,
                            hl_tensor **k, hl_tensor **v)
{
    if (!k || !v) {
        if (k || v)
            *(k ? k : v) = &g->poison;
        return hl_op_fail_as(g, name, HL_ERR_ARG, "k and v must point to places for the outputs");
    }
    *k = *v = &g->poison;
    if (!hl_op_inputs_ok_as(g, name, 1, &qkv))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX];
    const int parts_width = heads + 2 * kv_heads;
    if (qkv->rank != 3 || heads < 1 || kv_heads < 1 || qkv->shape[2] % parts_width) {
        if (!grouped)
            return hl_op_fail_as(g, name, HL_ERR_SHAPE,
                                 "input %s must be (B,T,3E) with E divisible by %d heads",
                                 hl_shape_str(qkv, xs), heads);
        return hl_op_fail_as(g, name, HL_ERR_SHAPE,
                             "input %s must be (B,T,(H + 2·Hkv)·D) for %d heads and %d kv "
                             "heads",
                             hl_shape_str(qkv, xs), heads, kv_heads);
    }
    const int B = qkv->shape[0], T = qkv->shape[1], D = qkv->shape[2] / parts_width;
    const bool rotate = rope_base != 0;
    if (rotate && (!(rope_base > 1) || !isfinite((double)rope_base)))
        return hl_op_fail_as(g, name, HL_ERR_ARG,
                             "rope base %g must be 0 (none) or a finite number > 1",
                             (double)rope_base);
    if (rot_dims != 0 && (rot_dims < 2 || rot_dims > D || rot_dims % 2))
        return hl_op_fail_as(g, name, HL_ERR_ARG,
                             "rot_dims %d must be 0 (all of D) or even and in 2..D = %d (input "
                             "%s, %d heads, %d kv heads)",
                             rot_dims, D, hl_shape_str(qkv, xs), heads, kv_heads);
    if (rotate && rot_dims == 0 && D % 2)
        return hl_op_fail_as(g, name, HL_ERR_SHAPE,
                             "rotary positions need an even head width, not %d (input %s, %d "
                             "heads)",
                             D, hl_shape_str(qkv, xs), heads);
    const int q_shape[4] = {B, heads, T, D}, kv_shape[4] = {B, kv_heads, T, D};
    hl_tensor *out[3] = {hl_op_output(g, HL_OP_QKV_HEADS, 4, q_shape),
                         hl_op_output(g, HL_OP_QKV_HEADS, 4, kv_shape),
                         hl_op_output(g, HL_OP_QKV_HEADS, 4, kv_shape)};
    hl_rope_table *tab = rotate ? hl_graph_alloc(g, sizeof *tab) : NULL;
    if (hl_graph_failed(g) ||
        (rotate && !hl_rope_table_make(g, T, rot_dims ? rot_dims : D, (double)rope_base, tab)))
        return &g->poison;
    const heads_geometry geo = {B, T, D, heads, kv_heads};
    const size_t rows = (size_t)B * T, width = (size_t)qkv->shape[2];
#pragma omp parallel for if (qkv->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const size_t t = r % (size_t)T;
        const hl_real *src = qkv->data + r * width;
        for (int p = 0; p < 3; p++)
            for (int h = 0; h < part_heads(&geo, p); h++, src += D) {
                hl_real *dst = out[p]->data + head_row(&geo, p, r, h);
                if (tab && p < 2)
                    hl_rope_apply_row(tab, t, src, 1, dst, D, false);
                else
                    memcpy(dst, src, (size_t)D * sizeof *dst);
            }
    }
    hl_node *n = hl_op_record(g, HL_OP_QKV_HEADS, out[0], 1, &qkv);
    hl_op_record_output(n, out[1]);
    hl_op_record_output(n, out[2]);
    if (n) {
        n->ints[0] = heads;
        n->ints[1] = kv_heads;
        n->saved = tab;
    }
    if (hl_graph_failed(g))
        return &g->poison;
    *k = out[1];
    *v = out[2];
    return out[0];
}

hl_tensor *hl_qkv_heads(hl_graph *g, hl_tensor *qkv, int heads, hl_real rope_base,
                        hl_tensor **k, hl_tensor **v)
{
    return qkv_heads(g, "qkv_heads", false, qkv, heads, heads, rope_base, 0, k, v);
}

hl_tensor *hl_qkv_heads_grouped(hl_graph *g, hl_tensor *qkv, int heads, int kv_heads,
                                hl_real rope_base, int rot_dims, hl_tensor **k, hl_tensor **v)
{
    return qkv_heads(g, "qkv_heads_grouped", true, qkv, heads, kv_heads, rope_base, rot_dims, k,
                     v);
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
    const heads_geometry geo = {out->shape[0], out->shape[2], out->shape[3], n->ints[0],
                                n->ints[1]};
    const int T = geo.T, D = geo.D;
    const size_t rows = (size_t)geo.B * T, width = (size_t)qkv->shape[2];
#pragma omp parallel for if (qkv->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const size_t t = r % (size_t)T;
        hl_real *dst = dx + r * width;
        for (int p = 0; p < 3; p++)
            for (int h = 0; h < part_heads(&geo, p); h++, dst += D) {
                if (!dy[p]) {
                    if (overwrite)
                        memset(dst, 0, (size_t)D * sizeof *dst);
                    continue;
                }
                const hl_real *src = dy[p] + head_row(&geo, p, r, h);
                if (tab && p < 2)
                    hl_rope_apply_row(tab, t, src, -1, dst, D, !overwrite);
                else if (overwrite)
                    memcpy(dst, src, (size_t)D * sizeof *dst);
                else
                    for (int i = 0; i < D; i++)
                        dst[i] += src[i];
            }
    }
}
