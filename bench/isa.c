/* Running the benchmark once per kernel set (see bench/bench.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int bench_isa_runs(int argc, char **argv, const hl_isa *isas, int n_isas, const char *csv)
{
    char parts[HL_ISA_COUNT][1024];
    for (int i = 0; i < n_isas; i++) {
        const char *name = hl_isa_name(isas[i]);
        snprintf(parts[i], sizeof parts[i], "%s.%s", csv, name);
        char **args = child_argv(argc, argv, name, parts[i]);
        if (!args)
            return 2;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("HL_ISA", name, 1);
            execv("/proc/self/exe", args);
            fprintf(stderr, "bench: cannot run itself: %s\n", strerror(errno));
            _exit(2);
        }
        free(args);
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench: the %s run failed\n", name);
            return 1;
        }
    }
    bench_report merged;
    if (bench_report_open_raw(&merged, csv))
        return 2;
    int rc = 0;
    for (int i = 0; i < n_isas && !rc; i++)
        rc = append_csv(merged.csv, parts[i], i == 0);
    if (rc) {
        bench_report_abandon(&merged);
        return 2;
    }
    if (bench_report_close(&merged))
        return 2;
    for (int i = 0; i < n_isas; i++)
        remove(parts[i]);
    printf("\nwrote %s (the rows of every kernel set)\n", csv);
    return 0;
}
