/* Clocks, medians, and how busy the machine was (see bench/bench.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bench_sleep(double seconds)
{
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_stats_of(const double *seconds, int n, bench_stats *out)
{
    *out = (bench_stats){.runs = n};
    if (n <= 0)
        return;
    double *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted)
        return;
    memcpy(sorted, seconds, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_double);
    out->median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    out->min = sorted[0];
    out->max = sorted[n - 1];
    free(sorted);
}

/* Busy seconds of all CPUs since boot: every /proc/stat column but idle and
 * iowait (steal counts as busy: a neighbour had the CPU). */
static double machine_busy(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    unsigned long long v[8] = {0};
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                     &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got != 8)
        return 0;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

/* User + system seconds of a process (all its threads), from
 * /proc/<pid>/stat fields 14 and 15; 0 when it cannot be read. */
static double process_cpu(const char *which)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", which);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    /* the command name (field 2) may hold spaces: count from its ')' */
    char *p = ok ? strrchr(line, ')') : NULL;
    if (!p)
        return 0;
    unsigned long long utime = 0, stime = 0;
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
               &stime) != 2)
        return 0;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

void bench_load_mark_take(bench_load_mark *m, pid_t worker)
{
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)worker);
    m->wall = bench_now();
    m->busy = machine_busy();
    m->self = process_cpu("self");
    m->worker = worker > 0 ? process_cpu(pid) : 0;
}

double bench_load_foreign(const bench_load_mark *a, const bench_load_mark *b,
                          double worker_elsewhere)
{
    double wall = b->wall - a->wall;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (wall <= 0 || cpus < 1)
        return 0;
    double other = (b->busy - a->busy) - (b->self - a->self) - (b->worker - a->worker) +
                   worker_elsewhere;
    double share = other / (wall * (double)cpus);
    return share < 0 ? 0 : share > 1 ? 1 : share;
}
