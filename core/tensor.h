/*
 * tensor.h: dense, contiguous, row-major tensors of rank 1 to 4.
 *
 * A tensor is a shape, a data pointer and (when it takes part in training) a
 * gradient buffer of the same shape. Where the memory comes from decides who
 * frees it:
 *   - hl_tensor_new():   heap, owned by the caller, freed with hl_tensor_free();
 *                        for inputs, fixtures and gradient checks;
 *   - hl_params_add():   the persistent parameter block (core/params.h);
 *   - ops on a graph:    the graph's step arena, gone at hl_graph_reset().
 *
 *     int shape[] = {2, 3};
 *     hl_tensor *x = hl_tensor_new("x", 2, shape, true);   // with a gradient
 *     ...
 *     hl_tensor_free(x);
 */
#ifndef HL_TENSOR_H
#define HL_TENSOR_H

#include <stdbool.h>
#include <stddef.h>

#include "core/real.h"

#define HL_MAX_RANK 4
#define HL_NAME_MAX 64
/* Room for a shape printed as "(a,b,c,d)". */
#define HL_SHAPE_STR_MAX 64

struct hl_node;
struct hl_error;

typedef struct hl_tensor {
    char name[HL_NAME_MAX];
    int rank;                  /* 1..HL_MAX_RANK (0 only for the poisoned tensor) */
    int shape[HL_MAX_RANK];    /* unused trailing entries are 1 */
    size_t numel;
    hl_real *data;             /* numel values, row-major */
    hl_real *grad;             /* numel values, or NULL until a gradient arrives */
    bool requires_grad;
    bool retain_grad;          /* an op output's gradient outlives backward (hl_tensor_retain_grad) */
    struct hl_node *node;      /* the op that produced it; NULL for leaves */
} hl_tensor;

/* A heap tensor filled with zeros (and a zeroed gradient when requires_grad).
 * Returns NULL on a bad shape or a failed allocation, with the reason in err
 * when err is not NULL. */
hl_tensor *hl_tensor_new(const char *name, int rank, const int *shape, bool requires_grad);
hl_tensor *hl_tensor_new_checked(const char *name, int rank, const int *shape,
                                 bool requires_grad, struct hl_error *err);
void hl_tensor_free(hl_tensor *t);

/* Sets the name (truncated to HL_NAME_MAX-1 characters); a no-op on NULL. */
void hl_tensor_set_name(hl_tensor *t, const char *name);

/* Fills in rank, shape and numel; false when the rank or a dimension is out of
 * range or the element count overflows. */
bool hl_tensor_set_shape(hl_tensor *t, int rank, const int *shape);

/* Writes "(2,3,4)" into buf (HL_SHAPE_STR_MAX bytes) and returns buf. */
const char *hl_shape_str(const hl_tensor *t, char *buf);

bool hl_tensor_same_shape(const hl_tensor *a, const hl_tensor *b);

/* Product of dims [from, to). */
size_t hl_tensor_span(const hl_tensor *t, int from, int to);

/* Each value (or gradient) set; no-ops on NULL, or a tensor without them. */
void hl_tensor_fill(hl_tensor *t, hl_real value);
void hl_tensor_zero_grad(hl_tensor *t);

#endif
