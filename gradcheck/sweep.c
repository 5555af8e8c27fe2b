/* A gradient check at several step sizes: see sweep.h. */
#include "gradcheck/sweep.h"

#include <math.h>

/* Elements of the checked inputs for which x+eps and x-eps are the same hl_real. */
static size_t count_lost(hl_tensor *const *inputs, const hl_gradcheck_report *r, double eps)
{
    size_t lost = 0;
    for (int k = 0; k < r->n_inputs; k++) {
        if (!r->inputs[k].checked)
            continue;
        const hl_tensor *x = inputs[k];
        for (size_t i = 0; i < x->numel; i++) {
            double v = (double)x->data[i];
            lost += (hl_real)(v + eps) == (hl_real)(v - eps);
        }
    }
    return lost;
}

hl_status hl_gradcheck_sweep(hl_graph *g, hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                             int n_inputs, const double *eps, int n_eps,
                             const hl_gradcheck_opts *opts, hl_gradcheck_sweep_point *points)
{
    if (!eps || !points || n_eps < 1)
        return hl_error_set(&g->error, HL_ERR_ARG, "gradcheck sweep: needs at least one step "
                            "and room for its result");
    for (int i = 0; i < n_eps; i++)
        if (!(eps[i] > 0) || isinf(eps[i]))
            return hl_error_set(&g->error, HL_ERR_ARG,
                                "gradcheck sweep: step %d is %g, not a finite positive number",
                                i, eps[i]);
    hl_gradcheck_opts o = opts ? *opts : hl_gradcheck_defaults();
    for (int i = 0; i < n_eps; i++) {
        o.eps = eps[i];
        hl_gradcheck_report r;
        hl_status s = hl_gradcheck(g, fn, ctx, inputs, n_inputs, &o, &r);
        if (s != HL_OK)
            return s;
        hl_gradcheck_sweep_point *p = &points[i];
        *p = (hl_gradcheck_sweep_point){.eps = eps[i], .lost = count_lost(inputs, &r, eps[i])};
        /* hl_gradcheck's maxima already skip the NaNs of lost elements. */
        for (int k = 0; k < r.n_inputs; k++) {
            p->max_abs_err = fmax(p->max_abs_err, r.inputs[k].max_abs_err);
            p->max_rel_err = fmax(p->max_rel_err, r.inputs[k].max_rel_err);
        }
    }
    return HL_OK;
}

int hl_gradcheck_sweep_best(const hl_gradcheck_sweep_point *points, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (points[i].lost == 0 && (best < 0 || points[i].max_abs_err < points[best].max_abs_err))
            best = i;
    return best;
}
