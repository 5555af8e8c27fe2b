/*
 * threads.h: the thread count of each training step, chosen from the times
 * of the steps themselves.
 *
 * On a machine where another process holds a core, an OpenMP team as large
 * as the machine is slower than one thread: every one of a step's parallel
 * regions waits at its barrier for the thread that shares a core with the
 * other process (measured on 2 cores with a busy loop on one: the toy run 3.5x
 * slower at 2 threads than at 1; libgomp's passive wait policy still 1.4x).
 * Since headlab's results are bitwise the same for any thread count, the
 * count may change from step to step: the tuner times a few steps at each
 * candidate (1, 2, 4, ... up to the maximum), keeps the fastest, and now and
 * then times the others again, less often while its choice keeps winning.
 *
 *     hl_thread_tuner tuner;
 *     hl_thread_tuner_init(&tuner, omp_get_max_threads()); // <= 1: leaves threads alone
 *     hl_step one = {.index = i, .lr_scale = s, .tuner = &tuner};
 *     hl_train_step(g, params, opt, &one, loss_of, ctx, &r, &err);  // sets, then times
 */
#ifndef HL_TRAIN_THREADS_H
#define HL_TRAIN_THREADS_H

#include <stdint.h>

#define HL_TUNER_MAX_CANDIDATES 12

typedef struct hl_thread_tuner {
    int n;                                   /* candidates; 0: the tuner is off */
    int counts[HL_TUNER_MAX_CANDIDATES];     /* 1, 2, 4, ..., max */
    double seconds[HL_TUNER_MAX_CANDIDATES]; /* the least step time of the last visit */
    int current;                             /* the candidate of the next step */
    int chosen;                              /* the fastest, between visits */
    int skip;                                /* not visited (chosen, timed all along); -1 */
    int samples_left;                        /* steps left in this visit */
    int64_t steps_until_visit;               /* steps on chosen before the others' next visit */
    int64_t interval;                        /* steps between visits */
    int steps_seen;                          /* steps recorded (the first is warm-up) */
} hl_thread_tuner;

/* Candidates up to max_threads; max_threads ≤ 1 turns the tuner off. */
void hl_thread_tuner_init(hl_thread_tuner *t, int max_threads);

/* The thread count for the next step, set with omp_set_num_threads. */
int hl_thread_tuner_begin(hl_thread_tuner *t);

/* The step just run took this many seconds. */
void hl_thread_tuner_end(hl_thread_tuner *t, double seconds);

#endif
