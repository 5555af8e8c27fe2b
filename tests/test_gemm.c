/* Tests for ops/gemm.c: the GEMM kernel against a naive triple loop in double. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/gemm.h"
#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define REAL_EPS DBL_EPSILON
#else
#define REAL_EPS FLT_EPSILON
#endif

/* Sizes straddling the micro-kernel's tiles (at most 16 rows and 32 columns)
 * and the transposing packers' 8- and 16-wide blocks. */
static const int sizes[] = {1, 3, 17, 33, 65};
#define N_SIZES (int)(sizeof sizes / sizeof sizes[0])

static hl_real *random_values(size_t n, uint64_t seed)
{
    hl_real *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++)
        v[i] = (hl_real)(2 * hl_rng_uniform(&rng) - 1);
    return v;
}

typedef struct {
    bool ta, tb;
    int M, N, K;
    int lda, ldb, ldc;
    double alpha, beta;
} gemm_case;

/* Checks C (after the kernel) against alpha·op(A)·op(B) + beta·C0 computed in
 * double, allowing the rounding a K-term sum in hl_real can have:
 * (K+4)·eps·(Σ|alpha·a·b| + |beta·c0|). */
static void check_gemm(const char *what, const gemm_case *t, const hl_real *A, const hl_real *B,
                       const hl_real *C0, const hl_real *C)
{
    for (int i = 0; i < t->M; i++)
        for (int j = 0; j < t->N; j++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < t->K; k++) {
                double a = t->ta ? A[k * t->lda + i] : A[i * t->lda + k];
                double b = t->tb ? B[j * t->ldb + k] : B[k * t->ldb + j];
                sum += a * b;
                mag += fabs(a * b);
            }
            double c0 = t->beta == 0 ? 0 : t->beta * C0[i * t->ldc + j];
            double expect = t->alpha * sum + c0;
            double tol = (t->K + 4) * REAL_EPS * (fabs(t->alpha) * mag + fabs(c0));
            double got = C[i * t->ldc + j];
            /* An if rather than ck_assert: Check records a location per assert. */
            if (!(fabs(got - expect) <= tol))
                ck_abort_msg("%s: ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g: C[%d][%d] = %.9g, "
                             "expected %.9g",
                             what, t->ta, t->tb, t->M, t->N, t->K, t->alpha, t->beta, i, j, got,
                             expect);
        }
}

/* Operand sizes for a case; leading dims get 2 spare columns so a kernel that
 * confuses a stride with a width fails. */
static void layout(gemm_case *t, size_t *na, size_t *nb, size_t *nc)
{
    t->lda = (t->ta ? t->M : t->K) + 2;
    t->ldb = (t->tb ? t->K : t->N) + 2;
    t->ldc = t->N + 2;
    *na = (size_t)(t->ta ? t->K : t->M) * t->lda;
    *nb = (size_t)(t->tb ? t->N : t->K) * t->ldb;
    *nc = (size_t)t->M * t->ldc;
}

static void run_case(gemm_case *t, uint64_t seed)
{
    size_t na, nb, nc;
    layout(t, &na, &nb, &nc);
    hl_real *A = random_values(na, seed), *B = random_values(nb, seed + 1);
    hl_real *C0 = random_values(nc, seed + 2), *C = malloc(nc * sizeof *C);
    /* beta 0 must not read C: stale NaNs must not leak into the result. */
    if (t->beta == 0)
        for (size_t i = 0; i < nc; i++)
            C0[i] = NAN;
    memcpy(C, C0, nc * sizeof *C);
    hl_gemm(t->ta, t->tb, t->M, t->N, t->K, (hl_real)t->alpha, A, t->lda, B, t->ldb,
            (hl_real)t->beta, C, t->ldc);
    check_gemm("gemm", t, A, B, C0, C);
    /* The spare columns of C are not part of it. */
    for (int i = 0; i < t->M; i++)
        ck_assert(memcmp(&C[i * t->ldc + t->N], &C0[i * t->ldc + t->N],
                         (size_t)(t->ldc - t->N) * sizeof *C) == 0);
    free(A);
    free(B);
    free(C0);
    free(C);
}

