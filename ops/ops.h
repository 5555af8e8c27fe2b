/*
 * ops.h: the differentiable ops. Each takes the graph first, computes its
 * result into the graph's arena and records a node for the backward pass when
 * an input requires grad (and grad mode is on).
 *
 * Each op, or family of ops, is declared with its shapes in the header of its
 * own file (hl_linear in ops/linear.h beside ops/linear.c, hl_relu2 in
 * ops/relu2.h, ...). This header includes all of them through
 * ops/op_headers.h, which the build writes from the headers it finds in ops/
 * (all but the internal ones and ops/isa.h): a new op's header is included
 * without a line here.
 *
 * Shapes are row-major; "(...,K)" means any leading dims. On bad input an op
 * records an error naming itself and the shapes, e.g.
 *     linear: input (8,16,63) does not match weight (64,64)
 * and returns the graph's poisoned tensor; so does every op after it.
 *
 * Index arguments (token ids, targets) are int32 arrays copied into the arena,
 * so the caller's array may change as soon as the op returns.
 *
 *     hl_tensor *h  = hl_linear(g, x, w, b);              // (B,T,E)·(F,E)ᵀ + (F) -> (B,T,F)
 *     hl_tensor *s  = hl_matmul(g, q, k, HL_TRANS_B);     // (B,H,T,D)·(B,H,S,D)ᵀ -> (B,H,T,S)
 *     hl_tensor *p  = hl_softmax(g, hl_mask_causal(g, hl_scale(g, s, 0.25f)));
 */
#ifndef HL_OPS_H
#define HL_OPS_H

#include "core/graph.h"
#include "ops/op_headers.h"

#endif
