/*
 * gradcheck: every op, the attention module and a small GPT against central
 * finite differences (the catalogue of models/gradcheck_cases.h), as a table;
 * or, with --sweep, the error as a function of the step.
 *
 *     build/gradcheck [--op NAME] [--eps E] [--atol A] [--rtol R] [--csv FILE]
 *     build/gradcheck --sweep [--op NAME] [--per-decade N] [--csv FILE]
 *
 * --op may be given several times to pick several ops.
 *
 * Exit status: 0 when every check passes (always, for a sweep that ran),
 * 1 when one fails or cannot run, 2 on bad flags or an unwritable --csv file.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/gradcheck_cases.h"
#include "analysis/gradcheck_sweep.h"
#include "headlab.h"

/* The sweep's steps: 1e-1 down to 1e-8. */
#define SWEEP_FROM_DECADE 1
#define SWEEP_TO_DECADE 8
#define MAX_PER_DECADE 4
#define MAX_STEPS ((SWEEP_TO_DECADE - SWEEP_FROM_DECADE) * MAX_PER_DECADE + 1)

typedef struct {
    bool *chosen;           /* per case, from --op; NULL: every case */
    bool sweep;
    int per_decade;
    hl_gradcheck_opts check;
    bool tolerance_given;   /* --eps, --atol or --rtol */
    const char *csv;
} options;

static void usage(FILE *f)
{
    hl_gradcheck_opts d = hl_gradcheck_defaults();
    fprintf(f,
            "usage: gradcheck [--op NAME] [--eps E] [--atol A] [--rtol R] [--csv FILE]\n"
            "       gradcheck --sweep [--op NAME] [--per-decade N] [--csv FILE]\n"
            "Checks the analytic gradient of every op, the MHA module and a 2-layer GPT\n"
            "against central finite differences (odd shapes, seeded inputs) and prints\n"
            "op, input, shape, max abs error, max rel error and pass/fail per input.\n"
            "An element passes when |analytic - numeric| <= atol + rtol*|numeric|.\n"
            "This binary: hl_real = %s.\n"
            "  --op NAME        only this op; may be repeated (an unknown name lists them)\n"
            "  --eps E          finite-difference step (default %g)\n"
            "  --atol A         absolute tolerance (default %g)\n"
            "  --rtol R         relative tolerance (default %g)\n"
            "  --csv FILE       also write the table (or the sweep) as CSV\n"
            "  --sweep          max abs error per op for steps 1e-1 .. 1e-8 instead of\n"
            "                   the table; * marks each op's best step\n"
            "  --per-decade N   steps per decade in the sweep, 1..%d (default 1)\n"
            "Exit status: 0 all pass, 1 a check fails, 2 bad flags or an unwritable FILE.\n",
            HL_REAL_NAME, d.eps, d.atol, d.rtol, MAX_PER_DECADE);
}

static void list_ops(FILE *f)
{
    fprintf(f, "the ops are:");
    for (int i = 0; i < hl_gradcheck_case_count(); i++)
        fprintf(f, "%s %s", i ? "," : "", hl_gradcheck_case_name(i));
    fprintf(f, "\n");
}

static double parse_real(const char *flag, const char *value, double lo, bool lo_open, double hi)
{
    char *end;
    errno = 0;
    double v = value ? strtod(value, &end) : 0;
    if (!value || !*value || *end || errno || !isfinite(v) || v < lo || (lo_open && v == lo) ||
        v > hi) {
        fprintf(stderr, "gradcheck: %s needs a number in %s%g, %g], got %s\n", flag,
                lo_open ? "(" : "[", lo, hi, value ? value : "nothing");
        exit(2);
    }
    return v;
}

static int parse_int(const char *flag, const char *value, int lo, int hi)
{
    char *end;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || !*value || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "gradcheck: %s needs an integer in %d..%d, got %s\n", flag, lo, hi,
                value ? value : "nothing");
        exit(2);
    }
    return (int)v;
}