START_TEST(test_gemm_against_naive)
{
    static const double scalars[][2] = {{1, 0}, {0.75, -1.25}, {-2, 1}};
    uint64_t seed = 1;
    for (int flags = 0; flags < 4; flags++)
        for (int m = 0; m < N_SIZES; m++)
            for (int n = 0; n < N_SIZES; n++)
                for (int k = 0; k < N_SIZES; k++)
                    for (int s = 0; s < 3; s++) {
                        gemm_case t = {.ta = flags & 1, .tb = flags & 2, .M = sizes[m],
                                       .N = sizes[n], .K = sizes[k], .alpha = scalars[s][0],
                                       .beta = scalars[s][1]};
                        run_case(&t, seed += 3);
                    }
}
END_TEST

/* Products larger than one cache block in each dimension (blocks are 256 or
 * 128 deep in K, under 200 rows, 2048 columns), packed or, with few rows or
 * columns, read in place; and products with nothing to sum. */
START_TEST(test_gemm_blocks)
{
    static const int shapes[][3] = {{300, 500, 600}, {5, 2100, 300}, {16, 100, 700},
                                    {37, 33, 0},     {3, 2, 0}};
    uint64_t seed = 500;
    for (int flags = 0; flags < 4; flags++)
        for (int i = 0; i < 5; i++)
            for (int beta = 0; beta < 2; beta++) {
                gemm_case t = {.ta = flags & 1, .tb = flags & 2, .M = shapes[i][0],
                               .N = shapes[i][1], .K = shapes[i][2], .alpha = 1.5,
                               .beta = beta ? -0.5 : 0};
                run_case(&t, seed += 3);
            }
    /* alpha 0 scales C by beta without reading A or B (here A is all NaN). */
    for (int beta = 0; beta < 2; beta++) {
        gemm_case t = {.M = 4, .N = 40, .K = 7, .alpha = 0, .beta = beta ? 2 : 0};
        size_t na, nb, nc;
        layout(&t, &na, &nb, &nc);
        hl_real *A = random_values(na, 1), *B = random_values(nb, 2), *C = random_values(nc, 3);
        const hl_real c0 = C[t.ldc + 5];
        for (size_t i = 0; i < na; i++)
            A[i] = NAN;
        hl_gemm(false, false, t.M, t.N, t.K, 0, A, t.lda, B, t.ldb, (hl_real)t.beta, C, t.ldc);
        ck_assert(C[t.ldc + 5] == (hl_real)t.beta * c0);
        free(A);
        free(B);
        free(C);
    }
}
END_TEST

START_TEST(test_gemm_batched)
{
    enum { BATCH = 3 };
    for (int flags = 0; flags < 4; flags++)
        for (int shared = 0; shared < 2; shared++) {
            gemm_case t = {.ta = flags & 1, .tb = flags & 2, .M = 33, .N = 17, .K = 65,
                           .alpha = 1, .beta = shared ? 0.5 : 0};
            size_t na, nb, nc;
            layout(&t, &na, &nb, &nc);
            size_t stride_b = shared ? 0 : nb;
            hl_real *A = random_values(na * BATCH, 10 + flags);
            hl_real *B = random_values(shared ? nb : nb * BATCH, 20 + flags);
            hl_real *C0 = random_values(nc * BATCH, 30 + flags);
            hl_real *C = malloc(nc * BATCH * sizeof *C);
            memcpy(C, C0, nc * BATCH * sizeof *C);
            hl_gemm_batched(t.ta, t.tb, t.M, t.N, t.K, (hl_real)t.alpha, A, t.lda, B, t.ldb,
                            (hl_real)t.beta, C, t.ldc, BATCH, na, stride_b, nc);
            for (int i = 0; i < BATCH; i++)
                check_gemm(shared ? "batched, shared B" : "batched", &t, A + i * na,
                           B + i * stride_b, C0 + i * nc, C + i * nc);
            free(A);
            free(B);
            free(C0);
            free(C);
        }
}
END_TEST

