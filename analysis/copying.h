/*
 * copying.h: how much each head copies, measured on its weights as Olsson et
 * al. (2022) do: the full OV circuit C = W_U·W_O·W_V·W_E over the tokens that
 * are both inputs and outputs, and copying = Σλ/Σ|λ| over its eigenvalues λ
 * (in [-1, 1]; 1 when every eigenvalue is positive: attending to a token
 * raises that token's logit). C's nonzero eigenvalues are those of the
 * (d_head,d_head) matrix (W_V·W_Eᵀ)(W_U·W_O). The weights are those of
 * hl_head_weights_get (LayerNorm gains folded), W_U times the final LayerNorm
 * gain and centred over the vocabulary (logits are shift invariant).
 *
 *     double copying[L * n_heads];                       // row stride cfg.n_heads
 *     hl_heads_copying(m, copying, &err);
 */
#ifndef HL_COPYING_H
#define HL_COPYING_H

#include "core/error.h"
#include "models/gpt.h"

/* Every head's copying score: cfg.n_layers * cfg.n_heads entries, row stride
 * cfg.n_heads; entries past a pruned layer's heads are NaN, and so are those
 * of heads whose eigenvalues cannot be found (non-finite weights, a QR
 * iteration that does not converge). Fails only for want of memory or on a
 * model it cannot read. */
hl_status hl_heads_copying(const hl_gpt *m, double *out, hl_error *err);

#endif
