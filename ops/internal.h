/*
 * internal.h: what op implementations share (not part of the public API).
 *
 * Ops read and write the fields of the nodes they record (struct hl_node,
 * core/internal.h, included here). The shape of every op:
 *
 *     hl_tensor *hl_scale(hl_graph *g, hl_tensor *x, hl_real factor)
 *     {
 *         if (!hl_op_inputs_ok(g, HL_OP_SCALE, 1, &x))
 *             return &g->poison;                      // sticky error
 *         hl_tensor *out = hl_op_output(g, HL_OP_SCALE, x->rank, x->shape);
 *         if (hl_graph_failed(g))
 *             return &g->poison;
 *         ...forward kernel into out->data...
 *         hl_node *n = hl_op_record(g, HL_OP_SCALE, out, 1, &x);
 *         if (n) n->reals[0] = factor;                // what backward needs
 *         return hl_graph_failed(g) ? &g->poison : out;
 *     }
 *
 *     void hl_scale_backward(hl_graph *g, hl_node *n)
 *     {
 *         hl_real *dx = hl_op_grad(g, n->inputs[0]);  // NULL: input needs no grad
 *         if (dx) ...dx[i] += factor * n->out->grad[i]...   // accumulate
 *     }
 *
 * (hl_op_grad_first lets a backward that writes its input's whole gradient
 * store instead when it is the first to reach that input.)
 *
 * Kernels parallelise their outermost independent loop with
 * `#pragma omp parallel for if (work >= HL_PARALLEL_MIN_WORK)` and never let a
 * thread's share of the work change the order in which any one output element
 * is summed, so 1 and N threads give bitwise identical results.
 */
#ifndef HL_OPS_INTERNAL_H
#define HL_OPS_INTERNAL_H

#include <stdbool.h>

#include "core/graph.h"
#include "core/internal.h"
#include "ops/ops.h"

/* Below this many multiply-adds a kernel runs on one thread: starting a team
 * would cost more than it saves. */
#define HL_PARALLEL_MIN_WORK 32768

/* Each op's name, input count, backward kernel and flags (ops/op_table.c);
 * a recorded node keeps its own (hl_node.info). */
const hl_op_info *hl_op_get(hl_op op);

/* False (with an error recorded) when the graph has already failed or an input
 * is NULL, poisoned or without data (a parameter before hl_params_commit). */
bool hl_op_inputs_ok(hl_graph *g, hl_op op, int n, hl_tensor *const *inputs);

/* An arena tensor named after the op, NOT zero-filled: the forward kernel
 * must write every element (zeroing would cost a pass over memory). */
hl_tensor *hl_op_output(hl_graph *g, hl_op op, int rank, const int *shape);

