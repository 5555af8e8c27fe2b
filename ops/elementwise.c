/* Elementwise ops: scale, and add/mul with b broadcast into a's shape. */
#include <string.h>

#include "ops/internal.h"

hl_tensor *hl_scale(hl_graph *g, hl_tensor *x, hl_real factor)
{
    if (!hl_op_inputs_ok(g, HL_OP_SCALE, 1, &x))
        return &g->poison;
    hl_tensor *out = hl_op_output(g, HL_OP_SCALE, x->rank, x->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const hl_real *src = x->data;
    hl_real *dst = out->data;
    size_t count = x->numel;
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t i = 0; i < count; i++)
        dst[i] = factor * src[i];
    hl_node *n = hl_op_record(g, HL_OP_SCALE, out, 1, &x);
    if (n)
        n->reals[0] = factor;
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_scale_backward(hl_graph *g, hl_node *n)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (!dx)
        return;
    const hl_real *dy = n->out->grad;
    const hl_real factor = n->reals[0];
    size_t count = n->out->numel;
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t i = 0; i < count; i++)
        dx[i] = overwrite ? factor * dy[i] : dx[i] + factor * dy[i];
}

/* How b (right-aligned, dims equal or 1) maps onto a 4-d view of a. */
typedef struct {
    int shape[HL_MAX_RANK];      /* a's dims, padded on the left with 1s */
    size_t b_stride[HL_MAX_RANK]; /* b's stride along each of those dims; 0 = broadcast */
    bool same_shape;
} broadcast_map;

static bool broadcast_map_make(const hl_tensor *a, const hl_tensor *b, broadcast_map *m)
{
    if (b->rank > a->rank)
        return false;
    int pad_a = HL_MAX_RANK - a->rank, pad_b = HL_MAX_RANK - b->rank;
    size_t stride = 1;
    m->same_shape = b->numel == a->numel;
    for (int i = HL_MAX_RANK - 1; i >= 0; i--) {
        int da = i >= pad_a ? a->shape[i - pad_a] : 1;
        int db = i >= pad_b ? b->shape[i - pad_b] : 1;
        if (db != da && db != 1)
            return false;
        m->shape[i] = da;
        m->b_stride[i] = db == 1 ? 0 : stride;
        stride *= (size_t)db;
    }
    return true;
}

/* Index into b of the element of a at the 4-d position (i0,i1,i2,i3). */
static inline size_t b_index(const broadcast_map *m, int i0, int i1, int i2, int i3)
{
    return i0 * m->b_stride[0] + i1 * m->b_stride[1] + i2 * m->b_stride[2] + i3 * m->b_stride[3];
}

typedef enum { BINARY_ADD, BINARY_MUL } binary_kind;

static hl_tensor *binary(hl_graph *g, hl_op op, binary_kind kind, hl_tensor *a, hl_tensor *b)
{
    hl_tensor *inputs[2] = {a, b};
    if (!hl_op_inputs_ok(g, op, 2, inputs))
        return &g->poison;
    broadcast_map m;
    if (!broadcast_map_make(a, b, &m)) {
        char as[HL_SHAPE_STR_MAX], bs[HL_SHAPE_STR_MAX];
        return hl_op_fail(g, op, HL_ERR_SHAPE,
                          "b %s does not broadcast into a %s (b's dims, right-aligned, "
                          "must equal a's or be 1)",
                          hl_shape_str(b, bs), hl_shape_str(a, as));
    }
    hl_tensor *out = hl_op_output(g, op, a->rank, a->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const hl_real *pa = a->data, *pb = b->data;
    hl_real *po = out->data;
    const int *s = m.shape;
    size_t rows = (size_t)s[0] * s[1] * s[2];
#pragma omp parallel for if (a->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        int i2 = (int)(r % s[2]), i1 = (int)(r / s[2] % s[1]), i0 = (int)(r / s[2] / s[1]);
        size_t o = r * s[3], bi = b_index(&m, i0, i1, i2, 0);
        for (int i3 = 0; i3 < s[3]; i3++, o++) {
            hl_real bv = pb[bi + i3 * m.b_stride[3]];
            po[o] = kind == BINARY_ADD ? pa[o] + bv : pa[o] * bv;
        }
    }
    hl_op_record(g, op, out, 2, inputs);
    return hl_graph_failed(g) ? &g->poison : out;
}

