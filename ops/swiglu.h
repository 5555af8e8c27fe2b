/*
 * swiglu.h: SwiGLU's gate (ops/swiglu.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *h = hl_swiglu(g, hl_linear(g, x, w13, NULL)); // (...,2F) -> (...,F)
 */
#ifndef HL_OPS_SWIGLU_H
#define HL_OPS_SWIGLU_H

#include "core/graph.h"

/* SwiGLU's gate (Shazeer 2020): x (...,2F) -> (...,F), silu(x[..., :F]) ·
 * x[..., F:], silu(a) = a·σ(a). With x = linear(h, [W1; W3]) this is Llama's
 * silu(W1·h) ⊙ (W3·h). */
hl_tensor *hl_swiglu(hl_graph *g, hl_tensor *x);

#endif
