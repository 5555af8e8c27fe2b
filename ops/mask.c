/* Attention masks: copies of the scores (B,H,T,S) or (B,T,S) with the entries
 * a query may not attend to set to -inf, ready for hl_softmax. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops/internal.h"

/* What one mask op needs to decide, for every score, whether it is kept. */
typedef struct mask_spec {
    hl_op op;
    const hl_tensor *mask; /* key_is_padding, is_blocked, bias or doc_ids; NULL for causal */
    int batch, heads, queries, keys; /* B, H (1 for rank-3 scores), T, S */
    size_t mask_batch_stride;        /* T*S for a (B,T,S) mask, 0 for a shared (T,S) one */
} mask_spec;

/* Fills in the dims of spec from scores, or records an error and returns false. */
static bool scores_ok(hl_graph *g, const hl_tensor *scores, mask_spec *spec)
{
    char ss[HL_SHAPE_STR_MAX];
    if (scores->rank != 3 && scores->rank != 4) {
        hl_op_fail(g, spec->op, HL_ERR_SHAPE,
                   "scores %s must have rank 3 (B,T,S) or 4 (B,H,T,S)", hl_shape_str(scores, ss));
        return false;
    }
    spec->batch = scores->shape[0];
    spec->heads = scores->rank == 4 ? scores->shape[1] : 1;
    spec->queries = scores->shape[scores->rank - 2];
    spec->keys = scores->shape[scores->rank - 1];
    return true;
}

/* The mask tensors are const and not recorded inputs, so hl_op_inputs_ok does
 * not see them: check them here. */
static bool mask_given(hl_graph *g, const hl_tensor *mask, hl_op op, const char *what)
{
    if (!mask)
        hl_op_fail(g, op, HL_ERR_ARG, "%s is NULL", what);
    else if (hl_tensor_is_poison(mask))
        hl_op_fail(g, op, HL_ERR_ARG, "%s is a poisoned tensor", what);
    return !hl_graph_failed(g);
}

/* is_blocked and bias: (T,S), shared by the batch, or (B,T,S). */
static bool query_key_mask_ok(hl_graph *g, const hl_tensor *scores, const char *what,
                              mask_spec *spec)
{
    const hl_tensor *mask = spec->mask;
    const int r = mask->rank;
    bool fits = (r == 2 || r == 3) && mask->shape[r - 2] == spec->queries &&
                mask->shape[r - 1] == spec->keys && (r == 2 || mask->shape[0] == spec->batch);
    if (!fits) {
        char ms[HL_SHAPE_STR_MAX], ss[HL_SHAPE_STR_MAX];
        hl_op_fail(g, spec->op, HL_ERR_SHAPE,
                   "%s %s does not match scores %s (it must be (T,S) or (B,T,S))", what,
                   hl_shape_str(mask, ms), hl_shape_str(scores, ss));
        return false;
    }
    spec->mask_batch_stride = r == 3 ? (size_t)spec->queries * spec->keys : 0;
    return true;
}

/* Writes one row (batch b, query t) of the output, and of the kept bytes when
 * kept is not NULL: one simple loop per mask, so that each vectorises (a
 * switch on the mask inside the loop ran at about 2 ns a score). */
static void mask_row(const mask_spec *spec, int b, int t, const hl_real *x, hl_real *y,
                     uint8_t *kept)
{
    const int keys = spec->keys;
    if (spec->op == HL_OP_MASK_CAUSAL) {
        const int seen = t < keys ? t + 1 : keys;
        memcpy(y, x, (size_t)seen * sizeof *y);
        for (int s = seen; s < keys; s++)
            y[s] = -INFINITY;
        if (kept) {
            memset(kept, 1, (size_t)seen);
            memset(kept + seen, 0, (size_t)(keys - seen));
        }
        return;
    }
    if (spec->op == HL_OP_MASK_KEY_PADDING || spec->op == HL_OP_MASK_DOCUMENTS) {
        const hl_real *m = spec->mask->data + (size_t)b * keys;
        /* documents: query t is at key position t */
        const hl_real keep_value = spec->op == HL_OP_MASK_DOCUMENTS ? m[t] : 0;
        for (int s = 0; s < keys; s++)
            y[s] = m[s] == keep_value ? x[s] : -INFINITY;
        for (int s = 0; kept && s < keys; s++)
            kept[s] = m[s] == keep_value;
        return;
    }
    const hl_real *m = spec->mask->data + b * spec->mask_batch_stride + (size_t)t * keys;
    if (spec->op == HL_OP_MASK_ADDITIVE) {
        /* Blocked where the bias is -inf, even if the score is +inf. */
        for (int s = 0; s < keys; s++)
            y[s] = m[s] != -INFINITY ? x[s] + m[s] : -INFINITY;
        for (int s = 0; kept && s < keys; s++)
            kept[s] = m[s] != -INFINITY;
        return;
    }
    /* blocked: nonzero blocks */
    for (int s = 0; s < keys; s++)
        y[s] = m[s] == 0 ? x[s] : -INFINITY;
    for (int s = 0; kept && s < keys; s++)
        kept[s] = m[s] == 0;
}

