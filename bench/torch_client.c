/* The PyTorch worker process and the one-shot children of the peak-memory
 * rows (see bench/bench.h). */
#define _DEFAULT_SOURCE /* wait4 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"

extern char **environ;

/* Replies hold one number per timed run. */
#define LINE_MAX_BYTES 65536

/* Spawns argv with stdin from *to_child (when not NULL) and stdout into
 * *from_child; the parent's ends are close-on-exec so later children do not
 * inherit them. Returns the pid, or -1 with errno's reason in why. */
static pid_t spawn(char *const argv[], FILE **to_child, FILE **from_child, char *why,
                   size_t why_size)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if ((to_child && pipe(in)) || pipe(out)) {
        snprintf(why, why_size, "pipe: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (to_child)
            fcntl(in[i], F_SETFD, FD_CLOEXEC);
        fcntl(out[i], F_SETFD, FD_CLOEXEC);
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (to_child)
        posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    pid_t pid;
    /* posix_spawnp: a name without a slash ("python3") is looked for on PATH. */
    int rc = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (to_child)
        close(in[0]);
    close(out[1]);
    if (rc) {
        snprintf(why, why_size, "cannot run %s: %s", argv[0], strerror(rc));
        if (to_child)
            close(in[1]);
        close(out[0]);
        return -1;
    }
    if (to_child)
        *to_child = fdopen(in[1], "w");
    *from_child = fdopen(out[0], "r");
    return pid;
}

/* Reads one line without its newline; false at end of file. */
static bool read_line(FILE *f, char *line, size_t size)
{
    if (!fgets(line, (int)size, f))
        return false;
    line[strcspn(line, "\n")] = '\0';
    return true;
}

bool bench_torch_start(bench_torch *t, const char *python, const char *worker,
                       const char *dtype)
{
    *t = (bench_torch){0};
    /* A worker that dies must not take the benchmark with it (SIGPIPE). */
    struct sigaction ignore = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ignore, NULL);
    char *argv[] = {(char *)python, (char *)worker, "--dtype", (char *)dtype, NULL};
    char why[256];
    pid_t pid = spawn(argv, &t->to, &t->from, why, sizeof why);
    if (pid < 0) {
        snprintf(t->about, sizeof t->about, "%s", why);
        return false;
    }
    t->pid = pid;
    char line[512];
    if (!t->to || !t->from || !read_line(t->from, line, sizeof line)) {
        snprintf(t->about, sizeof t->about, "%s %s exited without a word", python, worker);
        bench_torch_stop(t);
        return false;
    }
    if (strncmp(line, "ready ", 6)) {
        /* "absent <reason>" from a Python without torch */
        snprintf(t->about, sizeof t->about, "%s",
                 strncmp(line, "absent ", 7) ? line : line + 7);
        bench_torch_stop(t);
        return false;
    }
    snprintf(t->about, sizeof t->about, "%s", line + 6);
    t->openblas = strstr(t->about, ", OpenBLAS core ") != NULL;
    return true;
}

bool bench_torch_alive(const bench_torch *t) { return t->pid > 0; }

int bench_torch_call(bench_torch *t, const char *command, double *values, int max, char *why,
                     size_t why_size)
{
    if (!bench_torch_alive(t)) {
        snprintf(why, why_size, "the worker is not running");
        return -1;
    }
    static char line[LINE_MAX_BYTES];
    if (fprintf(t->to, "%s\n", command) < 0 || fflush(t->to) || !read_line(t->from, line, sizeof line)) {
        snprintf(why, why_size, "the worker died");
        bench_torch_stop(t);
        return -1;
    }
    if (strncmp(line, "ok", 2) || (line[2] != ' ' && line[2] != '\0')) {
        snprintf(why, why_size, "%s", strncmp(line, "error ", 6) ? line : line + 6);
        return -1;
    }
    int n = 0;
    for (char *p = line + 2, *end; n < max; p = end, n++) {
        errno = 0;
        values[n] = strtod(p, &end);
        if (end == p || errno)
            break;
        /* seconds a call: a worker that sends anything else is broken */
        if (!isfinite(values[n]) || values[n] <= 0) {
            snprintf(why, why_size, "the worker sent a time of %g s", values[n]);
            return -1;
        }
    }
    return n;
}

void bench_torch_stop(bench_torch *t)
{
    if (t->to)
        fclose(t->to); /* end of input: the worker exits */
    if (t->from)
        fclose(t->from);
    if (t->pid > 0)
        waitpid(t->pid, NULL, 0);
    t->to = t->from = NULL;
    t->pid = 0;
}

int bench_child_rss(char *const argv[], double *peak_mib, double *base_mib, char *why,
                    size_t why_size)
{
    FILE *from = NULL;
    pid_t pid = spawn(argv, NULL, &from, why, why_size);
    if (pid < 0)
        return -1;
    *base_mib = -1;
    char line[256];
    long kib;
    while (from && read_line(from, line, sizeof line))
        if (sscanf(line, "base %ld", &kib) == 1)
            *base_mib = (double)kib / 1024.0;
    if (from)
        fclose(from);
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) < 0) {
        snprintf(why, why_size, "wait4: %s", strerror(errno));
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(why, why_size, "%s failed (status %d)", argv[0], status);
        return -1;
    }
    *peak_mib = (double)usage.ru_maxrss / 1024.0; /* KiB on Linux */
    return 0;
}
