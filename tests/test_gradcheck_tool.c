/* Tests for the gradient-check research tool: the library pieces it is built
 * on (gradcheck/sweep.c, gradcheck/cases.c) and the program
 * build/gradcheck as a user runs it (HL_BUILD_DIR names the folder). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gradcheck/cases.h"
#include "gradcheck/sweep.h"
#include "ops/internal.h"
#include "tests/testutil.h"

#ifndef HL_BUILD_DIR
#define HL_BUILD_DIR "build"
#endif

#define TOOL HL_BUILD_DIR "/gradcheck"

/* A step that vanishes for inputs near 1: below half an ulp of 1. */
#ifdef HL_REAL_DOUBLE
#define VANISHING_STEP 1e-17
#else
#define VANISHING_STEP 1e-9
#endif

/* ---- hl_gradcheck_sweep ---- */

static hl_tensor *build_cube(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_mul(g, hl_mul(g, in[0], in[0]), in[0]);
}

static hl_tensor *build_bad_shape(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_matmul(g, in[0], in[0], 0); /* (3,5)·(3,5) does not fit */
}

START_TEST(test_sweep_truncation_error)
{
    /* For y = x³ the central difference is 3x² + h² exactly: the error is
     * h²·|w| for each element, so halving h divides it by 4. */
    hl_tensor *x = tu_random("x", 2, (int[]){3, 5}, true, 1, 0.5, 1.5);
    hl_tensor *before = tu_random("x", 2, (int[]){3, 5}, false, 1, 0.5, 1.5);
    hl_graph *g = hl_graph_new(0);
    const double eps[] = {0.1, 0.05};
    hl_gradcheck_sweep_point pts[2];
    ck_assert_int_eq(hl_gradcheck_sweep(g, build_cube, NULL, &x, 1, eps, 2, NULL, pts), HL_OK);
    ck_assert(pts[0].eps == 0.1 && pts[1].eps == 0.05);
    ck_assert_uint_eq(pts[0].lost, 0);
    ck_assert_uint_eq(pts[1].lost, 0);
    ck_assert(pts[0].max_abs_err > 1e-3 && pts[0].max_abs_err <= 1e-2 * 1.0001);
    double ratio = pts[0].max_abs_err / pts[1].max_abs_err;
    ck_assert_msg(fabs(ratio - 4) < 0.05, "error ratio %g, wanted 4", ratio);
    ck_assert(pts[0].max_rel_err > 0);
    ck_assert_int_eq(hl_gradcheck_sweep_best(pts, 2), 1);
    /* The inputs are left as they were. */
    ck_assert_mem_eq(x->data, before->data, x->numel * sizeof(hl_real));
    hl_tensor_free(x);
    hl_tensor_free(before);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_sweep_lost_steps)
{
    /* x+eps and x-eps are the same hl_real for every x in [1, 2): all lost,
     * and the best point must be the one that was not. */
    hl_tensor *x = tu_random("x", 1, (int[]){7}, true, 2, 1, 2);
    hl_graph *g = hl_graph_new(0);
    const double eps[] = {VANISHING_STEP, 1e-2};
    hl_gradcheck_sweep_point pts[2];
    ck_assert_int_eq(hl_gradcheck_sweep(g, build_cube, NULL, &x, 1, eps, 2, NULL, pts), HL_OK);
    ck_assert_uint_eq(pts[0].lost, 7);
    ck_assert_uint_eq(pts[1].lost, 0);
    ck_assert_int_eq(hl_gradcheck_sweep_best(pts, 2), 1);
    ck_assert_int_eq(hl_gradcheck_sweep_best(pts, 1), -1);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_sweep_best)
{
    const hl_gradcheck_sweep_point pts[] = {
        {.eps = 1e-1, .max_abs_err = 3e-3},
        {.eps = 1e-2, .max_abs_err = 2e-5},
        {.eps = 1e-3, .max_abs_err = 2e-5},  /* a tie: the first wins */
        {.eps = 1e-4, .max_abs_err = 1e-9, .lost = 2},
        {.eps = 1e-5, .max_abs_err = 4e-2},
    };
    ck_assert_int_eq(hl_gradcheck_sweep_best(pts, 5), 1);
    ck_assert_int_eq(hl_gradcheck_sweep_best(pts, 1), 0);
    ck_assert_int_eq(hl_gradcheck_sweep_best(pts + 3, 1), -1);
    ck_assert_int_eq(hl_gradcheck_sweep_best(pts, 0), -1);
}
END_TEST