/* db[e] (+)= Σ_o dy[o] (·a[o] for mul) over the outputs o that broadcast b's
 * element e, for one e: the outputs in increasing order, as one running sum in
 * hl_real, so the result does not depend on which thread takes e. */
static void reduce_into_b(const broadcast_map *m, binary_kind kind, const hl_real *dy,
                          const hl_real *a, size_t e, bool overwrite, hl_real *db)
{
    int lo[HL_MAX_RANK], hi[HL_MAX_RANK];
    for (int k = 0; k < HL_MAX_RANK; k++) {
        lo[k] = m->b_stride[k] ? (int)(e / m->b_stride[k] % (size_t)m->shape[k]) : 0;
        hi[k] = m->b_stride[k] ? lo[k] + 1 : m->shape[k];
    }
    const int *s = m->shape;
    hl_real sum = overwrite ? 0 : db[e];
    for (int i0 = lo[0]; i0 < hi[0]; i0++)
        for (int i1 = lo[1]; i1 < hi[1]; i1++)
            for (int i2 = lo[2]; i2 < hi[2]; i2++)
                for (int i3 = lo[3]; i3 < hi[3]; i3++) {
                    const size_t o = (((size_t)i0 * s[1] + i1) * s[2] + i2) * s[3] + i3;
                    sum += kind == BINARY_ADD ? dy[o] : dy[o] * a[o];
                }
    db[e] = sum;
}

static void binary_backward(hl_graph *g, hl_node *n, binary_kind kind)
{
    hl_tensor *a = n->inputs[0], *b = n->inputs[1];
    /* A first gradient is written, not added to zeros. For a + a, the second
     * call finds a's gradient allocated and db adds after da's loop. */
    bool a_first, b_first;
    hl_real *da = hl_op_grad_first(g, a, &a_first);
    hl_real *db = hl_op_grad_first(g, b, &b_first);
    broadcast_map m = {0};
    broadcast_map_make(a, b, &m); /* succeeded in the forward */
    const hl_real *dy = n->out->grad;
    const size_t count = n->out->numel;
    const int *s = m.shape;
    const size_t rows = (size_t)s[0] * s[1] * s[2];
    /* One team for both inputs; every element of da and db has one owner. */
#pragma omp parallel if (count >= HL_PARALLEL_MIN_WORK)
    {
        if (da) {
#pragma omp for schedule(static)
            for (size_t r = 0; r < rows; r++) {
                int i2 = (int)(r % s[2]), i1 = (int)(r / s[2] % s[1]), i0 = (int)(r / s[2] / s[1]);
                size_t o = r * s[3], bi = b_index(&m, i0, i1, i2, 0);
                for (int i3 = 0; i3 < s[3]; i3++, o++) {
                    const hl_real d = kind == BINARY_ADD
                                          ? dy[o]
                                          : dy[o] * b->data[bi + i3 * m.b_stride[3]];
                    da[o] = a_first ? d : da[o] + d;
                }
            }
        }
        if (db && m.same_shape) {
#pragma omp for schedule(static)
            for (size_t o = 0; o < count; o++) {
                const hl_real d = kind == BINARY_ADD ? dy[o] : dy[o] * a->data[o];
                db[o] = b_first ? d : db[o] + d;
            }
        } else if (db) {
#pragma omp for schedule(static)
            for (size_t e = 0; e < b->numel; e++)
                reduce_into_b(&m, kind, dy, a->data, e, b_first, db);
        }
    }
}

hl_tensor *hl_add(hl_graph *g, hl_tensor *a, hl_tensor *b)
{
    return binary(g, HL_OP_ADD, BINARY_ADD, a, b);
}

hl_tensor *hl_mul(hl_graph *g, hl_tensor *a, hl_tensor *b)
{
    return binary(g, HL_OP_MUL, BINARY_MUL, a, b);
}

void hl_add_backward(hl_graph *g, hl_node *n) { binary_backward(g, n, BINARY_ADD); }
void hl_mul_backward(hl_graph *g, hl_node *n) { binary_backward(g, n, BINARY_MUL); }
