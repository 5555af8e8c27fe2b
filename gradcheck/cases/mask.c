/* Gradient checks of ops/mask.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

static hl_tensor *build_causal(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_softmax(g, hl_mask_causal(g, in[0]));
}

static hl_tensor *build_key_padding(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_softmax(g, hl_mask_key_padding(g, in[0], ((case_data *)ctx)->mask));
}

static hl_tensor *build_blocked(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_softmax(g, hl_mask_blocked(g, in[0], ((case_data *)ctx)->mask));
}

static hl_tensor *build_additive(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_softmax(g, hl_mask_additive(g, in[0], ((case_data *)ctx)->mask));
}

/* Causal and documents, d->mask the document ids. */
static hl_tensor *build_documents(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_softmax(g, hl_mask_documents(g, hl_mask_causal(g, in[0]), ((case_data *)ctx)->mask));
}

/* is_padding (2,7): batch 0 hides key 6, batch 1 keys 2 and 5. */
static hl_status setup_key_padding(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c;
    hl_tensor *m = hl_gradcheck_new_tensor(d, "key_is_padding", 2, (int[]){2, 7}, false, rng, 0, 0, err);
    if (!m)
        return err->status;
    m->data[6] = m->data[7 + 2] = m->data[7 + 5] = 1;
    d->mask = m;
    return HL_OK;
}

/* is_blocked (5,7): about a third blocked, never a whole row. */
static hl_status setup_blocked(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c;
    hl_tensor *m = hl_gradcheck_new_tensor(d, "is_blocked", 2, (int[]){5, 7}, false, rng, 0, 0, err);
    if (!m)
        return err->status;
    for (int t = 0; t < 5; t++)
        for (int s = 0; s < 7; s++)
            m->data[t * 7 + s] = (t + 2 * s) % 3 == 0;
    d->mask = m;
    return HL_OK;
}

/* bias (5,7): U(-1,1), with -inf where s > t + 3. */
static hl_status setup_additive(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err)
{
    (void)c;
    hl_tensor *m = hl_gradcheck_new_tensor(d, "bias", 2, (int[]){5, 7}, false, rng, -1, 1, err);
    if (!m)
        return err->status;
    for (int t = 0; t < 5; t++)
        for (int s = t + 4; s < 7; s++)
            m->data[t * 7 + s] = -INFINITY;
    d->mask = m;
    return HL_OK;
}

HL_GRADCHECK_CASES(mask) = {
    {.name = "mask_causal+softmax", .fn = build_causal, .n_inputs = 1,
     .in = {IN_RANGE("scores", 4, -2, 2, 2, 3, 5, 7)}},
    {.name = "mask_key_padding+softmax", .fn = build_key_padding, .n_inputs = 1,
     .in = {IN_RANGE("scores", 4, -2, 2, 2, 3, 5, 7)}, .setup = setup_key_padding},
    {.name = "mask_blocked+softmax", .fn = build_blocked, .n_inputs = 1,
     .in = {IN_RANGE("scores", 3, -2, 2, 3, 5, 7)}, .setup = setup_blocked},
    {.name = "mask_additive+softmax", .fn = build_additive, .n_inputs = 1,
     .in = {IN_RANGE("scores", 4, -2, 2, 2, 1, 5, 7)}, .setup = setup_additive},
    {.name = "mask_documents+softmax", .fn = build_documents, .n_inputs = 1,
     .in = {IN_RANGE("scores", 4, -2, 2, 2, 3, 5, 7)}, .setup = hl_gradcheck_setup_documents},
    {0},
};
