/*
 * cli.h: what the programs (examples/) share: one option parser built on
 * getopt_long, and the process set-up every program does first.
 *
 *     int steps = 3000;
 *     const char *out = "out/run";
 *     bool quiet = false;
 *     const hl_opt opts[] = {
 *         HL_OPTION_INT("steps", &steps, 0, 1e8, "N", "training steps"),
 *         HL_OPTION_TEXT("out", &out, "DIR", "where the files go"),
 *         HL_OPTION_FLAG("quiet", &quiet, "print nothing"),
 *         {0},
 *     };
 *     const hl_usage usage = {"usage: prog [options]\nTrains a model.\n", NULL};
 *     hl_cli_init();
 *     hl_cli_parse_or_exit("prog", &usage, opts, argc, argv);
 *
 * The table is the one source of a flag: its name, its range, its help and its
 * default. --help prints each flag's help followed by "(default: X)", X read
 * from the variable before parsing (so a default is written once, where the
 * variable starts) or given as words in .dflt; tests/check_docs.sh compares
 * those defaults with the program's page.
 *
 * Behaviour every program keeps: --help (or -h) prints the usage on stdout and
 * exits 0; an unknown flag, a missing value or a value out of range prints a
 * message naming the flag and the accepted range on stderr and exits 2,
 * before anything is written.
 */
#ifndef HL_CLI_H
#define HL_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define HL_OPT_LIST_MAX 32

typedef enum {
    HL_OPT_FLAG, /* bool *: set to true, takes no value */
    HL_OPT_INT,  /* int *: a whole number in [min, max] */
    HL_OPT_REAL, /* double *: a finite number in [min, max] ((min, max] with min_open) */
    HL_OPT_TEXT, /* const char **: the value as given */
    HL_OPT_LIST, /* hl_opt_list *: every value of a flag that may repeat */
} hl_opt_kind;

typedef struct hl_opt_list {
    const char *item[HL_OPT_LIST_MAX];
    int n;
} hl_opt_list;

typedef struct hl_opt {
    const char *name; /* the long name without "--"; NULL ends the table */
    hl_opt_kind kind;
    void *value;
    double min, max;  /* INT and REAL */
    bool min_open;    /* REAL: min itself is refused */
    bool *given;      /* when not NULL, set when the flag appears */
    /* The usage: */
    const char *arg;  /* the value's placeholder, "N" or "FILE"; NULL for a FLAG */
    const char *help; /* what the flag does */
    const char *dflt; /* the default in words where the variable's start is not
                       * it ("ctx/4"); "" shows none; NULL shows the start value
                       * (none for FLAG, LIST and a NULL TEXT) */
    const char *group; /* a heading printed before this flag ("prune --curve:") */
} hl_opt;

/* Table entries: the name, the variable, the range (INT, REAL), the value's
 * placeholder (not for FLAG), the help, then any designated initialisers
 * (.given, .dflt, .group, .min_open): HL_OPTION_INT("ctx", &ctx, 1, 8192, "N",
 * "context length", .given = &ctx_given). */
#define HL_OPTION_FLAG(n, p, ...) {.name = (n), .kind = HL_OPT_FLAG, .value = (p), .help = __VA_ARGS__}
#define HL_OPTION_INT(n, p, lo, hi, a, ...) \
    {.name = (n), .kind = HL_OPT_INT, .value = (p), .min = (lo), .max = (hi), .arg = (a), \
     .help = __VA_ARGS__}
#define HL_OPTION_REAL(n, p, lo, hi, a, ...) \
    {.name = (n), .kind = HL_OPT_REAL, .value = (p), .min = (lo), .max = (hi), .arg = (a), \
     .help = __VA_ARGS__}
#define HL_OPTION_TEXT(n, p, a, ...) \
    {.name = (n), .kind = HL_OPT_TEXT, .value = (p), .arg = (a), .help = __VA_ARGS__}
#define HL_OPTION_LIST(n, p, a, ...) \
    {.name = (n), .kind = HL_OPT_LIST, .value = (p), .arg = (a), .help = __VA_ARGS__}

/* What --help prints around the flags: `synopsis` (the usage lines and what
 * the program does) before them, `epilog` (exit status, notes) after; either
 * may be NULL. */
typedef struct hl_usage {
    const char *synopsis;
    const char *epilog;
} hl_usage;

typedef enum { HL_CLI_OK, HL_CLI_HELP, HL_CLI_BAD } hl_cli_status;

/* Parses argv[first..argc) against opts, writing values as they come.
 * Messages for bad input go to `errors` prefixed with the program's name. No
 * positional arguments are accepted. Never exits. */
hl_cli_status hl_cli_parse(const char *program, const hl_opt *opts, int first, int argc,
                           char **argv, FILE *errors);

/* Prints the usage: the synopsis, then every flag of opts ("  --name ARG" and
 * its help, wrapped to 79 columns, ending "(default: X)" where it has one),
 * then the epilog. Call it before parsing: defaults are read from the
 * variables. */
void hl_cli_usage(FILE *out, const hl_usage *usage, const hl_opt *opts);

/* hl_cli_parse from argv[1], then: HL_CLI_HELP prints the usage and the
 * kernel line on stdout and exits 0; HL_CLI_BAD exits 2. */
void hl_cli_parse_or_exit(const char *program, const hl_usage *usage, const hl_opt *opts,
                          int argc, char **argv);

/* Prints "program: message" on stderr and exits 2 (bad input). */
_Noreturn void hl_cli_bad_input(const char *program, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints why a training run failed, "program: message; ", then what is left
 * of it: out/checkpoint.safetensors of step saved_step when the run wrote one
 * (saved_step > 0), else that none was written, the first coming at the first
 * evaluation after step start (and that the checkpoint resumed from, if
 * resumed, is as it was). */
void hl_cli_report_failed_run(const char *program, const char *message, const char *out,
                              int64_t saved_step, int64_t start, bool resumed);

/* Process set-up: a write past a file-size limit (a full disk or quota) fails
 * as an error the writer reports, instead of SIGXFSZ killing the program;
 * output that could not be written to stdout makes the exit status 2 (at
 * exit, with a message, whatever status the program returned); the
 * kernel set HL_ISA names is checked (an unknown one, or one this CPU lacks,
 * prints a message and exits 2), and so is OMP_NUM_THREADS (over
 * HL_CLI_MAX_THREADS: the same). */
void hl_cli_init(void);

/* The line that closes every --help: which kernel set runs, which the CPU
 * has, and the build's precision. */
void hl_cli_print_kernels(FILE *out);
/* The most OpenMP threads a program takes (--threads, OMP_NUM_THREADS). */
#define HL_CLI_MAX_THREADS 1024

/* OpenMP threads for the kernels; 0 leaves OMP_NUM_THREADS (or all cores).
 * Returns the largest team a training loop's thread tuner (train/threads.h)
 * may choose from: the machine's cores when the user fixed no count (neither
 * --threads nor OMP_NUM_THREADS), else 0 (the tuner stays off). */
int hl_cli_set_threads(int threads);

#endif
