/*
 * gradcheck.h: checking analytic gradients against central finite differences.
 *
 * fn builds a graph from the inputs and returns one output tensor y. The check
 * reduces y to L = Σ w_i y_i with fixed random weights w (a plain sum would
 * hide errors: the sum of a softmax is constant), gets dL/dx from backward,
 * then perturbs every element of every input that requires grad by ±eps and
 * compares (L(x+h) - L(x-h)) / 2h with it. An element passes when
 * |analytic - numeric| <= atol + rtol·|numeric|, the rule of torch.allclose.
 *
 * The graph's RNG is restored before every evaluation, so ops like dropout see
 * the same mask each time. Inputs are left as they were, with the analytic
 * gradient in their grad buffers.
 *
 *     static hl_tensor *build(hl_graph *g, hl_tensor *const *in, void *ctx)
 *     { return hl_softmax(g, in[0]); }
 *     ...
 *     hl_gradcheck_report r;
 *     hl_gradcheck(g, build, NULL, &x, 1, NULL, &r);   // NULL: default options
 *     printf("%s max abs %.2e\n", r.passed ? "pass" : "FAIL", r.inputs[0].max_abs_err);
 */
#ifndef HL_GRADCHECK_H
#define HL_GRADCHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"

#define HL_GRADCHECK_MAX_INPUTS 8

typedef hl_tensor *(*hl_gradcheck_fn)(hl_graph *g, hl_tensor *const *inputs, void *ctx);

typedef struct hl_gradcheck_opts {
    double eps;    /* finite-difference step */
    double atol;
    double rtol;
    uint64_t seed; /* for the reduction weights */
} hl_gradcheck_opts;

typedef struct hl_gradcheck_input_report {
    char name[HL_NAME_MAX];
    char shape[HL_SHAPE_STR_MAX];
    bool checked;          /* false when the input does not require grad */
    double max_abs_err;    /* max |analytic - numeric| */
    double max_rel_err;    /* max |analytic - numeric| / max(|analytic|, |numeric|) */
    size_t worst_index;    /* the element furthest outside the tolerance */
    double worst_analytic, worst_numeric;
    bool passed;
} hl_gradcheck_input_report;

typedef struct hl_gradcheck_report {
    int n_inputs;
    hl_gradcheck_input_report inputs[HL_GRADCHECK_MAX_INPUTS];
    bool passed;
} hl_gradcheck_report;

/* PyTorch's defaults in the double build (eps 1e-6, atol 1e-5, rtol 1e-3);
 * in the float build eps 1e-3, atol 1e-3, rtol 1e-2, since float rounding of
 * L(x±h) (~1e-7·|L|) divided by 2h is already ~1e-4. */
hl_gradcheck_opts hl_gradcheck_defaults(void);

/* HL_OK when the check ran (report->passed says whether it passed); an error
 * status, with the message in g, when fn failed or the arguments are bad. */
hl_status hl_gradcheck(hl_graph *g, hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                       int n_inputs, const hl_gradcheck_opts *opts, hl_gradcheck_report *report);

#endif