static options parse_options(int argc, char **argv)
{
    options o = {.check = hl_gradcheck_defaults()};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--op") && v) {
            int op = hl_gradcheck_case_find(v);
            i++;
            if (op < 0) {
                fprintf(stderr, "gradcheck: no op called \"%s\"; ", v);
                list_ops(stderr);
                exit(2);
            }
            if (!o.chosen)
                o.chosen = calloc((size_t)hl_gradcheck_case_count(), sizeof *o.chosen);
            if (!o.chosen) {
                fprintf(stderr, "gradcheck: out of memory\n");
                exit(1);
            }
            o.chosen[op] = true;
        } else if (!strcmp(a, "--eps")) {
            o.check.eps = parse_real(a, v, 0, true, 1), i++, o.tolerance_given = true;
        } else if (!strcmp(a, "--atol")) {
            o.check.atol = parse_real(a, v, 0, false, 1e6), i++, o.tolerance_given = true;
        } else if (!strcmp(a, "--rtol")) {
            o.check.rtol = parse_real(a, v, 0, false, 1e6), i++, o.tolerance_given = true;
        } else if (!strcmp(a, "--csv") && v) {
            o.csv = v, i++;
        } else if (!strcmp(a, "--sweep")) {
            o.sweep = true;
        } else if (!strcmp(a, "--per-decade")) {
            o.per_decade = parse_int(a, v, 1, MAX_PER_DECADE), i++;
        } else {
            fprintf(stderr, "gradcheck: unknown or incomplete option %s\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (o.sweep && o.tolerance_given) {
        fprintf(stderr, "gradcheck: --eps, --atol and --rtol set up the table; a --sweep "
                        "tries every step and passes or fails nothing\n");
        exit(2);
    }
    if (!o.sweep && o.per_decade) {
        fprintf(stderr, "gradcheck: --per-decade goes with --sweep\n");
        exit(2);
    }
    if (!o.per_decade)
        o.per_decade = 1;
    return o;
}

/* ---- CSV, written to a temporary file and renamed over the path at the end ---- */

typedef struct {
    FILE *f;
    const char *path;
    char tmp[4200];
} csv_file;

/* Opens the temporary file first, so a path that cannot be written stops the
 * program before any work. */
