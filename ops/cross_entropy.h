/*
 * cross_entropy.h: the cross-entropy loss, plain and of soft-capped logits
 * (ops/cross_entropy.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *loss = hl_cross_entropy(g, logits, targets, -1); // (...,V) -> (1)
 */
#ifndef HL_OPS_CROSS_ENTROPY_H
#define HL_OPS_CROSS_ENTROPY_H

#include <stdint.h>

#include "core/graph.h"

/* Mean cross-entropy of logits (...,V) against targets (one per row, numel/V
 * of them) over the rows whose target is not ignore_index -> (1). With every
 * row ignored the loss is 0 and the gradient zero. */
hl_tensor *hl_cross_entropy(hl_graph *g, hl_tensor *logits, const int32_t *targets,
                            int32_t ignore_index);
/* hl_cross_entropy of the soft-capped logits cap·tanh(logits/cap) (Gemma 2's
 * final_logit_softcapping, modded-nanogpt's 15·tanh(z/15)), cap > 0, as one
 * op: the capped logits are never stored (each row is capped into per-thread
 * scratch, and backward recomputes them), and backward takes the gradient
 * through the softmax and the cap in one pass over each row. */
hl_tensor *hl_cross_entropy_softcap(hl_graph *g, hl_tensor *logits, const int32_t *targets,
                                    int32_t ignore_index, hl_real cap);

#endif
