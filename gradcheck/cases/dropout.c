/* Gradient checks of ops/dropout.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_dropout(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_dropout(g, in[0], ((case_data *)ctx)->p);
}

HL_GRADCHECK_CASES(dropout) = {
    {.name = "dropout", .fn = build_dropout, .n_inputs = 1, .in = {IN("x", 3, 3, 1, 17)},
     .p = 0.4},
    {0},
};
