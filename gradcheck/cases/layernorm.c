/* Gradient checks of ops/layernorm.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_layernorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_layernorm(g, in[0], in[1], in[2], LN_EPS);
}

HL_GRADCHECK_CASES(layernorm) = {
    {.name = "layernorm", .fn = build_layernorm, .n_inputs = 3,
     .in = {IN_RANGE("x", 2, -2, 2, 3, 17), IN_RANGE("gamma", 1, 0.5, 1.5, 17),
            IN("beta", 1, 17)}},
    {0},
};
