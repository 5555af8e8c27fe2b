/* Gradient checks of ops/attention.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

/* Causal, with d->mask as key padding, scale 0.6. */
static hl_tensor *build_attention(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    hl_attention_masks m = {.causal = true, .key_padding = ((case_data *)ctx)->mask};
    return hl_attention(g, in[0], in[1], in[2], (hl_real)0.6, &m);
}

/* key_is_padding (2,7) for attention: batch 0 hides keys 1 and 6, batch 1
 * every key (its queries see nothing: zero output, zero gradient). */
static hl_status setup_attention(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c;
    hl_tensor *m = hl_gradcheck_new_tensor(d, "key_is_padding", 2, (int[]){2, 7}, false, rng, 0, 0, err);
    if (!m)
        return err->status;
    m->data[1] = m->data[6] = 1;
    for (int s = 7; s < 14; s++)
        m->data[s] = 1;
    d->mask = m;
    return HL_OK;
}

HL_GRADCHECK_CASES(attention) = {
    {.name = "attention", .fn = build_attention, .n_inputs = 3,
     .in = {IN("q", 4, 2, 2, 5, 3), IN("k", 4, 2, 2, 7, 3), IN("v", 4, 2, 2, 7, 3)},
     .setup = setup_attention},
    {0},
};
