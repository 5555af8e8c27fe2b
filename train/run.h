/*
 * run.h: the training run every program drives the same way: steps from a
 * start to a total, each drawing its batch and taking one hl_train_step at
 * the schedule's learning rate; an evaluation on the lead rank every
 * eval_every steps, at the program's extra steps and at the end; a progress
 * line; the first error ends the run.
 *
 *     hl_run_hooks hooks = {.ctx = &mine, .batch = draw, .loss = loss_of,
 *                           .record = evaluate};
 *     hl_run_opts run = {.steps = 3000, .eval_every = 100, .lead = rank == 0,
 *                        .schedule = {.warmup_steps = 100}, .progress = stdout,
 *                        .tuner = &tuner};
 *     if (hl_run_train(g, m->params, opt, &run, &hooks, &err) != HL_OK)
 *         ... err says why: a hook's error, or the step's (train/step.h), after
 *             which the parameters are those of the last good step ...
 *
 * A run resumed at `start` does not evaluate at its first step: the run that
 * saved the checkpoint did.
 */
#ifndef HL_RUN_H
#define HL_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"
#include "core/graph.h"
#include "core/params.h"
#include "train/optim.h"
#include "train/step.h"
#include "train/threads.h"

typedef struct hl_run_hooks {
    void *ctx;
    /* Draws the batch of step `step` (on every rank). */
    hl_status (*batch)(void *ctx, int64_t step, hl_error *err);
    /* This rank's loss on that batch (train/step.h). */
    hl_loss_fn loss;
    /* The lead rank's evaluation before step `step` is taken; last is the
     * previous step's result (loss NaN, grad_norm 0 before this run's first
     * step). */
    hl_status (*record)(void *ctx, int64_t step, const hl_step_result *last, hl_error *err);
    /* Called on every rank just before record, for what record needs from all
     * ranks (e.g. their RNG states for a checkpoint); NULL: nothing. */
    void (*gather)(void *ctx);
    /* Extra steps to evaluate at, besides every eval_every; NULL: none. */
    bool (*evaluate_at)(int64_t step);
} hl_run_hooks;

typedef struct hl_run_opts {
    int64_t start, steps;    /* the first step of this run and the total */
    int64_t eval_every;      /* >= 1 */
    hl_lr_schedule schedule; /* the optimizer's learning rate times its value */
    double clip;             /* largest global gradient norm; 0 = no clipping */
    bool lead;               /* this rank evaluates and shows progress */
    bool check_sync;         /* after every step, check that all ranks hold the same
                                parameters (train/dist.h) */
    FILE *progress;          /* the lead's progress line, or NULL for none */
    bool record_prints;      /* the record hook prints: a terminal's progress line
                                is ended first */
    hl_thread_tuner *tuner;  /* each step's thread count, or NULL */
} hl_run_opts;

hl_status hl_run_train(hl_graph *g, hl_params *params, hl_optim *opt, const hl_run_opts *o,
                       const hl_run_hooks *h, hl_error *err);

#endif
