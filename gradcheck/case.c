/* What the gradient checks share: see gradcheck/case.h. */
#include "gradcheck/case.h"

/* A heap tensor owned by d, uniform in [lo, hi). */
hl_tensor *hl_gradcheck_new_tensor(case_data *d, const char *name, int rank, const int *shape,
                                   bool requires_grad, hl_rng *rng, double lo, double hi,
                                   hl_error *err)
{
    if (d->n_owned == MAX_OWNED) {
        hl_error_set(err, HL_ERR_STATE, "gradcheck cases: too many tensors");
        return NULL;
    }
    hl_tensor *t = hl_tensor_new_checked(name, rank, shape, requires_grad, err);
    if (t) {
        hl_init_uniform(t, rng, lo, hi);
        d->owned[d->n_owned++] = t;
    }
    return t;
}

/* doc_ids (2,7): batch 0 three documents (0,0,1,1,1,2,2), batch 1 two. */
hl_status hl_gradcheck_setup_documents(case_data *d, hl_gradcheck_case *c, hl_rng *rng,
                                       hl_error *err)
{
    (void)c;
    hl_tensor *m = hl_gradcheck_new_tensor(d, "doc_ids", 2, (int[]){2, 7}, false, rng, 0, 0, err);
    if (!m)
        return err->status;
    static const int ids[14] = {0, 0, 1, 1, 1, 2, 2, 4, 4, 4, 7, 7, 7, 7};
    for (int i = 0; i < 14; i++)
        m->data[i] = (hl_real)ids[i];
    d->mask = m;
    return HL_OK;
}