/* A transposed A whose rows lie 4 KiB apart is packed once K passes 64, one
 * whose rows lie a little further apart is read in place (ops/gemm.c): the
 * two give the same bits, and the right sums, for a batch with partial
 * tiles and, at K 450, two K slices. */
START_TEST(test_gemm_packed_as_in_place)
{
    enum { BATCH = 2, M = 40, N = 48, PACKED_LD = 4096 / sizeof(hl_real) };
    static const int ks[] = {100, 450};
    for (int ik = 0; ik < 2; ik++) {
        const int K = ks[ik];
        gemm_case packed = {.ta = true, .M = M, .N = N, .K = K, .lda = PACKED_LD, .ldb = N,
                            .ldc = N, .alpha = 1, .beta = 0.5};
        gemm_case direct = packed;
        direct.lda = PACKED_LD + 2;
        const size_t na = (size_t)K * PACKED_LD, nd = (size_t)K * direct.lda;
        const size_t nb = (size_t)K * N, nc = (size_t)M * N;
        hl_real *A = random_values(na * BATCH, 100 + ik), *B = random_values(nb * BATCH, 110);
        hl_real *C0 = random_values(nc * BATCH, 120), *Ad = malloc(nd * BATCH * sizeof *Ad);
        hl_real *Cp = malloc(nc * BATCH * sizeof *Cp), *Cd = malloc(nc * BATCH * sizeof *Cd);
        ck_assert(Ad && Cp && Cd);
        for (int i = 0; i < BATCH; i++)
            for (int k = 0; k < K; k++)
                memcpy(Ad + i * nd + (size_t)k * direct.lda, A + i * na + (size_t)k * PACKED_LD,
                       M * sizeof *A);
        memcpy(Cp, C0, nc * BATCH * sizeof *Cp);
        memcpy(Cd, C0, nc * BATCH * sizeof *Cd);
        hl_gemm_batched(true, false, M, N, K, 1, A, PACKED_LD, B, N, (hl_real)0.5, Cp, N, BATCH,
                        na, nb, nc);
        hl_gemm_batched(true, false, M, N, K, 1, Ad, direct.lda, B, N, (hl_real)0.5, Cd, N,
                        BATCH, nd, nb, nc);
        for (int i = 0; i < BATCH; i++)
            check_gemm("rows 4 KiB apart", &packed, A + i * na, B + i * nb, C0 + i * nc,
                       Cp + i * nc);
        ck_assert_msg(memcmp(Cp, Cd, nc * BATCH * sizeof *Cp) == 0,
                      "K=%d: A packed and A read in place differ", K);
        free(A);
        free(B);
        free(C0);
        free(Ad);
        free(Cp);
        free(Cd);
    }
}
END_TEST

#ifdef _OPENMP
/* C from a fresh copy of C0 with the given thread count. */
static hl_real *gemm_with_threads(int threads, const gemm_case *t, int batch, const hl_real *A,
                                  const hl_real *B, const hl_real *C0, size_t na, size_t nc)
{
    omp_set_num_threads(threads);
    hl_real *C = malloc(nc * batch * sizeof *C);
    memcpy(C, C0, nc * batch * sizeof *C);
    hl_gemm_batched(t->ta, t->tb, t->M, t->N, t->K, (hl_real)t->alpha, A, t->lda, B, t->ldb,
                    (hl_real)t->beta, C, t->ldc, batch, na, 0, nc);
    return C;
}
#endif

