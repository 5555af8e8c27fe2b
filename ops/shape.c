/* Shape ops: reshape (a view) and permute/transpose (contiguous copies). */
#include <string.h>

#include "ops/internal.h"

hl_tensor *hl_reshape(hl_graph *g, hl_tensor *x, int rank, const int *shape)
{
    if (!hl_op_inputs_ok(g, HL_OP_RESHAPE, 1, &x))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX];
    if (rank < 1 || rank > HL_MAX_RANK || !shape)
        return hl_op_fail(g, HL_OP_RESHAPE, HL_ERR_SHAPE, "rank %d of the new shape is not 1..%d",
                          rank, HL_MAX_RANK);
    int dims[HL_MAX_RANK];
    int inferred = -1;
    size_t known = 1;
    for (int i = 0; i < rank; i++) {
        dims[i] = shape[i];
        if (shape[i] == -1 && inferred < 0) {
            inferred = i;
        } else if (shape[i] < 1) {
            return hl_op_fail(g, HL_OP_RESHAPE, HL_ERR_SHAPE, "dim %d of the new shape is %d",
                              i, shape[i]);
        } else {
            known *= (size_t)shape[i];
        }
    }
    if (inferred >= 0 && known > 0 && x->numel % known == 0)
        dims[inferred] = (int)(x->numel / known);
    hl_tensor probe = {0};
    if (!hl_tensor_set_shape(&probe, rank, dims) || probe.numel != x->numel) {
        char req[HL_SHAPE_STR_MAX];
        probe.rank = rank;
        for (int i = 0; i < rank; i++)
            probe.shape[i] = shape[i];
        return hl_op_fail(g, HL_OP_RESHAPE, HL_ERR_SHAPE, "cannot view %s (%zu values) as %s",
                          hl_shape_str(x, xs), x->numel, hl_shape_str(&probe, req));
    }
    hl_tensor *out = hl_graph_calloc(g, sizeof *out);
    if (!out)
        return &g->poison;
    *out = probe;
    hl_tensor_set_name(out, "reshape");
    out->data = x->data; /* a view: no copy */
    hl_op_record(g, HL_OP_RESHAPE, out, 1, &x);
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_reshape_backward(hl_graph *g, hl_node *n)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (!dx)
        return;
    const hl_real *dy = n->out->grad;
    size_t count = n->out->numel;
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t i = 0; i < count; i++)
        dx[i] = overwrite ? dy[i] : dx[i] + dy[i];
}

/* Row-major strides of a shape padded to HL_MAX_RANK dims. */
static void strides_of(const int *shape, size_t *strides)
{
    size_t s = 1;
    for (int i = HL_MAX_RANK - 1; i >= 0; i--) {
        strides[i] = s;
        s *= (size_t)shape[i];
    }
}

/* For each element of the (padded, 4-d) output, dst[o] (+)= src[input index].
 * The outer loop runs over the output's first two dims, so each thread owns
 * whole output rows. */
static void permute_copy(const hl_real *src, const int *in_shape, hl_real *dst,
                         const int *out_shape, const int *perm, bool accumulate, bool to_input)
{
    size_t in_strides[HL_MAX_RANK], out_strides[HL_MAX_RANK], step[HL_MAX_RANK];
    strides_of(in_shape, in_strides);
    strides_of(out_shape, out_strides);
    for (int i = 0; i < HL_MAX_RANK; i++)
        step[i] = in_strides[perm[i]]; /* input stride along output dim i */
    const int d0 = out_shape[0], d1 = out_shape[1], d2 = out_shape[2], d3 = out_shape[3];
#pragma omp parallel for collapse(2) if ((size_t)d0 * d1 * d2 * d3 >= HL_PARALLEL_MIN_WORK) \
    schedule(static)
    for (int a = 0; a < d0; a++)
        for (int b = 0; b < d1; b++)
            for (int c = 0; c < d2; c++) {
                size_t o = a * out_strides[0] + b * out_strides[1] + c * out_strides[2];
                size_t in = a * step[0] + b * step[1] + c * step[2];
                for (int d = 0; d < d3; d++, o++, in += step[3]) {
                    /* Forward copies input -> output; backward adds output grads
                     * back at the input positions (to_input). */
                    size_t from = to_input ? o : in, to = to_input ? in : o;
                    if (accumulate)
                        dst[to] += src[from];
                    else
                        dst[to] = src[from];
                }
            }
}

