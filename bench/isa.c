/* Running the benchmark once per kernel set (see bench/bench.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"

const char *bench_openblas_coretype(hl_isa isa)
{
    switch (isa) {
    case HL_ISA_AVX512:
        return "SkylakeX";
    case HL_ISA_AVX2:
        return "Haswell";
    default:
        return "Prescott"; /* SSE3: the closest OpenBLAS has to plain x86-64 */
    }
}

/* argv with --isa and --csv replaced by the child's own. */
static char **child_argv(int argc, char **argv, const char *isa, const char *csv)
{
    char **out = calloc((size_t)argc + 5, sizeof *out);
    if (!out)
        return NULL;
    int n = 0;
    out[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--isa") || !strcmp(argv[i], "--csv")) && i + 1 < argc) {
            i++;
            continue;
        }
        out[n++] = argv[i];
    }
    out[n++] = "--isa";
    out[n++] = (char *)isa;
    out[n++] = "--csv";
    out[n++] = (char *)csv;
    return out;
}

/* Appends path's rows (and its header when with_header) to out. */
static int append_csv(FILE *out, const char *path, bool with_header)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "bench: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[4096];
    for (int row = 0; fgets(line, sizeof line, in); row++)
        if (row > 0 || with_header)
            fputs(line, out);
    fclose(in);
    return 0;
}

/* One child run of the benchmark on kernel set name, its rows into part:
 * its exit status, or -1 when it could not run or was killed. */
static int run_child(int argc, char **argv, const char *name, const char *part)
{
    char **args = child_argv(argc, argv, name, part);
    if (!args)
        return -1;
    fflush(stdout);
    const pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        /* gone with this process however it ends (a kill leaves no run behind) */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(2);
        setenv("HL_ISA", name, 1);
        execv("/proc/self/exe", args);
        fprintf(stderr, "bench: cannot run itself: %s\n", strerror(errno));
        _exit(2);
    }
    free(args);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

int bench_isa_runs(int argc, char **argv, const hl_isa *isas, int n_isas, const char *csv)
{
    /* The CSV first, so that one that cannot be written stops the run before
     * it starts; each set's rows go to a private folder until then. */
    bench_report merged;
    if (bench_report_open_raw(&merged, csv))
        return 2;
    char dir[] = "/tmp/headlab-bench-XXXXXX", parts[HL_ISA_COUNT][64];
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench: no temporary folder: %s\n", strerror(errno));
        bench_report_abandon(&merged);
        return 2;
    }
    int rc = 0, ran = 0;
    for (int i = 0; i < n_isas && rc != 2; i++) {
        const char *name = hl_isa_name(isas[i]);
        snprintf(parts[i], sizeof parts[i], "%s/%s.csv", dir, name);
        int status = run_child(argc, argv, name, parts[i]);
        if (status == 0 || status == 1) { /* 1: some rows failed, the others written */
            if (append_csv(merged.csv, parts[i], ran == 0) == 0)
                ran++;
            else
                status = 1;
            rc |= status;
        } else {
            fprintf(stderr, "bench: the %s run failed\n", name);
            rc = status == 2 ? 2 : 1;
        }
        remove(parts[i]); /* whatever the run left */
    }
    if (rmdir(dir) != 0)
        fprintf(stderr, "bench: could not remove %s: %s\n", dir, strerror(errno));
    if (rc == 2 || !ran) {
        bench_report_abandon(&merged);
        return rc ? rc : 1;
    }
    if (bench_report_close(&merged))
        return 2;
    printf("\nwrote %s (the rows of every kernel set)\n", csv);
    return rc;
}
