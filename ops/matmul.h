/*
 * matmul.h: batched matrix products (ops/matmul.c). ops/ops.h includes every
 * op header.
 *
 *     hl_tensor *s = hl_matmul(g, q, k, HL_TRANS_B); // (B,H,T,D)·(B,H,S,D)ᵀ -> (B,H,T,S)
 */
#ifndef HL_OPS_MATMUL_H
#define HL_OPS_MATMUL_H

#include "core/graph.h"

enum { HL_TRANS_A = 1, HL_TRANS_B = 2 };

/* a (...,M,K) · b (...,K,N) -> (...,M,N), batched over equal leading dims; b may
 * also be rank 2 and shared by every batch. flags: HL_TRANS_A reads a as
 * (...,K,M), HL_TRANS_B reads b as (...,N,K); no transpose is materialised. */
hl_tensor *hl_matmul(hl_graph *g, hl_tensor *a, hl_tensor *b, int flags);

#endif