hl_tensor *hl_permute(hl_graph *g, hl_tensor *x, const int *perm)
{
    if (!hl_op_inputs_ok(g, HL_OP_PERMUTE, 1, &x))
        return &g->poison;
    if (!perm)
        return hl_op_fail(g, HL_OP_PERMUTE, HL_ERR_ARG, "perm is NULL");
    char xs[HL_SHAPE_STR_MAX];
    int seen = 0, out_shape[HL_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        if (perm[i] < 0 || perm[i] >= x->rank || (seen >> perm[i] & 1))
            return hl_op_fail(g, HL_OP_PERMUTE, HL_ERR_ARG,
                              "perm[%d] = %d is not a permutation of the dims of %s", i, perm[i],
                              hl_shape_str(x, xs));
        seen |= 1 << perm[i];
        out_shape[i] = x->shape[perm[i]];
    }
    hl_tensor *out = hl_op_output(g, HL_OP_PERMUTE, x->rank, out_shape);
    if (hl_graph_failed(g))
        return &g->poison;
    int full_perm[HL_MAX_RANK];
    for (int i = 0; i < HL_MAX_RANK; i++)
        full_perm[i] = i < x->rank ? perm[i] : i;
    permute_copy(x->data, x->shape, out->data, out->shape, full_perm, false, false);
    hl_node *n = hl_op_record(g, HL_OP_PERMUTE, out, 1, &x);
    if (n)
        memcpy(n->ints, full_perm, sizeof full_perm);
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_permute_backward(hl_graph *g, hl_node *n)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (!dx)
        return;
    /* Walk the output in order and put each gradient back at its input position:
     * every input element receives exactly one value, so threads never collide. */
    permute_copy(n->out->grad, n->inputs[0]->shape, dx, n->out->shape, n->ints, !overwrite,
                 true);
}

hl_tensor *hl_transpose(hl_graph *g, hl_tensor *x, int dim0, int dim1)
{
    if (!hl_op_inputs_ok_as(g, "transpose", 1, &x))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX];
    if (dim0 < 0 || dim0 >= x->rank || dim1 < 0 || dim1 >= x->rank)
        return hl_op_fail_as(g, "transpose", HL_ERR_ARG, "dims %d,%d out of range for %s", dim0,
                             dim1, hl_shape_str(x, xs));
    int perm[HL_MAX_RANK] = {0, 1, 2, 3};
    perm[dim0] = dim1;
    perm[dim1] = dim0;
    return hl_permute(g, x, perm);
}

/* x viewed as (outer, dim, inner): the copy moves `length` rows of `inner`
 * values out of each outer block. */
typedef struct {
    size_t outer, inner, dim, start, length;
} narrow_geometry;

static narrow_geometry narrow_geometry_of(const hl_tensor *x, int dim, int start, int length)
{
    return (narrow_geometry){
        .outer = hl_tensor_span(x, 0, dim),
        .inner = hl_tensor_span(x, dim + 1, x->rank),
        .dim = (size_t)x->shape[dim],
        .start = (size_t)start,
        .length = (size_t)length,
    };
}

hl_tensor *hl_narrow(hl_graph *g, hl_tensor *x, int dim, int start, int length)
{
    if (!hl_op_inputs_ok(g, HL_OP_NARROW, 1, &x))
        return &g->poison;
    char xs[HL_SHAPE_STR_MAX];
    int d = dim < 0 ? dim + x->rank : dim;
    if (d < 0 || d >= x->rank)
        return hl_op_fail(g, HL_OP_NARROW, HL_ERR_ARG, "dim %d out of range for %s", dim,
                          hl_shape_str(x, xs));
    if (start < 0 || length < 1 || start > x->shape[d] - length)
        return hl_op_fail(g, HL_OP_NARROW, HL_ERR_ARG,
                          "start %d, length %d: elements %lld..%lld of dim %d are outside %s",
                          start, length, (long long)start, (long long)start + length - 1, dim,
                          hl_shape_str(x, xs));
    int shape[HL_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = length;
    hl_tensor *out = hl_op_output(g, HL_OP_NARROW, x->rank, shape);
    if (hl_graph_failed(g))
        return &g->poison;
    narrow_geometry n = narrow_geometry_of(x, d, start, length);
    size_t block = n.length * n.inner;
#pragma omp parallel for if (out->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t o = 0; o < n.outer; o++)
        memcpy(out->data + o * block, x->data + (o * n.dim + n.start) * n.inner,
               block * sizeof(hl_real));
    hl_node *node = hl_op_record(g, HL_OP_NARROW, out, 1, &x);
    if (node) {
        node->ints[0] = d;
        node->ints[1] = start;
    }
    return hl_graph_failed(g) ? &g->poison : out;
}

void hl_narrow_backward(hl_graph *g, hl_node *node)
{
    hl_tensor *x = node->inputs[0];
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, x, &overwrite);
    if (!dx)
        return;
    int d = node->ints[0];
    narrow_geometry n = narrow_geometry_of(x, d, node->ints[1], node->out->shape[d]);
    const size_t block = n.length * n.inner, before = n.start * n.inner;
    const size_t after = (n.dim - n.start - n.length) * n.inner;
    const hl_real *dy = node->out->grad;
#pragma omp parallel for if (x->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t o = 0; o < n.outer; o++) {
        hl_real *dst = dx + o * n.dim * n.inner;
        const hl_real *src = dy + o * block;
        if (overwrite) { /* the slice's gradient, zero around it */
            memset(dst, 0, before * sizeof *dst);
            memcpy(dst + before, src, block * sizeof *dst);
            memset(dst + before + block, 0, after * sizeof *dst);
            continue;
        }
        for (size_t i = 0; i < block; i++)
            dst[before + i] += src[i];
    }
}
