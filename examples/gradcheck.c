/*
 * gradcheck: every op, the attention module and a small GPT against central
 * finite differences (the catalogue of gradcheck/cases.h), as a table;
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

#include "cli/cli.h"
#include "gradcheck/cases.h"
#include "gradcheck/sweep.h"
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

/* The precision line is the build's, so the synopsis is made at run time. */
static hl_usage usage_of_build(char *synopsis, size_t size)
{
    snprintf(synopsis, size,
             "usage: gradcheck [--op NAME] [--eps E] [--atol A] [--rtol R] [--csv FILE]\n"
             "       gradcheck --sweep [--op NAME] [--per-decade N] [--csv FILE]\n"
             "Checks the analytic gradient of every op, the MHA module and a 2-layer GPT\n"
             "against central finite differences (odd shapes, seeded inputs) and prints\n"
             "op, input, shape, max abs error, max rel error and pass/fail per input.\n"
             "An element passes when |analytic - numeric| <= atol + rtol*|numeric|.\n"
             "This binary: hl_real = %s.\n", HL_REAL_NAME);
    return (hl_usage){synopsis,
                      "Exit status: 0 all pass, 1 a check fails, 2 bad flags or an unwritable "
                      "FILE.\n"};
}

static void list_ops(FILE *f)
{
    fprintf(f, "the ops are:");
    for (int i = 0; i < hl_gradcheck_case_count(); i++)
        fprintf(f, "%s %s", i ? "," : "", hl_gradcheck_case_name(i));
    fprintf(f, "\n");
}

/* The cases named by --op (NULL: every case); exits 2 on an unknown name. */
static bool *choose_cases(const hl_opt_list *ops)
{
    if (!ops->n)
        return NULL;
    bool *chosen = calloc((size_t)hl_gradcheck_case_count(), sizeof *chosen);
    if (!chosen) {
        fprintf(stderr, "gradcheck: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < ops->n; i++) {
        int op = hl_gradcheck_case_find(ops->item[i]);
        if (op < 0) {
            fprintf(stderr, "gradcheck: no op called \"%s\"; ", ops->item[i]);
            list_ops(stderr);
            exit(2);
        }
        chosen[op] = true;
    }
    return chosen;
}

static options parse_options(int argc, char **argv)
{
    options o = {.check = hl_gradcheck_defaults()};
    hl_opt_list ops = {0};
    bool eps = false, atol = false, rtol = false;
    const hl_opt opts[] = {
        HL_OPTION_LIST("op", &ops, "NAME",
                       "only this check; may be repeated (an unknown name lists them)",
                       .dflt = "every check"),
        HL_OPTION_REAL("eps", &o.check.eps, 0, 1, "E", "finite-difference step", .min_open = true,
                       .given = &eps),
        HL_OPTION_REAL("atol", &o.check.atol, 0, 1e6, "A", "absolute tolerance", .given = &atol),
        HL_OPTION_REAL("rtol", &o.check.rtol, 0, 1e6, "R", "relative tolerance", .given = &rtol),
        HL_OPTION_TEXT("csv", &o.csv, "FILE", "also write the table (or the sweep) as CSV"),
        HL_OPTION_FLAG("sweep", &o.sweep,
                       "max abs error per op for steps 1e-1 .. 1e-8 instead of the table; * "
                       "marks each op's best step"),
        HL_OPTION_INT("per-decade", &o.per_decade, 1, MAX_PER_DECADE, "N",
                      "steps per decade in the sweep", .dflt = "1"),
        {0},
    };
    char synopsis[1024];
    const hl_usage usage = usage_of_build(synopsis, sizeof synopsis);
    hl_cli_parse_or_exit("gradcheck", &usage, opts, argc, argv);
    o.tolerance_given = eps || atol || rtol;
    if (o.sweep && o.tolerance_given)
        hl_cli_bad_input("gradcheck", "--eps, --atol and --rtol set up the table; a --sweep "
                                      "tries every step and passes or fails nothing");
    if (!o.sweep && o.per_decade)
        hl_cli_bad_input("gradcheck", "--per-decade goes with --sweep");
    if (!o.per_decade)
        o.per_decade = 1;
    o.chosen = choose_cases(&ops);
    return o;
}

/* ---- CSV, written whole at the end or not at all ---- */

typedef struct {
    hl_atomic_file file;
    FILE *f; /* NULL without --csv */
} csv_file;

/* Creates the temporary file first, so a path that cannot be written stops
 * the program before any work. */
static void csv_open(csv_file *c, const char *path)
{
    c->f = NULL;
    if (!path)
        return;
    hl_error err = {0};
    if (hl_atomic_begin(&c->file, path, &err) != HL_OK)
        hl_cli_bad_input("gradcheck", "%s", err.message);
    c->f = c->file.f;
}

/* 0, or 2 (with a message) when the file could not be completed. */
static int csv_close(csv_file *c)
{
    if (!c->f)
        return 0;
    hl_error err = {0};
    if (hl_atomic_commit(&c->file, &err) == HL_OK)
        return 0;
    fprintf(stderr, "gradcheck: %s\n", err.message);
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
    hl_cli_init();
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