START_TEST(test_sweep_errors)
{
    hl_tensor *x = tu_random("x", 2, (int[]){3, 5}, true, 3, -1, 1);
    hl_graph *g = hl_graph_new(0);
    hl_gradcheck_sweep_point pts[2];
    const double good[] = {1e-2, 1e-3};
    ck_assert_int_eq(hl_gradcheck_sweep(g, build_cube, NULL, &x, 1, good, 0, NULL, pts),
                     HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(hl_graph_message(g), "gradcheck sweep"));
    const double bad[][2] = {{1e-2, -1e-3}, {0, 1e-3}, {1e-2, NAN}, {INFINITY, 1e-2}};
    for (int i = 0; i < 4; i++) {
        hl_graph_reset(g);
        ck_assert_int_eq(hl_gradcheck_sweep(g, build_cube, NULL, &x, 1, bad[i], 2, NULL, pts),
                         HL_ERR_ARG);
        ck_assert_ptr_nonnull(strstr(hl_graph_message(g), "not a finite positive"));
    }
    hl_graph_reset(g);
    ck_assert_int_eq(hl_gradcheck_sweep(g, build_cube, NULL, &x, 1, good, 2, NULL, NULL),
                     HL_ERR_ARG);
    /* A function that fails: its error comes back. */
    hl_graph_reset(g);
    ck_assert_int_eq(hl_gradcheck_sweep(g, build_bad_shape, NULL, &x, 1, good, 2, NULL, pts),
                     HL_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(hl_graph_message(g), "matmul"));
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

/* ---- the catalogue ---- */

/* The op a case checks: the one its name is, or whose name comes before a
 * '+' in it (a mask is checked through a softmax: "mask_causal+softmax"). */
static int case_op(const char *name)
{
    const size_t len = strcspn(name, "+");
    for (int op = 0; op < HL_OP_COUNT; op++) {
        const char *op_name = hl_op_get((hl_op)op)->name;
        if (strlen(op_name) == len && !strncmp(op_name, name, len))
            return op;
    }
    return -1;
}

START_TEST(test_cases_names)
{
    /* The cases that are not named after an op: other forms of one (matmul's
     * transpose flags; partial rotary, grouped heads and smeared keys within
     * documents, recorded as rope, qkv_heads and smear) and the modules built
     * of ops. */
    static const char *const more[] = {"matmul_ta",         "matmul_tb",       "matmul_tab",
                                       "rope_partial",      "qkv_heads_grouped", "smear_docs",
                                       "mha_self_causal",   "mha_cross_padding", "gpt",
                                       "gpt_recipe"};
    const int n_more = (int)(sizeof more / sizeof more[0]);
    const int n = hl_gradcheck_case_count();
    bool checked[HL_OP_COUNT] = {false};
    for (int i = 0; i < n; i++) {
        const char *name = hl_gradcheck_case_name(i);
        ck_assert_int_eq(hl_gradcheck_case_find(name), i); /* unique */
        const int op = case_op(name);
        if (op >= 0) {
            checked[op] = true;
            continue;
        }
        bool listed = false;
        for (int j = 0; j < n_more; j++)
            listed |= !strcmp(name, more[j]);
        ck_assert_msg(listed, "case %s names no op and is not listed", name);
    }
    for (int j = 0; j < n_more; j++)
        ck_assert_msg(hl_gradcheck_case_find(more[j]) >= 0, "no case %s", more[j]);
    /* Every differentiable op of the list in core/op_list.h has its case. */
    for (int op = 0; op < HL_OP_COUNT; op++)
        ck_assert_msg(checked[op] || !hl_op_get((hl_op)op)->backward, "no case checks %s",
                      hl_op_get((hl_op)op)->name);
    ck_assert_int_eq(hl_gradcheck_case_find("softmax2"), -1);
    ck_assert_int_eq(hl_gradcheck_case_find(NULL), -1);
    ck_assert_ptr_null(hl_gradcheck_case_name(-1));
    ck_assert_ptr_null(hl_gradcheck_case_name(n));
}
END_TEST

START_TEST(test_cases_make)
{
    hl_graph *g = hl_graph_new(0);
    for (int i = 0; i < hl_gradcheck_case_count(); i++) {
        hl_error err = {0};
        hl_gradcheck_case a, b;
        ck_assert_msg(hl_gradcheck_case_make(i, &a, &err) == HL_OK, "%s", err.message);
        ck_assert_msg(hl_gradcheck_case_make(i, &b, &err) == HL_OK, "%s", err.message);
        ck_assert_str_eq(a.name, hl_gradcheck_case_name(i));
        ck_assert_ptr_nonnull(a.fn);
        ck_assert(a.n_inputs >= 1 && a.n_inputs <= HL_GRADCHECK_MAX_INPUTS);
        ck_assert_int_eq(a.n_inputs, b.n_inputs);
        for (int k = 0; k < a.n_inputs; k++) {
            ck_assert(a.inputs[k]->requires_grad);
            /* Seeded: the same numbers every time. */
            ck_assert_uint_eq(a.inputs[k]->numel, b.inputs[k]->numel);
            ck_assert_mem_eq(a.inputs[k]->data, b.inputs[k]->data,
                             a.inputs[k]->numel * sizeof(hl_real));
        }
        /* Every case passes in this build with the default tolerances. */
        hl_gradcheck_report r;
        ck_assert_msg(hl_gradcheck(g, a.fn, a.ctx, a.inputs, a.n_inputs, NULL, &r) == HL_OK,
                      "%s: %s", a.name, hl_graph_message(g));
        ck_assert_msg(r.passed, "%s fails", a.name);
        for (int k = 0; k < r.n_inputs; k++)
            ck_assert(r.inputs[k].checked);
        hl_gradcheck_case_free(&a);
        hl_gradcheck_case_free(&b);
        ck_assert_ptr_null(a.data);
        hl_gradcheck_case_free(&a); /* a freed (zeroed) case: nothing to do */
    }
    hl_graph_free(g);
}
END_TEST

START_TEST(test_cases_bad_index)
{
    hl_error err = {0};
    hl_gradcheck_case c;
    ck_assert_int_eq(hl_gradcheck_case_make(-1, &c, &err), HL_ERR_ARG);
    ck_assert_ptr_null(c.data);
    ck_assert_ptr_nonnull(strstr(err.message, "no case -1"));
    hl_error_clear(&err);
    ck_assert_int_eq(hl_gradcheck_case_make(hl_gradcheck_case_count(), &c, &err), HL_ERR_ARG);
    ck_assert_ptr_null(c.data);
}
END_TEST

/* ---- the program ---- */

static char out[65536];

/* The number of table rows: one per input of every case. */
static int catalogue_inputs(void)
{
    int n = 0;
    for (int i = 0; i < hl_gradcheck_case_count(); i++) {
        hl_error err = {0};
        hl_gradcheck_case c;
        ck_assert_int_eq(hl_gradcheck_case_make(i, &c, &err), HL_OK);
        n += c.n_inputs;
        hl_gradcheck_case_free(&c);
    }
    return n;
}

/* Table rows end in " pass" or " FAIL"; counts them, and those starting with op. */
static int count_rows(const char *text, const char *result, const char *op, int *with_op)
{
    int n = 0;
    *with_op = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t len = strlen(line);
        if (len < 5 || strcmp(line + len - 4, result) || line[len - 5] != ' ')
            continue;
        n++;
        size_t op_len = strlen(op);
        *with_op += !strncmp(line, op, op_len) && line[op_len] == ' ';
    }
    free(copy);
    return n;
}

