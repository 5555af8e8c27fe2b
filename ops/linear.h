/*
 * linear.h: fully connected layers, with the GELU fused in (ops/linear.c).
 * ops/ops.h includes every op header.
 *
 *     hl_tensor *h = hl_linear(g, x, w, b);    // (B,T,E)·(F,E)ᵀ + (F) -> (B,T,F)
 */
#ifndef HL_OPS_LINEAR_H
#define HL_OPS_LINEAR_H

#include "core/graph.h"

/* x (...,K) · w(N,K)ᵀ + b(N) -> (...,N); b may be NULL. */
hl_tensor *hl_linear(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b);
/* hl_gelu(hl_linear(x, w, b)) as one op, with the same bits: the bias and the
 * GELU are taken inside the product's tiles (no passes of their own over the
 * (...,N) output), and backward keeps the pre-activation as hl_gelu does. */
hl_tensor *hl_linear_gelu(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b);
/* The same with GELU's tanh form: hl_gelu_tanh(hl_linear(x, w, b)) as one
 * op, with the same bits (GPT-2's MLP). */
hl_tensor *hl_linear_gelu_tanh(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b);

#endif
