/*
 * profile.c: per-op time accounts for hl_graph_set_profile (core/profile.h).
 */
#include "core/profile.h"

#include <string.h>
#include <time.h>

double hl_profile_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hl_profile_clear(hl_profile *p)
{
    memset(p, 0, sizeof *p);
    p->running = HL_OP_COUNT;
}

void hl_profile_enter(hl_profile *p, hl_op op)
{
    const double now = hl_profile_clock();
    if (p->running != HL_OP_COUNT)
        p->forward_seconds[p->running] += now - p->mark;
    p->running = (int)op;
    p->mark = now;
}

void hl_profile_start(hl_profile *p) { p->running = HL_OP_COUNT; }

void hl_profile_stop(hl_profile *p)
{
    if (p->running != HL_OP_COUNT)
        p->forward_seconds[p->running] += hl_profile_clock() - p->mark;
    p->running = HL_OP_COUNT;
}

void hl_profile_backward(hl_profile *p, hl_op op, double start)
{
    p->backward_seconds[op] += hl_profile_clock() - start;
    p->backward_calls[op]++;
}