START_TEST(test_tool_all_pass)
{
    int rc = tu_run(TOOL, out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "hl_real = " HL_REAL_NAME));
    int with_op;
    ck_assert_int_eq(count_rows(out, "FAIL", "", &with_op), 0);
    ck_assert_int_eq(count_rows(out, "pass", "", &with_op), catalogue_inputs());
    for (int i = 0; i < hl_gradcheck_case_count(); i++) {
        count_rows(out, "pass", hl_gradcheck_case_name(i), &with_op);
        ck_assert_msg(with_op > 0, "no row for %s", hl_gradcheck_case_name(i));
    }
    ck_assert_ptr_nonnull(strstr(out, "all passed"));
}
END_TEST

START_TEST(test_tool_one_op)
{
    int rc = tu_run(TOOL " --op softmax", out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    int with_op;
    int rows = count_rows(out, "pass", "softmax", &with_op);
    ck_assert_int_eq(rows, 1);
    ck_assert_int_eq(with_op, 1);
    ck_assert_ptr_null(strstr(out, "mask_causal"));
    /* --op again adds an op. */
    rc = tu_run(TOOL " --op softmax --op layernorm", out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_int_eq(count_rows(out, "pass", "layernorm", &with_op), 4);
    ck_assert_int_eq(with_op, 3);
    /* A tolerance nothing can meet fails, with exit status 1 and the worst element. */
    rc = tu_run(TOOL " --op gelu --atol 0 --rtol 0", out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, out);
    ck_assert_int_eq(count_rows(out, "FAIL", "gelu", &with_op), 1);
    ck_assert_ptr_nonnull(strstr(out, "worst element"));
    ck_assert_ptr_nonnull(strstr(out, "1 FAILED"));
}
END_TEST

static void expect_exit(const char *command, int code, const char *fragment)
{
    int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == code, "%s: exit %d, wanted %d; said: %s", command, rc, code, out);
    ck_assert_msg(strstr(out, fragment), "%s: \"%s\" lacks \"%s\"", command, out, fragment);
}

START_TEST(test_tool_bad_flags)
{
    expect_exit(TOOL " --op nosuchop", 2, "mask_causal+softmax");
    expect_exit(TOOL " --op nosuchop", 2, "nosuchop");
    expect_exit(TOOL " --op", 2, "--op needs a value");
    expect_exit(TOOL " --bogus", 2, "unknown option --bogus");
    expect_exit(TOOL " --eps 0", 2, "--eps");
    expect_exit(TOOL " --eps abc", 2, "--eps");
    expect_exit(TOOL " --eps 1e-3x", 2, "--eps");
    expect_exit(TOOL " --atol -1", 2, "--atol");
    expect_exit(TOOL " --rtol nan", 2, "--rtol");
    expect_exit(TOOL " --sweep --eps 1e-3", 2, "--sweep");
    expect_exit(TOOL " --per-decade 2", 2, "--sweep");
    expect_exit(TOOL " --sweep --per-decade 9", 2, "--per-decade");
    expect_exit(TOOL " --help", 0, "--sweep");
}
END_TEST

static char temp_dir[64];

static void make_temp_dir(void)
{
    strcpy(temp_dir, "/tmp/headlab-gradcheck-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(temp_dir));
}

static void remove_temp_dir(void)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", temp_dir);
    ck_assert_int_eq(system(command), 0);
}

/* Reads a whole (small) file into out. */
static void read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
}

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    return n;
}

