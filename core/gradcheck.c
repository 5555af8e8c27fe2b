#include "core/gradcheck.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

hl_gradcheck_opts hl_gradcheck_defaults(void)
{
#ifdef HL_REAL_DOUBLE
    return (hl_gradcheck_opts){.eps = 1e-6, .atol = 1e-5, .rtol = 1e-3, .seed = 1234};
#else
    return (hl_gradcheck_opts){.eps = 1e-3, .atol = 1e-3, .rtol = 1e-2, .seed = 1234};
#endif
}

/* One evaluation of L = Σ w·y from a fresh graph, in double. */
static hl_status evaluate(hl_graph *g, hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                          const hl_rng *rng_start, const double *w, size_t n_out, double *loss)
{
    hl_graph_reset(g);
    g->rng = *rng_start;
    hl_tensor *y = fn(g, inputs, ctx);
    if (hl_graph_failed(g))
        return hl_graph_status(g);
    if (hl_tensor_is_poison(y) || y->numel != n_out)
        return hl_error_set(&g->error, HL_ERR_STATE,
                            "gradcheck: the function's output changed shape between calls");
    double sum = 0;
    for (size_t i = 0; i < n_out; i++)
        sum += w[i] * (double)y->data[i];
    *loss = sum;
    return HL_OK;
}

static void compare(hl_gradcheck_input_report *r, size_t i, double analytic, double numeric,
                    const hl_gradcheck_opts *o, double *worst_excess)
{
    double abs_err = fabs(analytic - numeric);
    double scale = fmax(fabs(analytic), fabs(numeric));
    double rel_err = scale > 0 ? abs_err / scale : 0;
    double excess = abs_err - (o->atol + o->rtol * fabs(numeric));
    if (abs_err > r->max_abs_err)
        r->max_abs_err = abs_err;
    if (rel_err > r->max_rel_err)
        r->max_rel_err = rel_err;
    if (!(excess <= 0))
        r->passed = false;
    if (i == 0 || excess > *worst_excess || isnan(excess)) {
        *worst_excess = excess;
        r->worst_index = i;
        r->worst_analytic = analytic;
        r->worst_numeric = numeric;
    }
}

/* Central differences for every element of input x; analytic holds dL/dx. */
static hl_status check_input(hl_graph *g, hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                             hl_tensor *x, const hl_real *analytic, const hl_rng *rng_start,
                             const double *w, size_t n_out, const hl_gradcheck_opts *o,
                             hl_gradcheck_input_report *r)
{
    double worst_excess = 0;
    r->passed = true;
    for (size_t i = 0; i < x->numel; i++) {
        hl_real v = x->data[i];
        /* The steps actually taken, after rounding to hl_real. */
        hl_real up = (hl_real)(v + o->eps), down = (hl_real)(v - o->eps);
        double f_up = 0, f_down = 0;
        x->data[i] = up;
        hl_status s = evaluate(g, fn, ctx, inputs, rng_start, w, n_out, &f_up);
        x->data[i] = down;
        if (s == HL_OK)
            s = evaluate(g, fn, ctx, inputs, rng_start, w, n_out, &f_down);
        x->data[i] = v;
        if (s != HL_OK)
            return s;
        double numeric = (f_up - f_down) / ((double)up - (double)down);
        compare(r, i, (double)analytic[i], numeric, o, &worst_excess);
    }
    return HL_OK;
}

hl_status hl_gradcheck(hl_graph *g, hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                       int n_inputs, const hl_gradcheck_opts *opts, hl_gradcheck_report *report)
{
    hl_gradcheck_opts o = opts ? *opts : hl_gradcheck_defaults();
    memset(report, 0, sizeof *report);
    hl_graph_reset(g);
    if (!fn || !inputs || n_inputs < 1 || n_inputs > HL_GRADCHECK_MAX_INPUTS || !(o.eps > 0))
        return hl_error_set(&g->error, HL_ERR_ARG,
                            "gradcheck: needs a function, 1 to %d inputs and eps > 0",
                            HL_GRADCHECK_MAX_INPUTS);
    for (int k = 0; k < n_inputs; k++)
        if (!inputs[k])
            return hl_error_set(&g->error, HL_ERR_ARG, "gradcheck: input %d is NULL", k);

    const hl_rng rng_start = g->rng;
    bool grad_was = hl_graph_set_grad_enabled(g, true);
    hl_tensor *y = fn(g, inputs, ctx);
    hl_status status = hl_graph_status(g);
    if (status == HL_OK && (hl_tensor_is_poison(y) || !y->requires_grad))
        status = hl_error_set(&g->error, HL_ERR_ARG,
                              "gradcheck: the output does not depend on any input requiring grad");
    size_t n_out = status == HL_OK ? y->numel : 0;
    double *w = malloc((n_out ? n_out : 1) * sizeof *w);
    hl_real *grad_out = malloc((n_out ? n_out : 1) * sizeof *grad_out);
    hl_real *analytic[HL_GRADCHECK_MAX_INPUTS] = {0};
    if (status == HL_OK && (!w || !grad_out))
        status = hl_error_set(&g->error, HL_ERR_NOMEM, "gradcheck: out of memory");

    if (status == HL_OK) {
        hl_rng wrng;
        hl_rng_seed(&wrng, o.seed);
        for (size_t i = 0; i < n_out; i++) {
            grad_out[i] = (hl_real)(2.0 * hl_rng_uniform(&wrng) - 1.0);
            w[i] = (double)grad_out[i];
        }
        for (int k = 0; k < n_inputs; k++)
            hl_tensor_zero_grad(inputs[k]);
        status = hl_graph_backward_from(g, y, grad_out);
    }
    /* Keep the analytic gradients: the evaluations below reset the graph. */
    for (int k = 0; k < n_inputs && status == HL_OK; k++) {
        if (!inputs[k]->requires_grad || !inputs[k]->grad)
            continue;
        analytic[k] = malloc(inputs[k]->numel * sizeof(hl_real));
        if (!analytic[k])
            status = hl_error_set(&g->error, HL_ERR_NOMEM, "gradcheck: out of memory");
        else
            memcpy(analytic[k], inputs[k]->grad, inputs[k]->numel * sizeof(hl_real));
    }

    hl_graph_set_grad_enabled(g, false);
    report->n_inputs = n_inputs;
    report->passed = status == HL_OK;
    for (int k = 0; k < n_inputs && status == HL_OK; k++) {
        hl_gradcheck_input_report *r = &report->inputs[k];
        snprintf(r->name, sizeof r->name, "%s", inputs[k]->name);
        hl_shape_str(inputs[k], r->shape);
        if (!analytic[k])
            continue;
        r->checked = true;
        status = check_input(g, fn, ctx, inputs, inputs[k], analytic[k], &rng_start, w, n_out,
                             &o, r);
        report->passed &= r->passed;
    }
    if (status != HL_OK)
        report->passed = false;

    hl_graph_set_grad_enabled(g, grad_was);
    for (int k = 0; k < n_inputs; k++) {
        if (analytic[k] && inputs[k]->grad)
            memcpy(inputs[k]->grad, analytic[k], inputs[k]->numel * sizeof(hl_real));
        free(analytic[k]);
    }
    free(w);
    free(grad_out);
    if (status == HL_OK)
        hl_graph_reset(g);
    return status;
}
