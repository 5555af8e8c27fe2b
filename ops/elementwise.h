/*
 * elementwise.h: scaling, and sums and products that broadcast
 * (ops/elementwise.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *y = hl_add(g, hl_scale(g, x, 0.5f), bias); // bias (N) on every row of (...,N)
 */
#ifndef HL_OPS_ELEMENTWISE_H
#define HL_OPS_ELEMENTWISE_H

#include "core/graph.h"

hl_tensor *hl_scale(hl_graph *g, hl_tensor *x, hl_real factor);
/* a + b and a * b, where b broadcasts into a's shape: b's dims, aligned to
 * the right, each equal a's or 1 (a bias (N) on (...,N); a gate (H,1,1) on
 * (B,H,T,D)). The result has a's shape. */
hl_tensor *hl_add(hl_graph *g, hl_tensor *a, hl_tensor *b);
hl_tensor *hl_mul(hl_graph *g, hl_tensor *a, hl_tensor *b);

#endif
