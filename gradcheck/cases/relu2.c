/* Gradient checks of ops/relu2.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_relu2(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_relu2(g, in[0]);
}

/* Every other input negated: |x| stays away from ReLU²'s kink at 0, where a
 * central difference would straddle it. */
static hl_status setup_relu2(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)d, (void)rng, (void)err;
    for (size_t i = 0; i < c->inputs[0]->numel; i += 2)
        c->inputs[0]->data[i] = -c->inputs[0]->data[i];
    return HL_OK;
}

HL_GRADCHECK_CASES(relu2) = {
    {.name = "relu2", .fn = build_relu2, .n_inputs = 1,
     .in = {IN_RANGE("x", 3, 0.2, 3, 3, 1, 17)}, .setup = setup_relu2},
    {0},
};
