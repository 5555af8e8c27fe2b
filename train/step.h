/*
 * step.h: one training step, the same for every program: zero the gradients,
 * build the loss, backward, sum the gradients over MPI ranks, clip, check
 * that the loss and gradients are finite, and update.
 *
 *     static hl_tensor *loss_of(hl_graph *g, void *ctx)       // this rank's loss
 *     {
 *         my_batch *b = ctx;
 *         return hl_cross_entropy(g, hl_gpt_forward(g, b->m, b->x, b->B, b->T, NULL),
 *                                 b->y, -1);
 *     }
 *     ...
 *     hl_step_result r;
 *     hl_step step = {.index = i, .lr_scale = hl_lr_scale(&sched, i), .clip = 1.0};
 *     if (hl_train_step(g, m->params, opt, &step, loss_of, &batch, &r, &err) != HL_OK)
 *         ... err names the step and, for a non-finite loss, the first op that went bad;
 *             the parameters were not updated ...
 *
 * Under MPI each rank's loss must be its share of the global batch's loss
 * (weighted by its share of the targets): the gradients are summed over the
 * ranks, and so is the loss reported.
 */
#ifndef HL_STEP_H
#define HL_STEP_H

#include <stdint.h>

#include "core/error.h"
#include "core/graph.h"
#include "core/params.h"
#include "train/optim.h"
#include "train/threads.h"

/* Builds this rank's loss, a (1) tensor, on g. */
typedef hl_tensor *(*hl_loss_fn)(hl_graph *g, void *ctx);

typedef struct hl_step {
    int64_t index;   /* the step's number, for messages */
    double lr_scale; /* multiplies the optimizer's learning rate (a schedule's value) */
    double clip;     /* largest global gradient norm; 0 = no clipping */
    /* When not NULL, sets the step's thread count and is told its time. */
    hl_thread_tuner *tuner;
} hl_step;

typedef struct hl_step_result {
    double loss;      /* summed over the ranks */
    double grad_norm; /* global, before clipping */
} hl_step_result;

/* One step. On error (the graph failed, or the loss or a gradient is not
 * finite) the parameters are left as they were before the step, the graph is
 * reset, and err says why; every rank returns the same status. */
hl_status hl_train_step(hl_graph *g, hl_params *params, hl_optim *opt, const hl_step *step,
                        hl_loss_fn loss_fn, void *ctx, hl_step_result *out, hl_error *err);

#endif
