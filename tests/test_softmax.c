/* Tests for ops/softmax.c: softmax over the last dim. */
#include <math.h>
#include <stdlib.h>

#include "ops/internal.h"
#include "tests/testutil.h"

static hl_tensor *build_softmax(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_softmax(g, in[0]);
}

/* The textbook formula in double, rows of n values; -inf entries give 0 and an
 * all -inf row gives zeros. Subtracting the max keeps exp(1000) finite. */
static void naive_softmax(const hl_real *x, double *y, size_t rows, int n)
{
    for (size_t r = 0; r < rows; r++) {
        const hl_real *xr = x + r * n;
        double max = -INFINITY, sum = 0;
        for (int j = 0; j < n; j++)
            max = fmax(max, (double)xr[j]);
        for (int j = 0; j < n; j++) {
            y[r * n + j] = max == -INFINITY ? 0 : exp((double)xr[j] - max);
            sum += y[r * n + j];
        }
        for (int j = 0; j < n && sum > 0; j++)
            y[r * n + j] /= sum;
    }
}

static void assert_softmax_close(const hl_tensor *x, const hl_tensor *y, double tol)
{
    const int n = x->shape[x->rank - 1];
    double *want = malloc(x->numel * sizeof *want);
    naive_softmax(x->data, want, x->numel / (size_t)n, n);
    for (size_t i = 0; i < x->numel; i++) {
        ck_assert_msg(!isnan((double)y->data[i]), "softmax: NaN at %zu", i);
        ck_assert_msg(fabs((double)y->data[i] - want[i]) <= tol,
                      "softmax: element %zu: %.9g vs %.9g", i, (double)y->data[i], want[i]);
    }
    free(want);
}

