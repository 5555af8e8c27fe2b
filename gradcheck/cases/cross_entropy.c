/* Gradient checks of ops/cross_entropy.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_cross_entropy(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_cross_entropy(g, in[0], ((case_data *)ctx)->targets, -1);
}

/* The cap in d->p. */
static hl_tensor *build_cross_entropy_softcap(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const case_data *d = ctx;
    return hl_cross_entropy_softcap(g, in[0], d->targets, -1, d->p);
}

/* Targets for logits (2,17,5), every fourth row ignored. */
static hl_status setup_cross_entropy(case_data *d, hl_gradcheck_case *c, hl_rng *rng,
                                     hl_error *err)
{
    (void)c, (void)err;
    for (int i = 0; i < 34; i++)
        d->targets[i] = i % 4 == 3 ? -1 : (int32_t)hl_rng_below(rng, 5);
    return HL_OK;
}

HL_GRADCHECK_CASES(cross_entropy) = {
    {.name = "cross_entropy", .fn = build_cross_entropy, .n_inputs = 1,
     .in = {IN_RANGE("logits", 3, -2, 2, 2, 17, 5)}, .setup = setup_cross_entropy},
    {.name = "cross_entropy_softcap", .fn = build_cross_entropy_softcap, .n_inputs = 1,
     .in = {IN_RANGE("logits", 3, -4, 4, 2, 17, 5)}, .setup = setup_cross_entropy, .p = 3},
    {0},
};
