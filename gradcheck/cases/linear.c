/* Gradient checks of ops/linear.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_linear(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear(g, in[0], in[1], in[2]);
}

static hl_tensor *build_linear_gelu(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear_gelu(g, in[0], in[1], in[2]);
}

static hl_tensor *build_linear_gelu_tanh(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_linear_gelu_tanh(g, in[0], in[1], in[2]);
}

HL_GRADCHECK_CASES(linear) = {
    {.name = "linear", .fn = build_linear, .n_inputs = 3,
     .in = {IN("x", 3, 3, 1, 17), IN("w", 2, 5, 17), IN("b", 1, 5)}},
    {.name = "linear_gelu", .fn = build_linear_gelu, .n_inputs = 3,
     .in = {IN("x", 3, 3, 1, 17), IN("w", 2, 5, 17), IN("b", 1, 5)}},
    {.name = "linear_gelu_tanh", .fn = build_linear_gelu_tanh, .n_inputs = 3,
     .in = {IN("x", 3, 3, 1, 17), IN("w", 2, 5, 17), IN("b", 1, 5)}},
    {0},
};