static void csv_open(csv_file *c, const char *path)
{
    c->path = path;
    c->f = NULL;
    if (!path)
        return;
    if (snprintf(c->tmp, sizeof c->tmp, "%s.tmp.%ld", path, (long)getpid()) >=
            (int)sizeof c->tmp ||
        !(c->f = fopen(c->tmp, "w"))) {
        fprintf(stderr, "gradcheck: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

/* 0, or 2 (with a message) when the file could not be completed. */
static int csv_close(csv_file *c)
{
    if (!c->f)
        return 0;
    bool ok = !ferror(c->f);
    ok &= fclose(c->f) == 0;
    ok = ok && rename(c->tmp, c->path) == 0;
    if (ok)
        return 0;
    fprintf(stderr, "gradcheck: cannot write %s: %s\n", c->path, strerror(errno));
    remove(c->tmp);
    return 2;
}

/* ---- the table ---- */

static size_t total_elements(const hl_gradcheck_case *c)
{
    size_t n = 0;
    for (int k = 0; k < c->n_inputs; k++)
        n += c->inputs[k]->numel;
    return n;
}

static bool chosen(const options *o, int i) { return !o->chosen || o->chosen[i]; }

/* Width of the op column: the longest name that will be printed. */
static int op_width(const options *o)
{
    int w = 2;
    for (int i = 0; i < hl_gradcheck_case_count(); i++)
        if (chosen(o, i))
            w = (int)fmax(w, (double)strlen(hl_gradcheck_case_name(i)));
    return w;
}

static int run_table(const options *o, hl_graph *g, csv_file *csv)
{
    const hl_gradcheck_opts *ck = &o->check;
    printf("gradcheck: analytic gradients against central differences, hl_real = %s\n"
           "eps %g; an element passes when |analytic - numeric| <= %g + %g*|numeric|\n\n",
           HL_REAL_NAME, ck->eps, ck->atol, ck->rtol);
    const int w = op_width(o);
    printf("%-*s  %-28s  %-10s  %9s  %9s  %s\n", w, "op", "input", "shape", "max abs", "max rel",
           "result");
    if (csv->f)
        fprintf(csv->f, "real,op,input,shape,eps,max_abs_err,max_rel_err,passed\n");
    int checks = 0, rows = 0, failed = 0;
    for (int i = 0; i < hl_gradcheck_case_count(); i++) {
        if (!chosen(o, i))
            continue;
        hl_gradcheck_case c;
        hl_error err = {0};
        hl_gradcheck_report r;
        if (hl_gradcheck_case_make(i, &c, &err) != HL_OK) {
            printf("%-*s  could not be set up: %s\n", w, hl_gradcheck_case_name(i), err.message);
            failed++;
            continue;
        }
        checks++;
        if (hl_gradcheck(g, c.fn, c.ctx, c.inputs, c.n_inputs, ck, &r) != HL_OK) {
            printf("%-*s  could not run: %s\n", w, c.name, hl_graph_message(g));
            failed++;
            hl_gradcheck_case_free(&c);
            continue;
        }
        for (int k = 0; k < r.n_inputs; k++) {
            const hl_gradcheck_input_report *in = &r.inputs[k];
            rows++;
            failed += !in->passed;
            printf("%-*s  %-28s  %-10s  %9.2e  %9.2e  %s\n", w, c.name, in->name, in->shape,
                   in->max_abs_err, in->max_rel_err, in->passed ? "pass" : "FAIL");
            if (!in->passed)
                printf("%-*s  worst element %zu: analytic %.9g, numeric %.9g\n", w, "",
                       in->worst_index, in->worst_analytic, in->worst_numeric);
            if (csv->f)
                fprintf(csv->f, "%s,%s,%s,\"%s\",%.6e,%.6e,%.6e,%d\n", HL_REAL_NAME, c.name,
                        in->name, in->shape, ck->eps, in->max_abs_err, in->max_rel_err,
                        in->passed);
        }
        hl_gradcheck_case_free(&c);
    }
    printf("\nmax rel = max |analytic - numeric| / max(|analytic|, |numeric|): about 1 where a\n"
           "gradient is 0 up to rounding (attention's key bias, which softmax cancels), hence\n"
           "the atol in the pass rule.\n");
    if (failed)
        printf("%d checks, %d inputs: %d FAILED\n", checks, rows, failed);
    else
        printf("%d checks, %d inputs: all passed\n", checks, rows);
    return failed ? 1 : 0;
}

/* ---- the sweep ---- */

static int sweep_steps(int per_decade, double *eps)
{
    int n = 0;
    for (int k = SWEEP_FROM_DECADE * per_decade; k <= SWEEP_TO_DECADE * per_decade; k++)
        eps[n++] = pow(10.0, -(double)k / per_decade);
    return n;
}

static int run_sweep(const options *o, hl_graph *g, csv_file *csv)
{
    double eps[MAX_STEPS];
    const int n = sweep_steps(o->per_decade, eps);
    const hl_gradcheck_opts d = hl_gradcheck_defaults();
    printf("gradcheck --sweep: max |analytic - numeric| over each op's inputs, per step;\n"
           "hl_real = %s (its default step is %g). * marks each op's best step.\n"
           "! marks steps below some inputs' resolution: x+eps and x-eps round to the same\n"
           "%s there, and those elements are left out.\n\n",
           HL_REAL_NAME, d.eps, HL_REAL_NAME);
    const int w = op_width(o);
    printf("%-*s", w, "op");
    for (int j = 0; j < n; j++)
        printf("  %-8.1e", eps[j]);
    printf("  %8s\n", "best");
    if (csv->f)
        fprintf(csv->f, "real,op,eps,max_abs_err,max_rel_err,lost,best\n");
    int errors = 0;
    for (int i = 0; i < hl_gradcheck_case_count(); i++) {
        if (!chosen(o, i))
            continue;
        hl_gradcheck_case c;
        hl_error err = {0};
        hl_gradcheck_sweep_point pts[MAX_STEPS];
        if (hl_gradcheck_case_make(i, &c, &err) != HL_OK) {
            printf("%-*s  could not be set up: %s\n", w, hl_gradcheck_case_name(i), err.message);
            errors++;
            continue;
        }
        if (hl_gradcheck_sweep(g, c.fn, c.ctx, c.inputs, c.n_inputs, eps, n, NULL, pts) !=
            HL_OK) {
            printf("%-*s  could not run: %s\n", w, c.name, hl_graph_message(g));
            errors++;
            hl_gradcheck_case_free(&c);
            continue;
        }
        const int best = hl_gradcheck_sweep_best(pts, n);
        const size_t all = total_elements(&c);
        printf("%-*s", w, c.name);
        for (int j = 0; j < n; j++) {
            if (pts[j].lost == all)
                printf("  %-8s", "lost");
            else
                printf("  %7.1e%c", pts[j].max_abs_err,
                       j == best ? '*' : pts[j].lost ? '!' : ' ');
            if (csv->f)
                fprintf(csv->f, "%s,%s,%.6e,%.6e,%.6e,%zu,%d\n", HL_REAL_NAME, c.name, eps[j],
                        pts[j].max_abs_err, pts[j].max_rel_err, pts[j].lost, j == best);
        }
        if (best >= 0)
            printf("  %8.1e\n", eps[best]);
        else
            printf("  %8s\n", "-");
        hl_gradcheck_case_free(&c);
    }
    return errors ? 1 : 0;
}

int main(int argc, char **argv)
{
    options o = parse_options(argc, argv);
    hl_graph *g = hl_graph_new(0);
    if (!g) {
        fprintf(stderr, "gradcheck: out of memory\n");
        return 1;
    }
    csv_file csv;
    csv_open(&csv, o.csv);
    int rc = o.sweep ? run_sweep(&o, g, &csv) : run_table(&o, g, &csv);
    hl_graph_free(g);
    free(o.chosen);
    int csv_rc = csv_close(&csv);
    return csv_rc ? csv_rc : rc;
}
