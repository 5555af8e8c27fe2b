/* Tests for analysis/linalg.c: eigenvalues of matrices whose spectrum is known
 * by construction (rotations, similarity transforms of triangular matrices). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/linalg.h"
#include "tests/testutil.h"

static int by_re_im(const void *pa, const void *pb)
{
    const double *a = pa, *b = pb;
    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    return (a[1] > b[1]) - (a[1] < b[1]);
}

/* Fails unless the eigenvalues of a (n,n) are `want` (n pairs re, im), up to order. */
static void expect_spectrum(int n, const double *a, double *want)
{
    double re[16], im[16], got[32];
    hl_error err = {0};
    ck_assert_int_eq(hl_eigenvalues(n, a, re, im, &err), HL_OK);
    for (int i = 0; i < n; i++) {
        got[2 * i] = round(re[i] * 1e6) / 1e6;
        got[2 * i + 1] = round(im[i] * 1e6) / 1e6;
    }
    qsort(got, (size_t)n, 2 * sizeof(double), by_re_im);
    qsort(want, (size_t)n, 2 * sizeof(double), by_re_im);
    for (int i = 0; i < 2 * n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) < 1e-5, "eigenvalue %d: %g vs %g", i / 2, got[i],
                      want[i]);
}

START_TEST(test_rotation_has_imaginary_pair)
{
    double a[4] = {0, -1, 1, 0}, want[4] = {0, -1, 0, 1};
    expect_spectrum(2, a, want);
}
END_TEST

/* Q·T·Qᵀ with Q a Householder reflection: the spectrum of T, a triangular
 * matrix with a 2x2 rotation-scaling block (eigenvalues 0.5 ± 2i). */
START_TEST(test_similar_matrices_share_eigenvalues)
{
    enum { N = 7 };
    double t[N * N] = {0}, q[N * N], qt[N * N], a[N * N], v[N];
    const double diag[N] = {3, -2, 1, 0.25, -0.75, 0, 0};
    hl_rng rng;
    hl_rng_seed(&rng, 3);
    for (int i = 0; i < N; i++)
        for (int j = i; j < N; j++)
            t[i * N + j] = i == j ? diag[i] : hl_rng_uniform(&rng) - 0.5;
    t[5 * N + 5] = t[6 * N + 6] = 0.5;
    t[5 * N + 6] = -2;
    t[6 * N + 5] = 2;
    double norm = 0;
    for (int i = 0; i < N; i++) {
        v[i] = hl_rng_uniform(&rng) - 0.5;
        norm += v[i] * v[i];
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            q[i * N + j] = (i == j) - 2 * v[i] * v[j] / norm;
    hl_matmul_d(N, N, N, q, 0, t, 0, qt);
    hl_matmul_d(N, N, N, qt, 0, q, 1, a);
    double want[2 * N] = {3, 0, -2, 0, 1, 0, 0.25, 0, -0.75, 0, 0.5, 2, 0.5, -2};
    expect_spectrum(N, a, want);
}
END_TEST

START_TEST(test_zero_one_by_one_and_bad_input)
{
    double zero[9] = {0}, want0[6] = {0}, one[1] = {-4}, want1[2] = {-4, 0};
    expect_spectrum(3, zero, want0);
    expect_spectrum(1, one, want1);
    double bad[4] = {1, NAN, 0, 1}, re[2], im[2];
    hl_error err = {0};
    ck_assert_int_eq(hl_eigenvalues(2, bad, re, im, &err), HL_ERR_NUMERIC);
    ck_assert_ptr_nonnull(strstr(err.message, "NaN"));
    hl_error_clear(&err);
    ck_assert_int_eq(hl_eigenvalues(0, bad, re, im, &err), HL_ERR_ARG);
}
END_TEST

/* A head's OV circuit (32,32) from a charlm model (perl text, speedrun recipe
 * with AdamW, step 200), on which the QR iteration once cycled among its tiny
 * eigenvalues until the iteration limit: it must converge, to eigenvalues
 * whose sum is the trace and whose squares sum to trace(A²). */
START_TEST(test_low_rank_circuit_converges)
{
    enum { N = 32 };
    double a[N * N], re[N], im[N];
    FILE *f = fopen("tests/fixtures/linalg/ov_circuit_32.txt", "r");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < N * N; i++)
        ck_assert_int_eq(fscanf(f, "%lf", &a[i]), 1);
    fclose(f);
    hl_error err = {0};
    ck_assert_msg(hl_eigenvalues(N, a, re, im, &err) == HL_OK, "%s", err.message);
    double trace = 0, trace2 = 0, sum = 0, sum_im = 0, sum2 = 0, norm = 0;
    for (int i = 0; i < N; i++) {
        trace += a[i * N + i];
        for (int k = 0; k < N; k++)
            trace2 += a[i * N + k] * a[k * N + i];
        sum += re[i];
        sum_im += im[i];
        sum2 += re[i] * re[i] - im[i] * im[i];
    }
    for (int i = 0; i < N * N; i++)
        norm += a[i] * a[i];
    ck_assert_msg(fabs(sum - trace) < 1e-9 * sqrt(norm), "sum %.12g, trace %.12g", sum, trace);
    ck_assert_msg(fabs(sum_im) < 1e-9 * sqrt(norm), "imaginary parts sum to %g", sum_im);
    ck_assert_msg(fabs(sum2 - trace2) < 1e-8 * norm, "sum of squares %.12g, trace(A²) %.12g",
                  sum2, trace2);
}
END_TEST

START_TEST(test_matmul_with_transposes)
{
    const double a[6] = {1, 2, 3, 4, 5, 6}; /* (2,3) */
    const double b[6] = {1, 0, 0, 1, 1, 1}; /* (3,2) */
    double c[4], ct[4];
    hl_matmul_d(2, 2, 3, a, 0, b, 0, c);
    ck_assert(c[0] == 4 && c[1] == 5 && c[2] == 10 && c[3] == 11);
    /* aᵀ stored (3,2) and bᵀ stored (2,3) give the same product. */
    const double at[6] = {1, 4, 2, 5, 3, 6}, bt[6] = {1, 0, 1, 0, 1, 1};
    hl_matmul_d(2, 2, 3, at, 1, bt, 1, ct);
    ck_assert(ct[0] == 4 && ct[1] == 5 && ct[2] == 10 && ct[3] == 11);
    ck_assert(hl_dot_d(a, b, 6) == 1 + 4 + 5 + 6);
}
END_TEST

Suite *linalg_suite(void)
{
    Suite *s = suite_create("linalg");
    TCase *tc = tcase_create("eigenvalues");
    tcase_add_test(tc, test_rotation_has_imaginary_pair);
    tcase_add_test(tc, test_similar_matrices_share_eigenvalues);
    tcase_add_test(tc, test_zero_one_by_one_and_bad_input);
    tcase_add_test(tc, test_low_rank_circuit_converges);
    tcase_add_test(tc, test_matmul_with_transposes);
    suite_add_tcase(s, tc);
    return s;
}
