/* Tests for ops/column_sums.c, the parameter gradients' column sums: against
 * the same sums written as plain loops, bit for bit, on shapes that cut the
 * columns into one, several and ragged blocks, at several thread counts
 * (which change the blocks' width) and on every kernel set. */
#ifdef _OPENMP
#include <omp.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"
#include "tests/testutil.h"

typedef struct {
    size_t rows;
    int cols;
} shape;

/* Rows, then columns past the widest block (1024) and past a vector; the
 * last is work enough (44,000 values) for the sums to run on several threads. */
static const shape shapes[] = {{1, 1},     {3, 17},   {37, 64},  {5, 300},
                               {9, 1100}, {2, 2100}, {40, 1100}};

static void fill(hl_real *x, size_t n, unsigned seed, double lo, double hi)
{
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (hl_real)(lo + (hi - lo) * hl_rng_uniform(&rng));
}

/* The sums as the ops wrote them before they shared a kernel: each column
 * over the rows in order, in double, then rounded and added. */
static void reference(const hl_real *dy, const hl_real *x, const double *mean, const double *rstd,
                      size_t step, size_t rows, int cols, hl_real *sum_dy, hl_real *sum_dxhat)
{
    for (int j = 0; j < cols; j++) {
        double sd = 0, sx = 0;
        for (size_t r = 0; r < rows; r++) {
            const double d = (double)dy[r * cols + j];
            sd += d;
            if (x) {
                const double m = mean ? mean[r * step] : 0;
                sx += d * (((double)x[r * cols + j] - m) * rstd[r * step]);
            }
        }
        if (sum_dy)
            sum_dy[j] += (hl_real)sd;
        if (x)
            sum_dxhat[j] += (hl_real)sx;
    }
}

/* The inputs of shape s: dy, x with an offset the mean must take out, and
 * rows' statistics laid out as LayerNorm's (mean, rstd) pairs. */
typedef struct {
    hl_real *dy, *x;
    double *stats;
} inputs;

static inputs inputs_make(shape s)
{
    const size_t n = s.rows * (size_t)s.cols;
    inputs in = {malloc(n * sizeof *in.dy), malloc(n * sizeof *in.x),
                 malloc(2 * s.rows * sizeof *in.stats)};
    ck_assert(in.dy && in.x && in.stats);
    fill(in.dy, n, 1, -1, 1);
    fill(in.x, n, 2, 999, 1001);
    for (size_t r = 0; r < s.rows; r++) {
        in.stats[2 * r] = 1000 + 0.01 * (double)r;
        in.stats[2 * r + 1] = 1.5 + 0.25 * (double)r;
    }
    return in;
}

static void inputs_free(inputs *in)
{
    free(in->dy);
    free(in->x);
    free(in->stats);
}

typedef void sums_fn(const hl_real *dy, const hl_real *x, const double *mean, const double *rstd,
                     size_t step, size_t rows, int cols, hl_real *sum_dy, hl_real *sum_dxhat);

/* Every form through sums: a bias's; LayerNorm's two sums together and x̂'s
 * alone; RMSNorm's (no mean). Into out: 5 vectors of s.cols sums, each
 * starting from 0.5; the fifth is scratch for the forms without dy's sum. */
static void all_forms(sums_fn *sums, shape s, const inputs *in, hl_real *out)
{
    const size_t c = (size_t)s.cols;
    const double *mean = in->stats, *rstd = in->stats + 1;
    for (size_t i = 0; i < 5 * c; i++)
        out[i] = (hl_real)0.5;
    sums(in->dy, NULL, NULL, NULL, 0, s.rows, s.cols, out, NULL);
    sums(in->dy, in->x, mean, rstd, 2, s.rows, s.cols, out + c, out + 2 * c);
    sums(in->dy, in->x, mean, rstd, 2, s.rows, s.cols, NULL, out + 3 * c);
    sums(in->dy, in->x, NULL, rstd, 2, s.rows, s.cols, NULL, out + 4 * c);
}

static void expect_same(const char *what, shape s, const hl_real *want, const hl_real *got,
                        size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(!memcmp(&want[i], &got[i], sizeof *got),
                      "%s, (%zu,%d): value %zu is %.9g, want %.9g", what, s.rows, s.cols, i,
                      (double)got[i], (double)want[i]);
}

/* hl_column_sums on the active set at 1, 4 and 7 threads against want. */
static void check_threads(shape s, const inputs *in, const hl_real *want, hl_real *got)
{
    const size_t c = 5 * (size_t)s.cols;
    const char *set = hl_isa_name(hl_isa_active());
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    for (int threads = 1; threads <= 7; threads += 3) {
        omp_set_num_threads(threads);
        all_forms(hl_column_sums, s, in, got);
        expect_same(set, s, want, got, c);
    }
    omp_set_num_threads(saved);
#else
    all_forms(hl_column_sums, s, in, got);
    expect_same(set, s, want, got, c);
#endif
}

START_TEST(test_column_sums_match_loops)
{
    const hl_isa before = hl_isa_active();
    hl_error err = {0};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const shape s = shapes[k];
        const size_t c = 5 * (size_t)s.cols;
        inputs in = inputs_make(s);
        hl_real *want = malloc(c * sizeof *want), *got = malloc(c * sizeof *got);
        ck_assert(want && got);
        all_forms(reference, s, &in, want);
        /* The mean matters: without it the x̂ sums would be far off. */
        ck_assert(fabs((double)want[3 * (size_t)s.cols] - (double)want[4 * (size_t)s.cols]) > 1);
        for (int i = 0; i < HL_ISA_COUNT; i++) {
            if (!hl_isa_supported((hl_isa)i))
                continue;
            ck_assert_int_eq(hl_isa_use((hl_isa)i, &err), HL_OK);
            check_threads(s, &in, want, got);
        }
        inputs_free(&in);
        free(want);
        free(got);
    }
    ck_assert_int_eq(hl_isa_use(before, &err), HL_OK);
}
END_TEST

Suite *column_sums_suite(void)
{
    Suite *s = suite_create("column_sums");
    TCase *tc = tcase_create("column_sums");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_column_sums_match_loops);
    suite_add_tcase(s, tc);
    return s;
}
