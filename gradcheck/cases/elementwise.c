/* Gradient checks of ops/elementwise.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_scale(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_scale(g, in[0], ((case_data *)ctx)->p);
}

static hl_tensor *build_add(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_add(g, in[0], in[1]);
}

static hl_tensor *build_mul(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_mul(g, in[0], in[1]);
}

HL_GRADCHECK_CASES(elementwise) = {
    {.name = "scale", .fn = build_scale, .n_inputs = 1, .in = {IN("x", 3, 3, 1, 17)}, .p = -0.37},
    {.name = "add", .fn = build_add, .n_inputs = 2, .in = {IN("a", 3, 2, 3, 17), IN("b", 1, 17)}},
    {.name = "mul", .fn = build_mul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 3, 17), IN_RANGE("b", 2, 0.5, 1.5, 3, 1)}},
    {0},
};
