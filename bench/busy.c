/* The machine's FMA peak, and training runs on a busy machine (see
 * bench/bench.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/bench.h"
#include "ops/kernels.h"

/* Where the peak loops' results go, so the compiler keeps the loops. */
static volatile double peak_sink;

/* GFLOP/s of `threads` threads each running the peak loop at once. */
static double peak_of(int threads)
{
    const long iterations = 20000000;
    double flops_total = 0, keep = 0;
    const double t0 = bench_now();
#pragma omp parallel num_threads(threads) reduction(+ : flops_total, keep)
    {
        double flops;
        keep += hl_kernels()->fma_peak(iterations, &flops);
        flops_total += flops;
    }
    const double seconds = bench_now() - t0;
    peak_sink = keep;
    return flops_total / seconds * 1e-9;
}

void bench_fma_peak(int threads, double *one, double *all)
{
    peak_of(1); /* warm-up: the clock rises */
    *one = *all = 0;
    for (int rep = 0; rep < 3; rep++) {
        const double a = peak_of(1), b = peak_of(threads);
        *one = a > *one ? a : *one;
        *all = b > *all ? b : *all;
    }
}

/* ---- a busy machine ---- */

/* The folder holding this program, and so the other programs. */
static void program_dir(char *dir, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", dir, size - 1);
    dir[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, size, ".");
}

/* Seconds of one run of command (NaN if it failed). */
static double time_command(const char *command)
{
    const double t0 = bench_now();
    const int rc = system(command);
    const double seconds = bench_now() - t0;
    return rc == 0 ? seconds : NAN;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    const char *name, *args; /* printf format with the program folder and output dir */
} busy_program;

/* The run folder out and what the runs wrote there. */
static void remove_dir(const char *out)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", out);
    if (system(command) != 0)
        fprintf(stderr, "bench: could not remove %s\n", out);
}

void bench_busy_section(bench_report *report, int threads, bool quick)
{
    char dir[PATH_MAX];
    program_dir(dir, sizeof dir);
    static const busy_program programs[] = {
        {"toy_heads 300 steps", "%s/toy_heads --steps 300 --no-report --out %s"},
        {"charlm 4x4 d128 50 steps",
         "%s/charlm --data /usr/share/common-licenses/GPL-3 --steps 50 --eval-every 50 "
         "--sample 0 --out %s"},
    };
    char out[] = "/tmp/headlab-busy-XXXXXX";
    if (!mkdtemp(out)) {
        fprintf(stderr, "bench: busy: no temporary folder: %s\n", strerror(errno));
        return;
    }
    fflush(stdout);
    const pid_t parent = getpid(), spinner = fork();
    if (spinner < 0) {
        fprintf(stderr, "bench: busy: cannot start the busy loop: %s\n", strerror(errno));
        remove_dir(out);
        return;
    }
    if (spinner == 0) { /* the other process, gone with bench however bench ends */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(0);
        for (;;)
            ;
    }
    printf("\nBusy machine: a busy loop holds one core; a run at 1 thread, at %d, and by "
           "default (each step's team chosen by train/threads.c)  seconds per run\n",
           threads);
    printf("%-27s %-22s %8s %8s\n", "run", "threads", "seconds", "vs 1");
    const int reps = quick ? 1 : 3;
    for (size_t p = 0; p < sizeof programs / sizeof programs[0]; p++) {
        double one = NAN;
        for (int variant = 0; variant < 3; variant++) {
            char env[64], command[2048], args[1536];
            if (variant < 2)
                snprintf(env, sizeof env, "OMP_NUM_THREADS=%d", variant == 0 ? 1 : threads);
            else
                snprintf(env, sizeof env, "env -u OMP_NUM_THREADS");
            snprintf(args, sizeof args, programs[p].args, dir, out);
            snprintf(command, sizeof command, "%s %s >/dev/null 2>&1", env, args);
            double s[3];
            for (int r = 0; r < reps; r++)
                s[r] = time_command(command);
            qsort(s, (size_t)reps, sizeof s[0], cmp_double);
            const double median = s[reps / 2];
            if (variant == 0)
                one = median;
            char label[24];
            snprintf(label, sizeof label, variant == 0 ? "1" : variant == 1 ? "%d" : "default",
                     threads);
            printf("%-27s %-22s %8.2f %7.2fx\n", programs[p].name, label, median, median / one);
            bench_row row = {.section = "busy", .threads = variant == 2 ? 0 : variant == 0 ? 1
                                                                                            : threads};
            snprintf(row.name, sizeof row.name, "%s", programs[p].name);
            snprintf(row.variant, sizeof row.variant, "%s", label);
            row.cell[BENCH_HEADLAB] = isnan(median) ? BENCH_CELL_FAILED : BENCH_CELL_OK;
            row.stats[BENCH_HEADLAB] = (bench_stats){median, s[0], s[reps - 1], reps};
            bench_report_csv_row(report, &row);
        }
    }
    kill(spinner, SIGKILL);
    waitpid(spinner, NULL, 0);
    remove_dir(out);
    fflush(stdout);
}
