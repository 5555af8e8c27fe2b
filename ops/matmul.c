/* matmul: batched op(a) (...,M,K) · op(b) (...,K,N) -> (...,M,N), on top of
 * hl_gemm; transposed operands are read in place, never copied. */
#include "ops/gemm.h"
#include "ops/internal.h"

typedef struct {
    bool ta, tb;
    bool shared_b; /* b is one (K,N) matrix used by every batch of a */
    int M, N, K, batch;
    int lda, ldb;  /* row strides of a and b as stored */
} matmul_dims;

static matmul_dims matmul_dims_of(const hl_tensor *a, const hl_tensor *b, int flags)
{
    matmul_dims d;
    d.ta = flags & HL_TRANS_A;
    d.tb = flags & HL_TRANS_B;
    d.M = a->shape[a->rank - (d.ta ? 1 : 2)];
    d.K = a->shape[a->rank - (d.ta ? 2 : 1)];
    d.N = b->shape[b->rank - (d.tb ? 2 : 1)];
    d.batch = (int)hl_tensor_span(a, 0, a->rank - 2);
    d.shared_b = b->rank == 2;
    d.lda = d.ta ? d.M : d.K;
    d.ldb = d.tb ? d.K : d.N;
    return d;
}

static const char *flags_str(int flags)
{
    static const char *const names[] = {"no transpose", "HL_TRANS_A", "HL_TRANS_B",
                                        "HL_TRANS_A|HL_TRANS_B"};
    return names[flags];
}

hl_tensor *hl_matmul(hl_graph *g, hl_tensor *a, hl_tensor *b, int flags)
{
    hl_tensor *inputs[2] = {a, b};
    if (!hl_op_inputs_ok(g, HL_OP_MATMUL, 2, inputs))
        return &g->poison;
    char as[HL_SHAPE_STR_MAX], bs[HL_SHAPE_STR_MAX];
    if (flags & ~(HL_TRANS_A | HL_TRANS_B))
        return hl_op_fail(g, HL_OP_MATMUL, HL_ERR_ARG,
                          "flags %d are not a combination of HL_TRANS_A and HL_TRANS_B", flags);
    if (a->rank < 2 || b->rank < 2)
        return hl_op_fail(g, HL_OP_MATMUL, HL_ERR_SHAPE, "a %s and b %s need rank 2 or more",
                          hl_shape_str(a, as), hl_shape_str(b, bs));
    const int kb = b->shape[b->rank - (flags & HL_TRANS_B ? 1 : 2)];
    matmul_dims d = matmul_dims_of(a, b, flags);
    if (d.K != kb)
        return hl_op_fail(g, HL_OP_MATMUL, HL_ERR_SHAPE,
                          "inner dims of a %s and b %s differ (%d vs %d) with %s",
                          hl_shape_str(a, as), hl_shape_str(b, bs), d.K, kb, flags_str(flags));
    bool batch_ok = b->rank == 2 || b->rank == a->rank;
    for (int i = 0; batch_ok && b->rank > 2 && i < a->rank - 2; i++)
        batch_ok = a->shape[i] == b->shape[i];
    if (!batch_ok)
        return hl_op_fail(g, HL_OP_MATMUL, HL_ERR_SHAPE,
                          "batch dims of a %s and b %s differ (b must share them or be rank 2)",
                          hl_shape_str(a, as), hl_shape_str(b, bs));
    int shape[HL_MAX_RANK];
    for (int i = 0; i < a->rank - 2; i++)
        shape[i] = a->shape[i];
    shape[a->rank - 2] = d.M;
    shape[a->rank - 1] = d.N;
    hl_tensor *out = hl_op_output(g, HL_OP_MATMUL, a->rank, shape);
    if (hl_graph_failed(g))
        return &g->poison;
    const size_t mk = (size_t)d.M * d.K, kn = (size_t)d.K * d.N, mn = (size_t)d.M * d.N;
    hl_gemm_batched(d.ta, d.tb, d.M, d.N, d.K, 1, a->data, d.lda, b->data, d.ldb, 0, out->data,
                    d.N, d.batch, mk, d.shared_b ? 0 : kn, mn);
    hl_node *n = hl_op_record(g, HL_OP_MATMUL, out, 2, inputs);
    if (n)
        n->ints[0] = flags;
    return hl_graph_failed(g) ? &g->poison : out;
}

/* The gradient of b stored as b is: op(a)ᵀ·dc (K,N), or dcᵀ·op(a) (N,K) when
 * tb; for `count` products of m rows of a and dc each, the operands advancing
 * by the given strides. */
static void grad_b_gemm(const matmul_dims *d, int m, const hl_real *A, const hl_real *dC,
                        hl_real beta, hl_real *dB, int count, size_t stride_a,
                        size_t stride_c, size_t stride_db)
{
    if (d->tb)
        hl_gemm_batched(true, d->ta, d->N, d->K, m, 1, dC, d->N, A, d->lda, beta, dB, d->K,
                        count, stride_c, stride_a, stride_db);
    else
        hl_gemm_batched(!d->ta, false, d->K, d->N, m, 1, A, d->lda, dC, d->N, beta, dB, d->N,
                        count, stride_a, stride_c, stride_db);
}

void hl_matmul_backward(hl_graph *g, hl_node *n)
{
    const hl_tensor *a = n->inputs[0], *b = n->inputs[1];
    const matmul_dims d = matmul_dims_of(a, b, n->ints[0]);
    const size_t mk = (size_t)d.M * d.K, kn = (size_t)d.K * d.N, mn = (size_t)d.M * d.N;
    const size_t stride_b = d.shared_b ? 0 : kn;
    const hl_real *dC = n->out->grad; /* (batch,M,N) */

    /* Each gradient is written whole before the next is fetched (a and b
     * may be one tensor): beta 0 stores where nothing was there to add to. */
    bool overwrite;
    hl_real *dA = hl_op_grad_first(g, n->inputs[0], &overwrite);
    if (dA) {
        const hl_real beta = overwrite ? 0 : 1;
        if (!d.ta) /* dA (M,K) (+)= dC · op(b)ᵀ */
            hl_gemm_batched(false, !d.tb, d.M, d.K, d.N, 1, dC, d.N, b->data, d.ldb, beta, dA,
                            d.K, d.batch, mn, stride_b, mk);
        else /* dA stored (K,M) (+)= op(b) · dCᵀ */
            hl_gemm_batched(d.tb, true, d.K, d.M, d.N, 1, b->data, d.ldb, dC, d.N, beta, dA,
                            d.M, d.batch, stride_b, mn, mk);
    }

    hl_real *dB = hl_op_grad_first(g, n->inputs[1], &overwrite);
    if (!dB)
        return;
    const hl_real beta = overwrite ? 0 : 1;
    if (!d.shared_b || d.batch == 1) {
        grad_b_gemm(&d, d.M, a->data, dC, beta, dB, d.batch, mk, mn, kn);
    } else if (!d.ta) {
        /* A shared b sums over the batch. Untransposed, a's batches are
         * consecutive rows, so the sum is one product with batch·M rows. */
        grad_b_gemm(&d, d.M * d.batch, a->data, dC, beta, dB, 1, 0, 0, 0);
    } else {
        /* a stored (K,M) per batch does not stack into one matrix: add the
         * batches one after another (each product still runs in parallel). */
        for (int i = 0; i < d.batch; i++)
            grad_b_gemm(&d, d.M, a->data + i * mk, dC + i * mn, i == 0 ? beta : 1, dB, 1, 0, 0,
                        0);
    }
}
