/*
 * params.h: the persistent parameter block.
 *
 * A model declares its parameters (name and shape) and then commits: all
 * values live in one allocation and all gradients in another, so zero-grad is
 * one pass (in parallel slices) and an optimizer is one loop over
 * hl_params_count() values.
 * Tensors handed out by hl_params_add() keep their address for the block's
 * life; their data and grad pointers are set at commit.
 *
 *     hl_params *p = hl_params_new();
 *     hl_tensor *w = hl_params_add(p, "fc.weight", 2, (int[]){64, 32});
 *     hl_tensor *b = hl_params_add(p, "fc.bias", 1, (int[]){64});
 *     if (hl_params_commit(p) != HL_OK) { ...hl_params_error(p)->message... }
 *     hl_params_zero_grad(p);
 *     hl_params_free(p);
 */
#ifndef HL_PARAMS_H
#define HL_PARAMS_H

#include <stddef.h>

#include "core/error.h"
#include "core/tensor.h"

typedef struct hl_params hl_params;

hl_params *hl_params_new(void);
void hl_params_free(hl_params *p);

/* Declares a parameter (requires_grad). NULL, with the reason recorded, on a
 * bad or duplicate name, a bad shape, or a call after commit. */
hl_tensor *hl_params_add(hl_params *p, const char *name, int rank, const int *shape);
/* Allocates the value and gradient blocks (values zeroed). */
hl_status hl_params_commit(hl_params *p);

const hl_error *hl_params_error(const hl_params *p);
size_t hl_params_n_tensors(const hl_params *p);
hl_tensor *hl_params_tensor(const hl_params *p, size_t i);
hl_tensor *hl_params_find(const hl_params *p, const char *name);
/* Length of the value and gradient blocks: every tensor's values, each
 * tensor padded to a 64-byte boundary (the padding stays 0). Optimizers and
 * all-reduces run over this many. */
size_t hl_params_count(const hl_params *p);
/* The number of parameters proper: the sum of the tensors' sizes. */
size_t hl_params_n_values(const hl_params *p);
hl_real *hl_params_values(const hl_params *p);
hl_real *hl_params_grads(const hl_params *p);

void hl_params_zero_grad(hl_params *p);

#endif