START_TEST(test_tool_csv)
{
    make_temp_dir();
    char command[1024], path[256];
    snprintf(path, sizeof path, "%s/table.csv", temp_dir);
    snprintf(command, sizeof command, TOOL " --csv %s", path);
    ck_assert_int_eq(tu_run(command, out, sizeof out), 0);
    read_file(path);
    ck_assert_msg(!strncmp(out, "real,op,input,shape,eps,max_abs_err,max_rel_err,passed\n", 55),
                  "header: %.80s", out);
    ck_assert_int_eq(count_lines(out), 1 + catalogue_inputs());
    ck_assert_ptr_nonnull(strstr(out, "\n" HL_REAL_NAME ",layernorm,gamma,\"(17)\","));
    ck_assert_ptr_null(strstr(out, ",0\n")); /* every row passed */

    /* Bad flags leave an existing file alone; so does a path that cannot be written. */
    FILE *f = fopen(path, "w");
    fputs("keep me\n", f);
    fclose(f);
    snprintf(command, sizeof command, TOOL " --csv %s --eps 0", path);
    ck_assert_int_eq(tu_run(command, out, sizeof out), 2);
    read_file(path);
    ck_assert_str_eq(out, "keep me\n");
    snprintf(command, sizeof command, TOOL " --csv %s/missing/dir/t.csv", temp_dir);
    expect_exit(command, 2, "cannot write");
    remove_temp_dir();
}
END_TEST

/* One sweep row read back from the CSV. */
typedef struct {
    double eps, max_abs_err;
    unsigned long lost;
    int best;
} sweep_row;

