/* Gradient checks of ops/residual.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

/* Both outputs of the fused residual junction reach the checked tensor. */
static hl_tensor *build_add_layernorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_tensor *sum;
    hl_tensor *y = hl_add_layernorm(g, in[0], in[1], in[2], in[3], LN_EPS, &sum);
    return hl_add(g, y, hl_scale(g, sum, (hl_real)0.7));
}

static hl_tensor *build_add_rmsnorm(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_tensor *sum;
    hl_tensor *y = hl_add_rmsnorm(g, in[0], in[1], in[2], LN_EPS, &sum);
    return hl_add(g, y, hl_scale(g, sum, (hl_real)0.7));
}

HL_GRADCHECK_CASES(residual) = {
    {.name = "add_layernorm", .fn = build_add_layernorm, .n_inputs = 4,
     .in = {IN_RANGE("a", 2, -2, 2, 3, 17), IN_RANGE("b", 2, -2, 2, 3, 17),
            IN_RANGE("gamma", 1, 0.5, 1.5, 17), IN("beta", 1, 17)}},
    {.name = "add_rmsnorm", .fn = build_add_rmsnorm, .n_inputs = 3,
     .in = {IN_RANGE("a", 2, -2, 2, 3, 17), IN_RANGE("b", 2, -2, 2, 3, 17),
            IN_RANGE("gamma", 1, 0.5, 1.5, 17)}},
    {0},
};
