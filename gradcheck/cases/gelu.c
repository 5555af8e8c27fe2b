/* Gradient checks of ops/gelu.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_gelu(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_gelu(g, in[0]);
}

static hl_tensor *build_gelu_tanh(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_gelu_tanh(g, in[0]);
}

HL_GRADCHECK_CASES(gelu) = {
    {.name = "gelu", .fn = build_gelu, .n_inputs = 1, .in = {IN_RANGE("x", 3, -3, 3, 3, 1, 17)}},
    {.name = "gelu_tanh", .fn = build_gelu_tanh, .n_inputs = 1,
     .in = {IN_RANGE("x", 3, -3, 3, 3, 1, 17)}},
    {0},
};
