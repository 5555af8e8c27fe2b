/* Gradient checks of ops/reduce.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_sum(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_sum(g, in[0]);
}

static hl_tensor *build_mean(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_mean(g, in[0]);
}

HL_GRADCHECK_CASES(reduce) = {
    {.name = "sum", .fn = build_sum, .n_inputs = 1, .in = {IN("x", 3, 3, 1, 17)}},
    {.name = "mean", .fn = build_mean, .n_inputs = 1, .in = {IN("x", 3, 3, 1, 17)}},
    {0},
};