START_TEST(test_gemm_threads_bitwise)
{
#ifdef _OPENMP
    int saved = omp_get_max_threads();
    /* Over 1e6 multiply-adds each: parallel, split by rows, then by columns;
     * the third, 18e6, on up to 16 threads, a single product cut into a grid
     * of row and column slices (4 x 4 at 16, 2 x 3 at 6), a batch into
     * matrices and row slices. */
    static const int shapes[][3] = {{150, 97, 75}, {20, 300, 180}, {261, 301, 229}};
    static const int counts[] = {2, 4, 6, 16};
    for (int flags = 0; flags < 12; flags++)
        for (int batch = 1; batch <= 5; batch += 4) {
            const int *mnk = shapes[flags >> 2];
            gemm_case t = {.ta = flags & 1, .tb = flags & 2, .M = mnk[0], .N = mnk[1],
                           .K = mnk[2], .alpha = 0.5, .beta = 1};
            size_t na, nb, nc;
            layout(&t, &na, &nb, &nc);
            hl_real *A = random_values(na * batch, 40 + flags), *B = random_values(nb, 50);
            hl_real *C0 = random_values(nc * batch, 60);
            hl_real *one = gemm_with_threads(1, &t, batch, A, B, C0, na, nc);
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                hl_real *many = gemm_with_threads(counts[c], &t, batch, A, B, C0, na, nc);
                ck_assert_msg(memcmp(one, many, nc * batch * sizeof *one) == 0,
                              "gemm ta=%d tb=%d M=%d N=%d batch=%d differs between 1 and %d "
                              "threads", t.ta, t.tb, t.M, t.N, batch, counts[c]);
                free(many);
            }
            free(A);
            free(B);
            free(C0);
            free(one);
        }
    omp_set_num_threads(saved);
#endif
}
END_TEST

/* hl_gemm_upper: every element on and above the diagonal has hl_gemm's
 * bits, for each transpose, sizes around the tiles, and 1 and 2 threads (at
 * N 301, K 75, 3.4e6 multiply-adds over the triangle, the rows split between
 * the threads). */
START_TEST(test_gemm_upper)
{
    static const int ns[] = {1, 17, 65, 150, 301}, ks[] = {3, 75};
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
#endif
    for (int flags = 0; flags < 4; flags++)
        for (int in = 0; in < 5; in++)
            for (int ik = 0; ik < 2; ik++)
                for (int threads = 1; threads <= 2; threads++) {
#ifdef _OPENMP
                    omp_set_num_threads(threads);
#endif
                    gemm_case t = {.ta = flags & 1, .tb = flags & 2, .M = ns[in], .N = ns[in],
                                   .K = ks[ik], .alpha = 0.5, .beta = 1};
                    size_t na, nb, nc;
                    layout(&t, &na, &nb, &nc);
                    hl_real *A = random_values(na, 70 + flags), *B = random_values(nb, 80);
                    hl_real *want = random_values(nc, 90), *got = malloc(nc * sizeof *got);
                    ck_assert_ptr_nonnull(got);
                    memcpy(got, want, nc * sizeof *got);
                    hl_gemm(t.ta, t.tb, t.N, t.N, t.K, (hl_real)t.alpha, A, t.lda, B, t.ldb,
                            (hl_real)t.beta, want, t.ldc);
                    hl_gemm_upper(t.ta, t.tb, t.N, t.K, (hl_real)t.alpha, A, t.lda, B, t.ldb,
                                  (hl_real)t.beta, got, t.ldc);
                    for (int i = 0; i < t.N; i++)
                        if (memcmp(&got[i * t.ldc + i], &want[i * t.ldc + i],
                                   (size_t)(t.N - i) * sizeof *got) != 0)
                            ck_abort_msg("gemm_upper ta=%d tb=%d N=%d K=%d, %d threads: row %d "
                                         "differs from hl_gemm's", t.ta, t.tb, t.N, t.K,
                                         threads, i);
                    free(A);
                    free(B);
                    free(want);
                    free(got);
                }
#ifdef _OPENMP
    omp_set_num_threads(saved);
#endif
}
END_TEST

Suite *gemm_suite(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gemm_against_naive);
    tcase_add_test(tc, test_gemm_blocks);
    tcase_add_test(tc, test_gemm_batched);
    tcase_add_test(tc, test_gemm_packed_as_in_place);
    tcase_add_test(tc, test_gemm_threads_bitwise);
    tcase_add_test(tc, test_gemm_upper);
    suite_add_tcase(s, tc);
    return s;
}