START_TEST(test_softmax_forward)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = tu_random("x", 3, (int[]){2, 3, 17}, false, 1, -5, 5);
    hl_tensor *y = hl_softmax(g, x);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->rank, 3);
    ck_assert_int_eq(y->shape[2], 17);
    assert_softmax_close(x, y, 1e-6);
    /* Each row sums to one. */
    for (int r = 0; r < 6; r++) {
        double sum = 0;
        for (int j = 0; j < 17; j++)
            sum += y->data[r * 17 + j];
        ck_assert_double_eq_tol(sum, 1.0, 1e-6);
    }
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_softmax_special_rows)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = hl_tensor_new("x", 2, (int[]){5, 4}, true);
    const hl_real v[5][4] = {
        {1000, 999, 998, 1000},                       /* exp overflows without the max */
        {-1000, -1001, -1000, -999},                  /* and underflows */
        {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, /* fully masked */
        {0.5f, -INFINITY, 2, -INFINITY},              /* partly masked */
        {3, 3, 3, 3},
    };
    for (int i = 0; i < 20; i++)
        x->data[i] = v[i / 4][i % 4];
    hl_tensor *y = hl_softmax(g, x);
    ck_assert(!hl_graph_failed(g));
    assert_softmax_close(x, y, 1e-6);
    /* Hand-computed: e^0 / (2 + e^-1 + e^-2) for the first row. */
    double d = 2 + exp(-1.0) + exp(-2.0);
    ck_assert_double_eq_tol(y->data[0], 1 / d, 1e-6);
    ck_assert_double_eq_tol(y->data[2], exp(-2.0) / d, 1e-6);
    for (int j = 0; j < 4; j++) {
        ck_assert(y->data[8 + j] == 0);
        ck_assert_double_eq_tol(y->data[16 + j], 0.25, 1e-7);
    }
    ck_assert(y->data[13] == 0 && y->data[15] == 0);
    ck_assert_double_eq_tol(y->data[12], 1 / (1 + exp(1.5)), 1e-6);

    /* Backward adds (onto the 0.25 already there) zero for the fully masked row
     * and the masked entries, elsewhere y ⊙ (dy - Σ dy·y), computed in double. */
    for (int i = 0; i < 20; i++)
        x->grad[i] = 0.25f;
    hl_real dy[20];
    for (int i = 0; i < 20; i++)
        dy[i] = (hl_real)(0.1 * (i % 7) - 0.3);
    ck_assert_int_eq(hl_graph_backward_from(g, y, dy), HL_OK);
    for (int r = 0; r < 5; r++) {
        double dot = 0;
        for (int j = 0; j < 4; j++)
            dot += (double)dy[r * 4 + j] * y->data[r * 4 + j];
        for (int j = 0; j < 4; j++) {
            double want = 0.25 + y->data[r * 4 + j] * (dy[r * 4 + j] - dot);
            ck_assert_msg(fabs((double)x->grad[r * 4 + j] - want) <= 1e-6,
                          "softmax backward: element %d: %.9g vs %.9g", r * 4 + j,
                          (double)x->grad[r * 4 + j], want);
        }
    }
    for (int j = 0; j < 4; j++)
        ck_assert(x->grad[8 + j] == 0.25f);
    ck_assert(x->grad[13] == 0.25f && x->grad[15] == 0.25f);
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

/* A NaN anywhere in a row makes the whole row NaN, as in PyTorch, also among
 * -inf masks; a fully masked row stays zeros. The NaN used to be skipped by
 * the max, and a row of NaN and -inf became zeros. */
START_TEST(test_softmax_nan_rows)
{
    hl_graph *g = hl_graph_new(0);
    enum { N = 19 }; /* a whole vector and a partial one */
    hl_tensor *x = hl_tensor_new("x", 2, (int[]){5, N}, false);
    for (int j = 0; j < N; j++) {
        x->data[0 * N + j] = NAN;                            /* all NaN */
        x->data[1 * N + j] = j == 3 ? NAN : -INFINITY;       /* NaN among masks */
        x->data[2 * N + j] = j == N - 1 ? NAN : (hl_real)j;  /* NaN last, in the tail */
        x->data[3 * N + j] = -INFINITY;                      /* fully masked */
        x->data[4 * N + j] = j == 0 ? NAN : -INFINITY;       /* NaN first */
    }
    hl_tensor *y = hl_softmax(g, x);
    ck_assert(!hl_graph_failed(g));
    for (int r = 0; r < 5; r++)
        for (int j = 0; j < N; j++) {
            const double v = (double)y->data[r * N + j];
            if (r == 3)
                ck_assert_msg(v == 0, "masked row: %g at %d", v, j);
            else
                ck_assert_msg(isnan(v), "row %d: %g at %d, want NaN", r, v, j);
        }
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_softmax_gradients)
{
    static const int shapes[][4] = {{1, 1, 1, 1}, {3, 17, 1, 1}, {2, 3, 5, 1}, {1, 3, 1, 7}};
    static const int ranks[] = {1, 2, 3, 4};
    for (int k = 0; k < 4; k++) {
        hl_tensor *x = tu_random("x", ranks[k], shapes[k], true, 10 + (uint64_t)k, -3, 3);
        tu_gradcheck("softmax", build_softmax, NULL, &x, 1);
        hl_tensor_free(x);
    }
    /* A wide row of large values: the max subtraction must not hurt the gradient. */
    hl_tensor *w = tu_random("x", 2, (int[]){3, 33}, true, 20, 995, 1000);
    tu_gradcheck("softmax (large values)", build_softmax, NULL, &w, 1);
    hl_tensor_free(w);
}
END_TEST

START_TEST(test_softmax_threads)
{
    hl_tensor *x = tu_random("x", 4, (int[]){4, 8, 64, 64}, true, 30, -4, 4);
    ck_assert(x->numel >= HL_PARALLEL_MIN_WORK); /* both really parallel */
    tu_check_threads_bitwise("softmax", build_softmax, NULL, &x, 1);
    hl_tensor *odd = tu_random("x", 2, (int[]){1025, 33}, true, 31, -4, 4);
    ck_assert(odd->numel >= HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("softmax (odd rows)", build_softmax, NULL, &odd, 1);
    hl_tensor_free(x);
    hl_tensor_free(odd);
}
END_TEST

START_TEST(test_softmax_errors)
{
    hl_graph *g = hl_graph_new(0);
    tu_expect_error(g, hl_softmax(g, NULL), "softmax", "NULL", NULL);
    hl_graph_reset(g);
    hl_graph *other = hl_graph_new(0);
    tu_expect_error(g, hl_softmax(g, &other->poison), "softmax", "poisoned", NULL);
    hl_graph_free(other);
    hl_graph_free(g);
}
END_TEST

Suite *softmax_suite(void)
{
    Suite *s = suite_create("softmax");
    TCase *tc = tcase_create("softmax");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_softmax_forward);
    tcase_add_test(tc, test_softmax_special_rows);
    tcase_add_test(tc, test_softmax_nan_rows);
    tcase_add_test(tc, test_softmax_gradients);
    tcase_add_test(tc, test_softmax_threads);
    tcase_add_test(tc, test_softmax_errors);
    suite_add_tcase(s, tc);
    return s;
}
