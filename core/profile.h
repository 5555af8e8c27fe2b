/*
 * profile.h: where a training step's time goes, op by op.
 *
 *     hl_profile prof;
 *     hl_profile_clear(&prof);
 *     hl_graph_set_profile(g, &prof);
 *     hl_profile_start(&prof);               // before the forward
 *     loss = ...forward...;
 *     hl_graph_backward(g, loss);            // ends the forward's last op
 *     // prof.forward_seconds[HL_OP_LINEAR], prof.backward_seconds[...], ...
 *
 * An op's forward time runs from the moment it makes its output tensor to
 * the moment the next op makes its own (or hl_profile_stop, or the
 * backward's start): its kernel, and whatever the caller does before the
 * next op (a model's glue is charged to the op before it). Ops run with
 * gradients off are timed too, and counted only when they record a node. A
 * backward time is the op's backward kernel alone. Times add up over steps
 * until hl_profile_clear. A graph with no profile reads no clock.
 */
#ifndef HL_PROFILE_H
#define HL_PROFILE_H

#include "core/op.h"

typedef struct hl_profile {
    double forward_seconds[HL_OP_COUNT];
    double backward_seconds[HL_OP_COUNT];
    long forward_calls[HL_OP_COUNT]; /* nodes recorded */
    long backward_calls[HL_OP_COUNT];
    int running;                     /* the op whose forward runs now, or HL_OP_COUNT */
    double mark;                     /* when it began */
} hl_profile;

/* Zero times and counts. */
void hl_profile_clear(hl_profile *p);
/* Nothing runs from now: the next op's forward time starts when it does. */
void hl_profile_start(hl_profile *p);
/* Ends the running op's forward time. */
void hl_profile_stop(hl_profile *p);
/* op's forward begins (the op makes its output): ends the running one's. */
void hl_profile_enter(hl_profile *p, hl_op op);
/* Adds the time since start (hl_profile_clock) to op's backward. */
void hl_profile_backward(hl_profile *p, hl_op op, double start);
/* A monotonic clock in seconds, the one the profile reads. */
double hl_profile_clock(void);

#endif
