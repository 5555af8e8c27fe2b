/*
 * progress.h: a progress display for long runs, written to a stream the caller
 * chooses. On a terminal it redraws one line (bar, step/total, loss, accuracy,
 * steps/s, ETA) at most ten times a second; otherwise it prints a plain line
 * every `every` steps, so logs stay readable.
 *
 *     hl_progress p;
 *     hl_progress_begin(&p, stdout, steps, steps / 20);
 *     for (k...) hl_progress_update(&p, k + 1, loss, accuracy);   // accuracy < 0: none
 *     hl_progress_end(&p);
 */
#ifndef HL_PROGRESS_H
#define HL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct hl_progress {
    FILE *out;
    int64_t total, every;
    int64_t first; /* the step the run began at (a resumed one's); 0 after begin */
    bool tty;
    double start, last_draw;
} hl_progress;

/* Monotonic wall-clock seconds. */
double hl_seconds(void);

void hl_progress_begin(hl_progress *p, FILE *out, int64_t total, int64_t every);
void hl_progress_update(hl_progress *p, int64_t step, double loss, double accuracy);
void hl_progress_end(hl_progress *p);

#endif
