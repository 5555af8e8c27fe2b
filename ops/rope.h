/*
 * rope.h: rotary position embeddings (ops/rope.c). ops/ops.h includes every
 * op header.
 *
 *     hl_tensor *q_rotated = hl_rope(g, q, 10000); // q (B,H,T,D), D even
 */
#ifndef HL_OPS_ROPE_H
#define HL_OPS_ROPE_H

#include "core/graph.h"

/* Rotary position embedding (Su et al. 2021) of x (...,T,D), D even, by the
 * rotate-half convention of GPT-NeoX and Llama: for i < D/2 and position t
 * (the index along dim -2), θ = t·base^(-2i/D) and
 *     y[i]       = x[i]·cos θ - x[i + D/2]·sin θ
 *     y[i + D/2] = x[i + D/2]·cos θ + x[i]·sin θ
 * The angles and their sines and cosines are computed in double, then rounded. */
hl_tensor *hl_rope(hl_graph *g, hl_tensor *x, hl_real base);
/* Partial rotary, as GPT-NeoX and Pythia (rotary_pct < 1): hl_rope over the
 * first rot_dims values of each row of D (rot_dims even, 2..D), with the
 * angles of a rot_dims-wide row, θ = t·base^(-2i/rot_dims) for i <
 * rot_dims/2; the other D - rot_dims values pass unchanged. hl_rope is the
 * case rot_dims = D, with the same bits. */
hl_tensor *hl_rope_partial(hl_graph *g, hl_tensor *x, hl_real base, int rot_dims);

#endif
