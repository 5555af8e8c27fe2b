/* Gradient checks of ops/matmul.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_matmul(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_matmul(g, in[0], in[1], ((case_data *)ctx)->flags);
}

HL_GRADCHECK_CASES(matmul) = {
    {.name = "matmul", .fn = build_matmul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 3, 17), IN("b", 3, 2, 17, 5)}},
    {.name = "matmul_ta", .fn = build_matmul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 17, 3), IN("b", 3, 2, 17, 5)}, .flags = HL_TRANS_A},
    {.name = "matmul_tb", .fn = build_matmul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 3, 17), IN("b", 3, 2, 5, 17)}, .flags = HL_TRANS_B},
    {.name = "matmul_tab", .fn = build_matmul, .n_inputs = 2,
     .in = {IN("a", 3, 2, 17, 3), IN("b", 3, 2, 5, 17)}, .flags = HL_TRANS_A | HL_TRANS_B},
    {0},
};
