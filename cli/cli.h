/*
 * cli.h: what the programs (examples/) share: one option parser built on
 * getopt_long, and the process set-up every program does first.
 *
 *     int steps = 3000;
 *     const char *out = "out/run";
 *     bool quiet = false;
 *     const hl_opt opts[] = {
 *         HL_OPTION_INT("steps", &steps, 0, 1e8),
 *         HL_OPTION_TEXT("out", &out),
 *         HL_OPTION_FLAG("quiet", &quiet),
 *         {0},
 *     };
 *     hl_cli_init();
 *     hl_cli_parse_or_exit("prog", opts, argc, argv, usage);
 *
 * Behaviour every program keeps: --help (or -h) prints the usage on stdout and
 * exits 0; an unknown flag, a missing value or a value out of range prints a
 * message naming the flag and the accepted range on stderr and exits 2,
 * before anything is written.
 */
#ifndef HL_CLI_H
#define HL_CLI_H

#include <stdbool.h>
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
} hl_opt;

/* Table entries; use designated initialisers for the rest (min_open, given). */
#define HL_OPTION_FLAG(n, p) {.name = (n), .kind = HL_OPT_FLAG, .value = (p)}
#define HL_OPTION_INT(n, p, lo, hi) \
    {.name = (n), .kind = HL_OPT_INT, .value = (p), .min = (lo), .max = (hi)}
#define HL_OPTION_REAL(n, p, lo, hi) \
    {.name = (n), .kind = HL_OPT_REAL, .value = (p), .min = (lo), .max = (hi)}
#define HL_OPTION_TEXT(n, p) {.name = (n), .kind = HL_OPT_TEXT, .value = (p)}
#define HL_OPTION_LIST(n, p) {.name = (n), .kind = HL_OPT_LIST, .value = (p)}

typedef enum { HL_CLI_OK, HL_CLI_HELP, HL_CLI_BAD } hl_cli_status;

/* Parses argv[first..argc) against opts, writing values as they come.
 * Messages for bad input go to `errors` prefixed with the program's name. No
 * positional arguments are accepted. Never exits. */
hl_cli_status hl_cli_parse(const char *program, const hl_opt *opts, int first, int argc,
                           char **argv, FILE *errors);

/* hl_cli_parse from argv[1], then: HL_CLI_HELP prints usage(stdout) and exits
 * 0; HL_CLI_BAD exits 2. */
void hl_cli_parse_or_exit(const char *program, const hl_opt *opts, int argc, char **argv,
                          void (*usage)(FILE *));

/* Prints "program: message" on stderr and exits 2 (bad input). */
_Noreturn void hl_cli_bad_input(const char *program, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Process set-up: a write past a file-size limit (a full disk or quota) fails
 * as an error the writer reports, instead of SIGXFSZ killing the program; the
 * kernel set HL_ISA names is checked (an unknown one, or one this CPU lacks,
 * prints a message and exits 2). */
void hl_cli_init(void);

/* The line that closes every --help: which kernel set runs, which the CPU
 * has, and the build's precision. */
void hl_cli_print_kernels(FILE *out);
/* OpenMP threads for the kernels; 0 leaves OMP_NUM_THREADS (or all cores).
 * Returns the largest team a training loop's thread tuner (train/threads.h)
 * may choose from: the machine's cores when the user fixed no count (neither
 * --threads nor OMP_NUM_THREADS), else 0 (the tuner stays off). */
int hl_cli_set_threads(int threads);

#endif
