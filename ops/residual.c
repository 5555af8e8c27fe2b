/* The residual add inside hl_add_layernorm and hl_add_rmsnorm (ops/layernorm.h,
 * ops/rmsnorm.h): its checks, its second output, and its part of backward.
 * The norms' own files run the rows; this file decides where each row's
 * gradient goes, so that the fused op gives the same bits as hl_add's
 * backward after the norm's. */
#include <string.h>

#include "ops/internal.h"

bool hl_residual_begin(hl_graph *g, hl_op op, hl_tensor *a, hl_tensor *b, hl_tensor **sum)
{
    *sum = &g->poison;
    hl_tensor *in[2] = {a, b};
    if (!hl_op_inputs_ok(g, op, 2, in))
        return false;
    if (!hl_tensor_same_shape(a, b)) {
        char as[HL_SHAPE_STR_MAX], bs[HL_SHAPE_STR_MAX];
        hl_op_fail(g, op, HL_ERR_SHAPE, "a %s and b %s must have the same shape",
                   hl_shape_str(a, as), hl_shape_str(b, bs));
        return false;
    }
    hl_tensor *s = hl_graph_tensor_uninit(g, "residual", a->rank, a->shape);
    if (hl_graph_failed(g))
        return false;
    *sum = s;
    return true;
}

const hl_real *hl_residual_row(const hl_real *a, const hl_real *b, hl_real *sum, int cols)
{
    for (int j = 0; j < cols; j++)
        sum[j] = a[j] + b[j];
    return sum;
}

bool hl_residual_grads_begin(hl_graph *g, hl_node *n, hl_residual_grads *r)
{
    hl_tensor *a = n->inputs[0], *b = n->inputs[1], *s = n->extra_out[0];
    *r = (hl_residual_grads){0};
    /* What reached s from its other readers (the next residual add) is where
     * the norm's gradient is added, as hl_add's backward would find it. */
    if (s->grad && !s->retain_grad) {
        r->work = s->grad;
        s->grad = NULL; /* now work's: the engine must not give it back */
    } else {
        r->work = hl_graph_grad_alloc(g, s, false);
        if (!r->work)
            return false;
        if (s->grad)
            memcpy(r->work, s->grad, s->numel * sizeof *r->work);
        r->overwrite = !s->grad;
    }
    /* a first, then b, as hl_add: for a + a the second share adds. */
    if (a->requires_grad && !a->grad) {
        a->grad = r->work; /* a's gradient is s's: taken, not copied */
        r->handed = true;
    } else if (a->requires_grad) {
        r->da = a->grad;
    }
    if (b->requires_grad) {
        r->db = hl_op_grad_first(g, b, &r->db_first);
        if (!r->db && r->handed)
            a->grad = NULL; /* out of memory: the error is set, leave a as it was */
        if (!r->db)
            return false;
    }
    return true;
}

void hl_residual_grads_row(const hl_residual_grads *r, size_t at, size_t len)
{
    const hl_real *w = r->work + at;
    if (r->da)
        for (size_t i = 0; i < len; i++)
            r->da[at + i] += w[i];
    if (r->db) {
        hl_real *db = r->db + at;
        if (r->db_first)
            memcpy(db, w, len * sizeof *db);
        else
            for (size_t i = 0; i < len; i++)
                db[i] += w[i];
    }
}

void hl_residual_grads_end(hl_graph *g, hl_node *n, const hl_residual_grads *r)
{
    if (!r->handed)
        hl_graph_grad_release(g, n->extra_out[0], r->work);
}
