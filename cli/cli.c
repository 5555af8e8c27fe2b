/* The programs' option parser and set-up: see cli.h. */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/real.h"
#include "ops/isa.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* getopt_long's table for opts, plus --help; NULL when out of memory. */
static struct option *long_options(const hl_opt *opts, int *n)
{
    for (*n = 0; opts[*n].name; (*n)++)
        ;
    struct option *longs = calloc((size_t)*n + 2, sizeof *longs);
    if (!longs)
        return NULL;
    for (int i = 0; i < *n; i++)
        longs[i] = (struct option){opts[i].name,
                                   opts[i].kind == HL_OPT_FLAG ? no_argument : required_argument,
                                   NULL, 256 + i};
    longs[*n] = (struct option){"help", no_argument, NULL, 'h'};
    return longs;
}

static bool parse_int(const hl_opt *o, const char *text, FILE *errors, const char *program)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < o->min || v > o->max) {
        fprintf(errors, "%s: --%s needs an integer in %.0f..%.0f, got '%s'\n", program, o->name,
                o->min, o->max, text);
        return false;
    }
    *(int *)o->value = (int)v;
    return true;
}

static bool parse_real(const hl_opt *o, const char *text, FILE *errors, const char *program)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    bool low_ok = o->min_open ? v > o->min : v >= o->min;
    if (end == text || *end || !isfinite(v) || !low_ok || v > o->max) {
        if (o->min_open)
            fprintf(errors, "%s: --%s needs a number above %g and at most %g, got '%s'\n",
                    program, o->name, o->min, o->max, text);
        else
            fprintf(errors, "%s: --%s needs a number in %g..%g, got '%s'\n", program, o->name,
                    o->min, o->max, text);
        return false;
    }
    *(double *)o->value = v;
    return true;
}

static bool store(const hl_opt *o, const char *text, FILE *errors, const char *program)
{
    if (o->given)
        *o->given = true;
    switch (o->kind) {
    case HL_OPT_FLAG:
        *(bool *)o->value = true;
        return true;
    case HL_OPT_INT:
        return parse_int(o, text, errors, program);
    case HL_OPT_REAL:
        return parse_real(o, text, errors, program);
    case HL_OPT_TEXT:
        *(const char **)o->value = text;
        return true;
    case HL_OPT_LIST: {
        hl_opt_list *list = o->value;
        if (list->n == HL_OPT_LIST_MAX) {
            fprintf(errors, "%s: --%s given more than %d times\n", program, o->name,
                    HL_OPT_LIST_MAX);
            return false;
        }
        list->item[list->n++] = text;
        return true;
    }
    }
    return false;
}

/* A flag getopt_long did not take: unknown, or a prefix of several flags'
 * names (getopt_long takes a prefix of one alone), which are listed. */
static void refuse_unknown(const hl_opt *opts, const char *flag, FILE *errors,
                           const char *program)
{
    const char *name = flag + strspn(flag, "-");
    const size_t len = strcspn(name, "=");
    int matches = 0;
    for (const hl_opt *o = opts; o->name && len; o++)
        matches += !strncmp(o->name, name, len);
    if (matches < 2 || flag[0] != '-' || flag[1] != '-') {
        fprintf(errors, "%s: unknown option %s (see --help)\n", program, flag);
        return;
    }
    fprintf(errors, "%s: %.*s is the start of several flags:", program, (int)(len + 2), flag);
    for (const hl_opt *o = opts; o->name; o++)
        if (!strncmp(o->name, name, len))
            fprintf(errors, " --%s", o->name);
    fprintf(errors, "\n");
}

hl_cli_status hl_cli_parse(const char *program, const hl_opt *opts, int first, int argc,
                           char **argv, FILE *errors)
{
    int n;
    struct option *longs = long_options(opts, &n);
    if (!longs) {
        fprintf(errors, "%s: out of memory\n", program);
        return HL_CLI_BAD;
    }
    /* "+": stop at the first non-option (refused below); ":": report a missing
     * value apart from an unknown flag. getopt_long's state is global: start
     * it afresh (optind 0 re-initialises GNU getopt). */
    opterr = 0;
    optind = 0;
    hl_cli_status status = HL_CLI_OK;
    char **args = argv + first - 1;
    const int n_args = argc - first + 1;
    for (int c; status == HL_CLI_OK && (c = getopt_long(n_args, args, "+:h", longs, NULL)) != -1;) {
        const char *flag = args[optind - 1];
        if (c == 'h')
            status = HL_CLI_HELP;
        else if (c == ':')
            fprintf(errors, "%s: %s needs a value (see --help)\n", program, flag),
                status = HL_CLI_BAD;
        else if (c == '?')
            refuse_unknown(opts, flag, errors, program), status = HL_CLI_BAD;
        else if (!store(&opts[c - 256], optarg, errors, program))
            status = HL_CLI_BAD;
    }
    if (status == HL_CLI_OK && optind < n_args) {
        fprintf(errors, "%s: unexpected argument '%s' (see --help)\n", program, args[optind]);
        status = HL_CLI_BAD;
    }
    free(longs);
    return status;
}

enum { USAGE_WIDTH = 79, USAGE_INDENT = 24 };

/* The default as --help shows it into buf, or "" for none. */
static const char *default_text(const hl_opt *o, char *buf, size_t size)
{
    if (o->dflt)
        return o->dflt;
    buf[0] = '\0';
    if (o->kind == HL_OPT_INT)
        snprintf(buf, size, "%d", *(const int *)o->value);
    else if (o->kind == HL_OPT_REAL)
        snprintf(buf, size, "%g", *(const double *)o->value);
    else if (o->kind == HL_OPT_TEXT && *(const char *const *)o->value)
        snprintf(buf, size, "%s", *(const char *const *)o->value);
    return buf;
}

