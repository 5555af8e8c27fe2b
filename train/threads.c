/* Thread counts chosen from step times (see train/threads.h). */
#include "train/threads.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Steps timed per visit of a candidate, and their mean is its time: on a
 * busy machine a large team's steps are now fast (the other process was off
 * its core), now many times slower, and only the mean says what it costs.
 * A visit ends after one step that took CLEARLY_SLOWER times the best time
 * so far, so trying a bad team costs one step. */
enum { SAMPLES = 3 };
#define CLEARLY_SLOWER 1.5
/* The weight of a new step in the chosen count's running time. */
#define RUNNING_WEIGHT 0.1
/* Steps on the chosen count before the first revisit, and the longest gap. */
enum { FIRST_INTERVAL = 32, LONGEST_INTERVAL = 1024 };

/* The candidate to visit after `from` (from -1: the first), one thread
 * first: it is never much slower than the best, so the slow teams of a busy
 * machine are met with a time to compare against and cost one step each. -1
 * when the visit is over. */
static int next_visit(const hl_thread_tuner *t, int from)
{
    for (int i = from + 1; i < t->n; i++)
        if (i != t->skip)
            return i;
    return -1;
}

static void start_visit(hl_thread_tuner *t, int candidate)
{
    if (candidate < 0) /* nothing to visit (one candidate): stay */
        return;
    t->current = candidate;
    t->samples_left = SAMPLES;
    t->seconds[candidate] = 0;
}

void hl_thread_tuner_init(hl_thread_tuner *t, int max_threads)
{
    memset(t, 0, sizeof *t);
    if (max_threads <= 1)
        return;
    for (int c = 1; t->n < HL_TUNER_MAX_CANDIDATES; c *= 2) {
        t->counts[t->n++] = c < max_threads ? c : max_threads;
        if (c >= max_threads)
            break;
    }
    for (int i = 0; i < t->n; i++)
        t->seconds[i] = INFINITY;
    t->skip = -1; /* the first visit times every candidate */
    t->interval = FIRST_INTERVAL;
    start_visit(t, next_visit(t, -1));
    t->chosen = t->current;
    /* What runs before the first step (a program's first evaluation) runs
     * on one thread too. */
    hl_thread_tuner_begin(t);
}

int hl_thread_tuner_begin(hl_thread_tuner *t)
{
    if (t->n == 0)
        return 0;
    const int count = t->counts[t->current];
#ifdef _OPENMP
    omp_set_num_threads(count);
#endif
    return count;
}

/* The fastest candidate but `except` by its last time (INFINITY: none timed). */
static int fastest_other(const hl_thread_tuner *t, int except)
{
    int best = -1;
    for (int i = 0; i < t->n; i++)
        if (i != except && (best < 0 || t->seconds[i] < t->seconds[best]))
            best = i;
    return best;
}

/* The fastest candidate by its last time. */
static int fastest(const hl_thread_tuner *t)
{
    int best = t->n - 1;
    for (int i = 0; i < t->n; i++)
        if (t->seconds[i] < t->seconds[best])
            best = i;
    return best;
}

void hl_thread_tuner_end(hl_thread_tuner *t, double seconds)
{
    if (t->n == 0 || t->steps_seen++ == 0) /* the first step builds buffers */
        return;
    if (t->samples_left == 0) {
        /* On chosen between visits: its time follows the machine, so a
         * machine that gets busy (or quiet) shows at the next visit. */
        t->seconds[t->chosen] += RUNNING_WEIGHT * (seconds - t->seconds[t->chosen]);
        const double rival = t->seconds[fastest_other(t, t->chosen)];
        /* Visit now when chosen has fallen clearly behind another's last time. */
        if (--t->steps_until_visit <= 0 || t->seconds[t->chosen] > CLEARLY_SLOWER * rival)
            start_visit(t, next_visit(t, -1));
        return;
    }
    const int taken = SAMPLES - t->samples_left;
    t->seconds[t->current] = (t->seconds[t->current] * taken + seconds) / (taken + 1);
    const double rival = t->seconds[fastest_other(t, t->current)];
    if (--t->samples_left > 0 && seconds < CLEARLY_SLOWER * rival)
        return;
    t->samples_left = 0;
    const int next = next_visit(t, t->current);
    if (next >= 0) {
        start_visit(t, next);
        return;
    }
    /* Every candidate timed: keep the fastest; look again sooner when the
     * choice changed, later and later while it holds. */
    const int best = fastest(t);
    if (best == t->chosen && t->skip >= 0)
        t->interval = t->interval * 2 < LONGEST_INTERVAL ? t->interval * 2 : LONGEST_INTERVAL;
    else
        t->interval = FIRST_INTERVAL;
    t->chosen = t->skip = t->current = best;
    t->steps_until_visit = t->interval;
}
