/* Gradient checks of ops/rmsnorm.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_rmsnorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_rmsnorm(g, in[0], in[1], LN_EPS);
}

HL_GRADCHECK_CASES(rmsnorm) = {
    {.name = "rmsnorm", .fn = build_rmsnorm, .n_inputs = 2,
     .in = {IN_RANGE("x", 2, -2, 2, 3, 17), IN_RANGE("gamma", 1, 0.5, 1.5, 17)}},
    {0},
};
