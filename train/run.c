/* The training loop of every program: see run.h. */
#include "train/run.h"

#include <math.h>

#include "train/dist.h"
#include "train/progress.h"

static bool evaluates_at(const hl_run_opts *o, const hl_run_hooks *h, int64_t step)
{
    if (step == o->start && o->start > 0)
        return false;
    return step % o->eval_every == 0 || step == o->steps || (h->evaluate_at && h->evaluate_at(step));
}

hl_status hl_run_train(hl_graph *g, hl_params *params, hl_optim *opt, const hl_run_opts *o,
                       const hl_run_hooks *h, hl_error *err)
{
    if (o->eval_every < 1 || o->start < 0 || o->start > o->steps)
        return hl_error_set(err, HL_ERR_ARG, "run: steps %lld..%lld evaluated every %lld",
                            (long long)o->start, (long long)o->steps, (long long)o->eval_every);
    hl_progress progress;
    const bool show = o->lead && o->progress;
    if (show) {
        hl_progress_begin(&progress, o->progress, o->steps, o->eval_every);
        progress.first = o->start; /* steps a second, ETA: of this run's steps */
    }
    hl_step_result last = {.loss = NAN, .grad_norm = 0};
    hl_status s = HL_OK;
    for (int64_t step = o->start; s == HL_OK && step <= o->steps; step++) {
        if (evaluates_at(o, h, step)) {
            if (h->gather)
                h->gather(h->ctx);
            if (show && progress.tty && o->record_prints)
                fputc('\n', o->progress);
            if (o->lead && (s = h->record(h->ctx, step, &last, err)) != HL_OK)
                break;
        }
        if (step == o->steps)
            break;
        if ((s = h->batch(h->ctx, step, err)) != HL_OK)
            break;
        const hl_step one = {.index = step, .lr_scale = hl_lr_scale(&o->schedule, step),
                             .clip = o->clip, .tuner = o->tuner};
        s = hl_train_step(g, params, opt, &one, h->loss, h->ctx, &last, err);
        if (s == HL_OK && o->check_sync)
            s = hl_dist_check_params_equal(params, err);
        if (s == HL_OK && show)
            hl_progress_update(&progress, step + 1, last.loss, -1);
    }
    if (show)
        hl_progress_end(&progress);
    return s;
}