/* Prints text from column `column` on, word-wrapped to USAGE_WIDTH, each
 * further line indented USAGE_INDENT; a word longer than a line stays whole,
 * and a newline in text starts a line. */
static void print_wrapped(FILE *out, const char *text, int column)
{
    bool line_start = true;
    for (const char *w = text; *w;) {
        const char *end = w + strcspn(w, " \n");
        const int len = (int)(end - w);
        if (!line_start && column + 1 + len > USAGE_WIDTH) {
            fprintf(out, "\n%*s", USAGE_INDENT, "");
            column = USAGE_INDENT;
        } else if (!line_start) {
            fputc(' ', out);
            column++;
        }
        column += fprintf(out, "%.*s", len, w);
        line_start = false;
        for (w = end; *w == ' ' || *w == '\n'; w++)
            if (*w == '\n') {
                fprintf(out, "\n%*s", USAGE_INDENT, "");
                column = USAGE_INDENT;
                line_start = true;
            }
    }
    fputc('\n', out);
}

void hl_cli_usage(FILE *out, const hl_usage *usage, const hl_opt *opts)
{
    if (usage && usage->synopsis)
        fputs(usage->synopsis, out);
    for (const hl_opt *o = opts; o->name; o++) {
        if (o->group)
            fprintf(out, "%s\n", o->group);
        int column = fprintf(out, "  --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        if (column >= USAGE_INDENT) {
            fprintf(out, "\n");
            column = 0;
        }
        fprintf(out, "%*s", USAGE_INDENT - column, "");
        char buf[64], text[1024];
        const char *dflt = default_text(o, buf, sizeof buf);
        snprintf(text, sizeof text, *dflt ? "%s (default: %s)" : "%s", o->help ? o->help : "",
                 dflt);
        print_wrapped(out, text, USAGE_INDENT);
    }
    if (usage && usage->epilog)
        fputs(usage->epilog, out);
}

void hl_cli_parse_or_exit(const char *program, const hl_usage *usage, const hl_opt *opts,
                          int argc, char **argv)
{
    /* The usage as it stands before parsing: defaults, not the flags given. */
    char *help = NULL;
    size_t help_size = 0;
    FILE *f = open_memstream(&help, &help_size);
    if (f) {
        hl_cli_usage(f, usage, opts);
        fclose(f);
    }
    hl_cli_status s = hl_cli_parse(program, opts, 1, argc, argv, stderr);
    if (s == HL_CLI_HELP) {
        fputs(help ? help : "", stdout);
        hl_cli_print_kernels(stdout);
        exit(0);
    }
    free(help);
    if (s == HL_CLI_BAD)
        exit(2);
}

void hl_cli_bad_input(const char *program, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

void hl_cli_report_failed_run(const char *program, const char *message, const char *out,
                              int64_t saved_step, int64_t start, bool resumed)
{
    if (saved_step > 0)
        fprintf(stderr, "%s: %s; %s/checkpoint.safetensors keeps the last good state, step "
                "%lld's\n", program, message, out, (long long)saved_step);
    else
        fprintf(stderr, "%s: %s; no checkpoint was written (the first comes at the first "
                "evaluation after step %lld)%s\n", program, message, (long long)start,
                resumed ? "; the one resumed from is as it was" : "");
}

/* At exit, standard output is flushed and closed; when a write to it failed
 * (a full disk, a closed descriptor) the output is lost, and the exit status
 * says so instead of success. A descriptor closed with nothing written to it
 * loses nothing. */
static void close_stdout(void)
{
    int why = fflush(stdout) != 0 ? errno : 0;
    bool lost = why || ferror(stdout);
    errno = 0;
    if (fclose(stdout) != 0 && errno != EBADF && !lost)
        why = errno, lost = true;
    if (lost) {
        fprintf(stderr, "headlab: cannot write standard output%s%s\n", why ? ": " : "",
                why ? strerror(why) : "");
        _exit(2);
    }
}

void hl_cli_init(void)
{
    atexit(close_stdout);
    signal(SIGXFSZ, SIG_IGN);
    hl_error err = {0};
    if (hl_isa_init_from_env(&err) != HL_OK) {
        fprintf(stderr, "headlab: %s\n", err.message);
        exit(2);
    }
    /* The OpenMP runtime takes any count and fails inside its first parallel
     * region when it cannot start that many threads (a crash at 100000):
     * the same limit as --threads, checked before any. */
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && strtol(env, NULL, 10) > HL_CLI_MAX_THREADS) {
        fprintf(stderr, "headlab: OMP_NUM_THREADS=%.40s: at most %d threads\n", env,
                HL_CLI_MAX_THREADS);
        exit(2);
    }
}

void hl_cli_print_kernels(FILE *out)
{
    char have[64];
    fprintf(out, "\nkernels: %s (this CPU has %s; HL_ISA=NAME picks one), %s build\n",
            hl_isa_name(hl_isa_active()), hl_isa_list(have, sizeof have), HL_REAL_NAME);
}

int hl_cli_set_threads(int threads)
{
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads(threads);
    const char *env = getenv("OMP_NUM_THREADS");
    return threads > 0 || (env && *env) ? 0 : omp_get_max_threads();
#else
    (void)threads;
    return 0;
#endif
}
