/* Gradient checks of ops/softmax.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_softmax(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_softmax(g, in[0]);
}

HL_GRADCHECK_CASES(softmax) = {
    {.name = "softmax", .fn = build_softmax, .n_inputs = 1,
     .in = {IN_RANGE("x", 3, -3, 3, 3, 1, 17)}},
    {0},
};
