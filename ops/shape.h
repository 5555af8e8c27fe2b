/*
 * shape.h: views and copies that change a tensor's shape (ops/shape.c).
 * ops/ops.h includes every op header.
 *
 *     hl_tensor *split = hl_reshape(g, x, 4, (int[]){B, T, H, -1}); // (B,T,E) -> (B,T,H,E/H)
 */
#ifndef HL_OPS_SHAPE_H
#define HL_OPS_SHAPE_H

#include "core/graph.h"

/* A view: shares x's data. One dim may be -1 (inferred). */
hl_tensor *hl_reshape(hl_graph *g, hl_tensor *x, int rank, const int *shape);
/* Output dim i is input dim perm[i]; a contiguous copy. */
hl_tensor *hl_permute(hl_graph *g, hl_tensor *x, const int *perm);
/* Elements start..start+length-1 along dim (negative dims count from the
 * end); a contiguous copy. Splits a packed q|k|v projection. */
hl_tensor *hl_narrow(hl_graph *g, hl_tensor *x, int dim, int start, int length);
/* Swaps two dims; a contiguous copy. */
hl_tensor *hl_transpose(hl_graph *g, hl_tensor *x, int dim0, int dim1);

#endif