/* Records an error "<op>: <message>" and returns the poisoned tensor. */
hl_tensor *hl_op_fail(hl_graph *g, hl_op op, hl_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The two above for a function that runs as another op (hl_transpose records a
 * permute) but should name itself in messages. */
bool hl_op_inputs_ok_as(hl_graph *g, const char *name, int n, hl_tensor *const *inputs);
hl_tensor *hl_op_fail_as(hl_graph *g, const char *name, hl_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One row of n values through softmax (ops/softmax.c), as hl_softmax takes
 * it; y may be x. The fused attention shares it for its whole rows. */
void hl_softmax_row(const hl_real *x, hl_real *y, int n);

/* The two forms of GELU: exact (hl_gelu) and tanh (hl_gelu_tanh). */
typedef enum { HL_GELU_EXACT, HL_GELU_TANH } hl_gelu_form;

/* dx (+)= dy·GELU'(x) over count values (ops/gelu.c), as hl_gelu's or
 * hl_gelu_tanh's backward takes it: overwrite stores, otherwise adds. */
void hl_gelu_grad_rows(hl_gelu_form form, const hl_real *x, const hl_real *dy, hl_real *dx,
                       size_t count, bool overwrite);

/* Parameter gradients as column sums over rows (ops/column_sums.c), added
 * to sum_dy and sum_dxhat (either may be NULL): for each column j < cols of
 * dy (rows,cols), Σ_r dy and, given x of dy's shape, Σ_r dy·x̂ with x̂ = (x -
 * mean[r·step])·rstd[r·step] (mean NULL: 0). Each column is summed in double
 * over the rows in order, whatever the thread count and kernel set. */
void hl_column_sums(const hl_real *dy, const hl_real *x, const double *mean, const double *rstd,
                    size_t step, size_t rows, int cols, hl_real *sum_dy, hl_real *sum_dxhat);

/* cos θ and sin θ of hl_rope_partial for every position t < T and pair i <
 * rot/2, θ = t·base^(-2i/rot), computed in double and then rounded: (T,
 * rot/2) each. The first rot values of each row are rotated (hl_rope: all). */
typedef struct {
    hl_real *cosines, *sines;
    int rot;
} hl_rope_table;

/* Fills tab in the arena (ops/rope.c); false when out of memory. */
bool hl_rope_table_make(hl_graph *g, int T, int rot, double base, hl_rope_table *tab);

/* One row of D values at position t: its first tab->rot rotated by the
 * angles times sign (-1: back, for backward), the rest as they are, into
 * dst, or added to it when accumulate (ops/rope.c). */
void hl_rope_apply_row(const hl_rope_table *tab, size_t t, const hl_real *src, hl_real sign,
                       hl_real *dst, int D, bool accumulate);

/* ---- the residual add of the fused add + norm ops (ops/residual.c) ---- */

/* False (with an error naming op) unless a and b are usable inputs of one
 * shape; *sum is then an uninitialised arena tensor of that shape. */
bool hl_residual_begin(hl_graph *g, hl_op op, hl_tensor *a, hl_tensor *b, hl_tensor **sum);

/* One row of the sum, sum[j] = a[j] + b[j] as hl_add takes it; returns sum,
 * for the norm to read while it is in cache. */
const hl_real *hl_residual_row(const hl_real *a, const hl_real *b, hl_real *sum, int cols);

/* Backward of s = a + b where a norm read s: `work` is s's whole gradient,
 * to which the norm's backward adds its own (or stores, when `overwrite`);
 * then each row goes on to a and b. */
typedef struct {
    hl_real *work;
    bool overwrite;
    hl_real *da, *db;        /* where each row goes; NULL: nowhere (work is a's own) */
    bool da_first, db_first; /* store rather than add */
    bool handed;             /* work became a's gradient */
} hl_residual_grads;

/* Sets r up for node n (inputs a, b first, extra_out[0] the sum); false when out of
 * memory (the graph's error is set). */
bool hl_residual_grads_begin(hl_graph *g, hl_node *n, hl_residual_grads *r);
/* a's and b's share of the len values at offset at, once work holds them. */
void hl_residual_grads_row(const hl_residual_grads *r, size_t at, size_t len);
/* Gives work back unless it became a's gradient. */
void hl_residual_grads_end(hl_graph *g, hl_node *n, const hl_residual_grads *r);

/* Appends a node when an input requires grad and grad mode is on, and marks
 * out as requiring grad. Returns the node, or NULL when none was needed (or on
 * error: an op without backward on a path that needs gradients). */
hl_node *hl_op_record(hl_graph *g, hl_op op, hl_tensor *out, int n, hl_tensor *const *inputs);

/* Adds t to the outputs of node n (which may be NULL: nothing recorded) after
 * its first, and marks t as requiring grad. */
void hl_op_record_output(hl_node *n, hl_tensor *t);

/* t's gradient buffer (zeroed arena memory on first use), or NULL when t does
 * not require grad. */
hl_real *hl_op_grad(hl_graph *g, hl_tensor *t);

/* The same for a backward that stores every element of t's gradient, in one
 * go, before it fetches any other gradient. When no gradient has reached t
 * yet, the buffer is left unzeroed and *overwrite set: the caller stores (=)
 * where it would add, saving a pass of zeros. Whoever comes next to t (another
 * input of the same node, an earlier node) finds the buffer and adds as usual. */
hl_real *hl_op_grad_first(hl_graph *g, hl_tensor *t, bool *overwrite);

/* Copies n int32 values into the arena (NULL on error). */
int32_t *hl_op_save_ints(hl_graph *g, const int32_t *values, size_t n);

/* The backward kernels, declared from the list in core/op_list.h: one per
 * entry whose backward is not NULL (ops sharing a kernel declare it again,
 * which C allows). To tell the token NULL from a function name, the name is
 * pasted onto HL_OP_PROBE_ (before NULL could expand): HL_OP_PROBE_NULL
 * expands to an extra argument that moves 1 into HL_OP_SECOND's place, any
 * other paste is an unknown name that leaves 0 there. */
#define HL_OP_PROBE_NULL ~, 1
#define HL_OP_SECOND_(a, b, ...) b
#define HL_OP_SECOND(...) HL_OP_SECOND_(__VA_ARGS__)
#define HL_OP_CAT_(a, b) a##b
#define HL_OP_CAT(a, b) HL_OP_CAT_(a, b)
#define HL_OP_DECLARE_0(f) void f(hl_graph *g, hl_node *n);
#define HL_OP_DECLARE_1(f)
#define HL_OP_DECLARE_BACKWARD(e, name, n_inputs, backward, flags) \
    HL_OP_CAT(HL_OP_DECLARE_, HL_OP_SECOND(HL_OP_PROBE_##backward, 0, ~))(backward)
HL_OP_LIST(HL_OP_DECLARE_BACKWARD)

#endif
