/* Gradient checks of ops/smear.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_smear(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_smear(g, in[0], in[1]);
}

static hl_tensor *build_smear_docs(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const case_data *d = ctx;
    return hl_smear_docs(g, in[0], in[1], d->mask);
}

HL_GRADCHECK_CASES(smear) = {
    {.name = "smear", .fn = build_smear, .n_inputs = 2,
     .in = {IN("k", 4, 2, 3, 5, 3), IN_RANGE("alpha", 1, -1.5, 1.5, 3)}},
    {.name = "smear_docs", .fn = build_smear_docs, .n_inputs = 2,
     .in = {IN("k", 4, 2, 3, 7, 3), IN_RANGE("alpha", 1, -1.5, 1.5, 3)},
     .setup = hl_gradcheck_setup_documents},
    {0},
};
