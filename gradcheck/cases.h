/*
 * cases.h: a catalogue of gradient checks, one per op, two for the
 * attention module and one for a small GPT, each with inputs of odd shapes
 * (1, 3, 5, 7, 17: no tile size divides them) drawn from fixed seeds, away
 * from kinks. build/gradcheck runs them; so can a test.
 *
 * Each case is written in the file of gradcheck/cases/ named after its op's
 * file (gradcheck/case.h says how); its own folder sits on top of ops/ and
 * the models, since a check of everything has to know everything.
 *
 * The cases, by name:
 *   linear; matmul, matmul_ta, matmul_tb, matmul_tab (HL_TRANS_A/B flags);
 *   reshape, permute, narrow; scale, add, mul (b broadcast), sum, mean;
 *   softmax; mask_causal+softmax, mask_key_padding+softmax,
 *   mask_blocked+softmax, mask_additive+softmax (a mask puts -inf into the
 *   scores and a loss holding -inf has no finite differences, so each mask
 *   is checked through a softmax); attention (the fused op: q (2,2,5,3),
 *   k and v (2,2,7,3), causal, key padding hiding a whole batch element);
 *   embedding (repeated ids), layernorm, gelu,
 *   dropout (p 0.4, the same mask in every evaluation), cross_entropy (with
 *   ignored rows);
 *   mha_self_causal (self-attention, causal, gates away from 1),
 *   mha_cross_padding (kdim 3, vdim 5 != E 4, S != T, key padding);
 *   gpt (2 layers, MLP and LayerNorm, loss = cross-entropy; 8 of its
 *   parameters, one of each kind).
 *
 *     hl_gradcheck_case c;
 *     if (hl_gradcheck_case_make(hl_gradcheck_case_find("gelu"), &c, &err) == HL_OK) {
 *         hl_gradcheck(g, c.fn, c.ctx, c.inputs, c.n_inputs, NULL, &report);
 *         hl_gradcheck_case_free(&c);
 *     }
 */
#ifndef HL_GRADCHECK_CASES_H
#define HL_GRADCHECK_CASES_H

#include "core/error.h"
#include "core/gradcheck.h"

typedef struct hl_gradcheck_case_data hl_gradcheck_case_data;

/* One check, ready for hl_gradcheck or hl_gradcheck_sweep. */
typedef struct hl_gradcheck_case {
    const char *name;       /* e.g. "layernorm", "mask_causal+softmax" */
    hl_gradcheck_fn fn;     /* builds the output from inputs */
    void *ctx;              /* fn's context: the case's own data */
    hl_tensor *inputs[HL_GRADCHECK_MAX_INPUTS]; /* every one requires grad */
    int n_inputs;
    hl_gradcheck_case_data *data; /* what the case owns (tensors, masks, modules) */
} hl_gradcheck_case;

int hl_gradcheck_case_count(void);
/* The name of case i, or NULL when i is out of range. */
const char *hl_gradcheck_case_name(int i);
/* The index of the case called name, or -1. */
int hl_gradcheck_case_find(const char *name);

/* Allocates case i's inputs and whatever its function needs, filled from
 * fixed seeds (the same numbers every time). HL_OK, or an error in err (an
 * index out of range, out of memory); on error c holds nothing to free. */
hl_status hl_gradcheck_case_make(int i, hl_gradcheck_case *c, hl_error *err);
/* Frees what hl_gradcheck_case_make allocated; c may be zeroed. */
void hl_gradcheck_case_free(hl_gradcheck_case *c);

#endif
