/* One training step: see step.h. */
#include "train/step.h"

#include <math.h>
#include <time.h>

#include "train/dist.h"

/* Names the first op whose output went non-finite, when the loss did. */
static hl_status not_finite(const hl_graph *g, const hl_step *step, double loss, double norm,
                            hl_error *err)
{
    if (isfinite(loss))
        return hl_error_set(err, HL_ERR_NUMERIC,
                            "step %lld: the gradient norm is %g (loss %g): a gradient is not "
                            "finite",
                            (long long)step->index, norm, loss);
    const hl_node *bad = hl_graph_first_nonfinite(g);
    return hl_error_set(err, HL_ERR_NUMERIC,
                        "step %lld: the loss is %g; the first op whose output is not finite is "
                        "%s",
                        (long long)step->index, loss,
                        bad ? hl_node_name(bad) : "(none: the inputs or weights)");
}

hl_status hl_train_step(hl_graph *g, hl_params *params, hl_optim *opt, const hl_step *step,
                        hl_loss_fn loss_fn, void *ctx, hl_step_result *out, hl_error *err)
{
    struct timespec t0, t1;
    if (step->tuner) {
        hl_thread_tuner_begin(step->tuner);
        clock_gettime(CLOCK_MONOTONIC, &t0);
    }
    hl_params_zero_grad(params);
    hl_tensor *loss = loss_fn(g, ctx);
    hl_status s = HL_OK;
    if (hl_graph_backward(g, loss) != HL_OK)
        s = hl_error_set(err, hl_graph_status(g), "step %lld: %s", (long long)step->index,
                         hl_graph_message(g));
    /* Every rank takes part in the collectives below, failed or not, so that
     * all of them reach the same verdict instead of waiting for each other. */
    double local = s == HL_OK ? (double)loss->data[0] : NAN;
    hl_dist_allreduce_grads(params);
    double total = hl_dist_sum(local);
    double norm = hl_grad_norm(params);
    if (s == HL_OK && (!isfinite(total) || !isfinite(norm)))
        s = not_finite(g, step, total, norm, err);
    if (s == HL_OK) /* clipping inside the update's pass */
        hl_optim_step_scaled(opt, step->lr_scale, hl_clip_scale(norm, step->clip));
    hl_graph_reset(g);
    *out = (hl_step_result){total, norm};
    if (step->tuner) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        hl_thread_tuner_end(step->tuner,
                            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    }
    return s;
}
