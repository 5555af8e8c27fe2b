/* Gradient checks of ops/embedding.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_embedding(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_embedding(g, in[0], ((case_data *)ctx)->ids, 2, (int[]){3, 7});
}

/* 21 ids in [0,17), id 0 three times. */
static hl_status setup_embedding(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c, (void)err;
    for (int i = 0; i < 21; i++)
        d->ids[i] = (int32_t)hl_rng_below(rng, 17);
    d->ids[0] = d->ids[5] = d->ids[20] = 0;
    return HL_OK;
}

HL_GRADCHECK_CASES(embedding) = {
    {.name = "embedding", .fn = build_embedding, .n_inputs = 1, .in = {IN("weight", 2, 17, 3)},
     .setup = setup_embedding},
    {0},
};
