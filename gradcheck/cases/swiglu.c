/* Gradient checks of ops/swiglu.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_swiglu(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_swiglu(g, in[0]);
}

HL_GRADCHECK_CASES(swiglu) = {
    {.name = "swiglu", .fn = build_swiglu, .n_inputs = 1,
     .in = {IN_RANGE("x", 3, -3, 3, 3, 1, 34)}},
    {0},
};
