/* Gradient checks of ops/shape.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_reshape(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_reshape(g, in[0], 2, (int[]){3, -1});
}

static hl_tensor *build_permute(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_permute(g, in[0], (int[]){1, 3, 0, 2});
}

static hl_tensor *build_narrow(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_narrow(g, in[0], 1, 1, 3);
}

HL_GRADCHECK_CASES(shape) = {
    {.name = "reshape", .fn = build_reshape, .n_inputs = 1, .in = {IN("x", 3, 2, 3, 17)}},
    {.name = "permute", .fn = build_permute, .n_inputs = 1, .in = {IN("x", 4, 3, 1, 17, 2)}},
    {.name = "narrow", .fn = build_narrow, .n_inputs = 1, .in = {IN("x", 3, 2, 5, 17)}},
    {0},
};