/* The forward shared by the masks, once the shapes are checked. */
static hl_tensor *mask_apply(hl_graph *g, hl_tensor *scores, const mask_spec *spec)
{
    hl_tensor *out = hl_op_output(g, spec->op, scores->rank, scores->shape);
    if (hl_graph_failed(g))
        return &g->poison;
    /* Backward needs to know which entries were kept; those bytes are only
     * allocated when a node is recorded, so evaluation costs no extra memory. */
    hl_node *n = hl_op_record(g, spec->op, out, 1, &scores);
    uint8_t *kept = n ? hl_graph_alloc(g, scores->numel) : NULL;
    if (hl_graph_failed(g))
        return &g->poison;
    if (n)
        n->saved = kept;
    const int keys = spec->keys, queries = spec->queries, heads = spec->heads;
    const size_t rows = scores->numel / (size_t)keys;
#pragma omp parallel for if (scores->numel >= HL_PARALLEL_MIN_WORK) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const int b = (int)(r / ((size_t)heads * queries)), t = (int)(r % (size_t)queries);
        mask_row(spec, b, t, scores->data + r * keys, out->data + r * keys,
                 kept ? kept + r * keys : NULL);
    }
    return out;
}

hl_tensor *hl_mask_causal(hl_graph *g, hl_tensor *scores)
{
    mask_spec spec = {.op = HL_OP_MASK_CAUSAL};
    if (!hl_op_inputs_ok(g, spec.op, 1, &scores) || !scores_ok(g, scores, &spec))
        return &g->poison;
    return mask_apply(g, scores, &spec);
}

hl_tensor *hl_mask_key_padding(hl_graph *g, hl_tensor *scores, const hl_tensor *key_is_padding)
{
    mask_spec spec = {.op = HL_OP_MASK_KEY_PADDING, .mask = key_is_padding};
    if (!hl_op_inputs_ok(g, spec.op, 1, &scores) || !scores_ok(g, scores, &spec) ||
        !mask_given(g, key_is_padding, spec.op, "key_is_padding"))
        return &g->poison;
    if (key_is_padding->rank != 2 || key_is_padding->shape[0] != spec.batch ||
        key_is_padding->shape[1] != spec.keys) {
        char ms[HL_SHAPE_STR_MAX], ss[HL_SHAPE_STR_MAX];
        return hl_op_fail(g, spec.op, HL_ERR_SHAPE,
                          "key_is_padding %s does not match scores %s (it must be (B,S))",
                          hl_shape_str(key_is_padding, ms), hl_shape_str(scores, ss));
    }
    return mask_apply(g, scores, &spec);
}

hl_tensor *hl_mask_blocked(hl_graph *g, hl_tensor *scores, const hl_tensor *is_blocked)
{
    mask_spec spec = {.op = HL_OP_MASK_BLOCKED, .mask = is_blocked};
    if (!hl_op_inputs_ok(g, spec.op, 1, &scores) || !scores_ok(g, scores, &spec) ||
        !mask_given(g, is_blocked, spec.op, "is_blocked") ||
        !query_key_mask_ok(g, scores, "is_blocked", &spec))
        return &g->poison;
    return mask_apply(g, scores, &spec);
}

hl_tensor *hl_mask_additive(hl_graph *g, hl_tensor *scores, const hl_tensor *bias)
{
    mask_spec spec = {.op = HL_OP_MASK_ADDITIVE, .mask = bias};
    if (!hl_op_inputs_ok(g, spec.op, 1, &scores) || !scores_ok(g, scores, &spec) ||
        !mask_given(g, bias, spec.op, "bias") ||
        !query_key_mask_ok(g, scores, "bias", &spec))
        return &g->poison;
    return mask_apply(g, scores, &spec);
}

hl_tensor *hl_mask_documents(hl_graph *g, hl_tensor *scores, const hl_tensor *doc_ids)
{
    mask_spec spec = {.op = HL_OP_MASK_DOCUMENTS, .mask = doc_ids};
    if (!hl_op_inputs_ok(g, spec.op, 1, &scores) || !scores_ok(g, scores, &spec) ||
        !mask_given(g, doc_ids, spec.op, "doc_ids"))
        return &g->poison;
    if (doc_ids->rank != 2 || doc_ids->shape[0] != spec.batch ||
        doc_ids->shape[1] != spec.keys || spec.queries > spec.keys) {
        char ms[HL_SHAPE_STR_MAX], ss[HL_SHAPE_STR_MAX];
        return hl_op_fail(g, spec.op, HL_ERR_SHAPE,
                          "doc_ids %s does not match scores %s (it must be (B,S), with T <= S)",
                          hl_shape_str(doc_ids, ms), hl_shape_str(scores, ss));
    }
    return mask_apply(g, scores, &spec);
}

/* All the masks: the output is the score (plus a constant bias) where kept and
 * a constant -inf elsewhere, so the gradient passes where kept, else nothing. */
void hl_mask_backward(hl_graph *g, hl_node *n)
{
    bool overwrite;
    hl_real *dx = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (!dx)
        return;
    const uint8_t *kept = n->saved;
    const hl_real *dy = n->out->grad;
    const size_t count = n->out->numel;
    /* The branch outside the loops and dy read whatever kept says, so that
     * each loop vectorises. */
    if (overwrite) {
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
        for (size_t i = 0; i < count; i++) {
            const hl_real d = dy[i];
            dx[i] = kept[i] ? d : 0;
        }
    } else {
#pragma omp parallel for if (count >= HL_PARALLEL_MIN_WORK) schedule(static)
        for (size_t i = 0; i < count; i++) {
            const hl_real d = dy[i];
            dx[i] += kept[i] ? d : 0;
        }
    }
}