static int read_sweep_csv(const char *path, const char *op, sweep_row *rows, int max)
{
    read_file(path);
    ck_assert(!strncmp(out, "real,op,eps,max_abs_err,max_rel_err,lost,best\n", 46));
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char real[16], name[64];
        double rel;
        sweep_row r;
        if (sscanf(line, "%15[^,],%63[^,],%lf,%lf,%lf,%lu,%d", real, name, &r.eps,
                   &r.max_abs_err, &rel, &r.lost, &r.best) != 7)
            continue;
        ck_assert_str_eq(real, HL_REAL_NAME);
        ck_assert_str_eq(name, op);
        ck_assert_int_lt(n, max);
        rows[n++] = r;
    }
    return n;
}

START_TEST(test_tool_sweep_gelu)
{
    make_temp_dir();
    char command[1024], path[256];
    snprintf(path, sizeof path, "%s/sweep.csv", temp_dir);
    snprintf(command, sizeof command, TOOL " --sweep --op gelu --csv %s", path);
    int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "hl_real = " HL_REAL_NAME));
    ck_assert_ptr_nonnull(strchr(out, '*'));
    ck_assert_ptr_null(strstr(out, "layernorm"));

    sweep_row rows[8];
    ck_assert_int_eq(read_sweep_csv(path, "gelu", rows, 8), 8);
    int best = -1;
    for (int j = 0; j < 8; j++) {
        ck_assert(fabs(rows[j].eps / pow(10, -(j + 1)) - 1) < 1e-6); /* 1e-1 .. 1e-8 */
        if (rows[j].best) {
            ck_assert_int_eq(best, -1);
            best = j;
        }
    }
    ck_assert_int_ge(best, 0);
    double e_best = rows[best].max_abs_err;
    /* Truncation: the largest step is far worse than the best. */
    ck_assert_msg(rows[0].max_abs_err > 10 * e_best, "1e-1: %g, best: %g", rows[0].max_abs_err,
                  e_best);
    /* Rounding: so is the smallest, and there it has grown step after step. */
    ck_assert_msg(rows[7].max_abs_err > 10 * e_best, "1e-8: %g, best: %g", rows[7].max_abs_err,
                  e_best);
#ifdef HL_REAL_DOUBLE
    ck_assert_msg(rows[best].eps <= 1e-4 && rows[best].eps >= 1e-6, "best %g", rows[best].eps);
    ck_assert_uint_eq(rows[7].lost, 0);
#else
    ck_assert_msg(rows[best].eps <= 1e-2 && rows[best].eps >= 1e-3, "best %g", rows[best].eps);
    ck_assert_uint_gt(rows[7].lost, 0); /* 1e-8 is below float's resolution near 1 */
#endif

    /* Half decades: 15 steps, 1e-1 to 1e-8. */
    snprintf(command, sizeof command, TOOL " --sweep --op gelu --per-decade 2 --csv %s", path);
    ck_assert_int_eq(tu_run(command, out, sizeof out), 0);
    sweep_row fine[15];
    ck_assert_int_eq(read_sweep_csv(path, "gelu", fine, 15), 15);
    ck_assert(fabs(fine[1].eps / pow(10, -1.5) - 1) < 1e-6);
    ck_assert(fabs(fine[14].eps / 1e-8 - 1) < 1e-6);
    remove_temp_dir();
}
END_TEST

Suite *gradcheck_tool_suite(void)
{
    Suite *s = suite_create("gradcheck_tool");
    TCase *lib = tcase_create("library");
    tcase_add_test(lib, test_sweep_truncation_error);
    tcase_add_test(lib, test_sweep_lost_steps);
    tcase_add_test(lib, test_sweep_best);
    tcase_add_test(lib, test_sweep_errors);
    tcase_add_test(lib, test_cases_names);
    tcase_add_test(lib, test_cases_make);
    tcase_add_test(lib, test_cases_bad_index);
    suite_add_tcase(s, lib);
    TCase *tool = tcase_create("program");
    tcase_set_timeout(tool, 60);
    tcase_add_test(tool, test_tool_all_pass);
    tcase_add_test(tool, test_tool_one_op);
    tcase_add_test(tool, test_tool_bad_flags);
    tcase_add_test(tool, test_tool_csv);
    tcase_add_test(tool, test_tool_sweep_gelu);
    suite_add_tcase(s, tool);
    return s;
}
