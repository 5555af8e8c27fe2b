/* Tests for ops/kernels/vmath.c: exp and erf against libm over the whole float range,
 * the special values, and the row kernels' partial vectors and sums. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/vmath.h"
#include "tests/testutil.h"

/* The largest errors in ulp, checked over all 2^32 floats once. With FMA
 * (AVX-512, AVX2): exp 0.94 ulp (at 26.688921), erf 2.96 ulp (at 1.9892112,
 * where erf = |x|·G(x² - 2) meets the rounding of x²). In portable C, whose
 * multiply-adds round twice: exp 1.22 ulp (at 59.265224), erf 3.36 ulp (at
 * 1.9896027). The sweep below samples every 509th bit pattern. The double
 * build calls libm, so there the kernels must match it exactly. */
#define EXP_MAX_ULP 1.25
#define ERF_MAX_ULP 3.5
#define SWEEP_STEP 509u

#ifdef HL_REAL_DOUBLE
#define MANT_BITS 52
#define MIN_NORMAL DBL_MIN
#define MIN_EXP -1074
#else
#define MANT_BITS 23
#define MIN_NORMAL FLT_MIN
#define MIN_EXP -149
#endif

/* |got - ref| in units of the spacing of hl_real values at ref (ref exact
 * enough: libm in double for a float result). A result that must round to
 * ±inf (or NaN) has to be exactly that. */
static double ulp_error(hl_real got, double ref)
{
    if (isnan(ref))
        return isnan((double)got) ? 0 : INFINITY;
    const hl_real rounded = (hl_real)ref;
    if (isinf((double)rounded))
        return got == rounded ? 0 : INFINITY;
    if (!isfinite((double)got))
        return INFINITY;
    const double a = fabs(ref);
    const double ulp = a < MIN_NORMAL ? ldexp(1, MIN_EXP) : ldexp(1, ilogb(a) - MANT_BITS);
    return fabs((double)got - ref) / ulp;
}

/* One hl_real from bits (the low bits of a 32-bit pattern for float; for
 * double the pattern becomes the top half, so the sweep spans the range). */
static hl_real from_bits(uint32_t bits)
{
#ifdef HL_REAL_DOUBLE
    uint64_t wide = (uint64_t)bits << 32 | bits;
    double v;
    memcpy(&v, &wide, sizeof v);
    return v;
#else
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
#endif
}

typedef void kernel_fn(const hl_real *x, hl_real *y, size_t n);
typedef double ref_fn(double);

static void exp_kernel(const hl_real *x, hl_real *y, size_t n) { hl_vmath_exp(x, 0, 0, y, n); }

/* The worst error over every SWEEP_STEP-th bit pattern (NaNs included). */
static double sweep(kernel_fn *kernel, ref_fn *ref, hl_real *worst_x)
{
    enum { CHUNK = 4096 };
    static hl_real x[CHUNK], y[CHUNK];
    double worst = 0;
    uint64_t bits = 0;
    while (bits < (1ull << 32)) {
        int n = 0;
        for (; n < CHUNK && bits < (1ull << 32); n++, bits += SWEEP_STEP)
            x[n] = from_bits((uint32_t)bits);
        kernel(x, y, (size_t)n);
        for (int i = 0; i < n; i++) {
            const double e = ulp_error(y[i], ref((double)x[i]));
            if (e > worst) {
                worst = e;
                *worst_x = x[i];
            }
        }
    }
    return worst;
}

/* kernel(x) for one value, placed at every lane of a partial vector. */
static hl_real one(kernel_fn *kernel, hl_real x)
{
    hl_real in[3] = {1, 1, x}, out[3] = {0, 0, 0};
    kernel(in, out, 3);
    return out[2];
}

#ifdef HL_REAL_DOUBLE
#define SWEEP_LIMIT(ulp) 0.0
#else
#define SWEEP_LIMIT(ulp) (ulp)
#endif

START_TEST(test_vmath_exp)
{
    ck_assert(one(exp_kernel, -INFINITY) == 0);
    ck_assert(one(exp_kernel, INFINITY) == INFINITY);
    ck_assert(isnan((double)one(exp_kernel, NAN)));
    ck_assert(isnan((double)one(exp_kernel, -NAN)));
    ck_assert(one(exp_kernel, 0) == 1 && one(exp_kernel, -0.0) == 1);
    /* Overflow, the last finite values and gradual underflow, as libm. */
    static const double edges[] = {88.72283, 88.7228394, 89, 1000, FLT_MAX, -87.33654,
                                   -87.5,    -95,        -100, -103.2789, -103.9721, -104,
                                   -1e4,     -FLT_MAX,   1e-30, -1e-40};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        const hl_real x = (hl_real)edges[i];
        const hl_real got = one(exp_kernel, x);
        ck_assert_msg(ulp_error(got, exp((double)x)) <= SWEEP_LIMIT(EXP_MAX_ULP),
                      "exp(%.9g) = %.9g, libm %.9g", (double)x, (double)got, exp((double)x));
    }
#ifndef HL_REAL_DOUBLE
    ck_assert(one(exp_kernel, -100) > 0 && one(exp_kernel, -100) < FLT_MIN); /* denormal */
#endif
    hl_real at = 0;
    const double worst = sweep(exp_kernel, exp, &at);
    ck_assert_msg(worst <= SWEEP_LIMIT(EXP_MAX_ULP), "exp: %.3f ulp at %.9g", worst, (double)at);

    /* The shifted form: exp((x - a) - b), each difference rounded. */
    hl_real x[5] = {1e30f, 1e30f, 3, -INFINITY, 2}, y[5];
    hl_vmath_exp(x, (hl_real)1e30f, (hl_real)log(2.0), y, 2);
    ck_assert(fabs((double)y[0] - 0.5) < 1e-7 && y[1] == y[0]);
    hl_vmath_exp(x + 2, 2, 1, y, 3);
    ck_assert(y[1] == 0 && fabs((double)y[0] - 1) < 1e-7 && fabs((double)y[2] - exp(-1.0)) < 1e-7);
}
END_TEST

START_TEST(test_vmath_erf)
{
    ck_assert(one(hl_vmath_erf, INFINITY) == 1 && one(hl_vmath_erf, -INFINITY) == -1);
    ck_assert(isnan((double)one(hl_vmath_erf, NAN)));
    ck_assert(one(hl_vmath_erf, 0) == 0 && signbit((double)one(hl_vmath_erf, -0.0)));
    ck_assert(one(hl_vmath_erf, 10) == 1 && one(hl_vmath_erf, -6) == -1);
    static const double edges[] = {1e-40, -1e-38, 1e-20, 0.5, 1.999, 2, 2.001, 3.9, 3.92, 4};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        const hl_real x = (hl_real)edges[i];
        const hl_real got = one(hl_vmath_erf, x);
        ck_assert_msg(ulp_error(got, erf((double)x)) <= SWEEP_LIMIT(ERF_MAX_ULP),
                      "erf(%.9g) = %.9g, libm %.9g", (double)x, (double)got, erf((double)x));
    }
    hl_real at = 0;
    const double worst = sweep(hl_vmath_erf, erf, &at);
    ck_assert_msg(worst <= SWEEP_LIMIT(ERF_MAX_ULP), "erf: %.3f ulp at %.9g", worst, (double)at);
}
END_TEST

/* Rows of every length up to three vectors: whole vectors plus a partial
 * one, whose missing lanes must be neither stored nor summed. */
START_TEST(test_vmath_rows)
{
    enum { MAX = 50 };
    hl_rng rng;
    hl_rng_seed(&rng, 7);
    for (size_t n = 0; n <= MAX; n++) {
        hl_real x[MAX + 1], y[MAX + 1], e[MAX + 1];
        for (size_t i = 0; i < n; i++)
            x[i] = (hl_real)(8 * hl_rng_uniform(&rng) - 4);
        x[n] = 100; /* past the row: must not count */
        y[n] = -7;
        double want = 0;
        hl_real max = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            want += exp((double)x[i] - 1);
            max = x[i] > max ? x[i] : max;
        }
        ck_assert(hl_vmath_max(x, n) == max);
        const double sum = hl_vmath_exp_sum(x, 1, y, n);
        ck_assert_msg(fabs(sum - want) <= 1e-6 * want, "n=%zu: sum %.9g, want %.9g", n, sum,
                      want);
        ck_assert(y[n] == -7);
        hl_vmath_exp(x, 1, 0, e, n);
        ck_assert(memcmp(e, y, n * sizeof *y) == 0);
        ck_assert(hl_vmath_exp_sum(x, 1, NULL, n) == sum);
        /* The tile form: rows of x shifted by 1, and of y shifted by 0.5,
         * in place, the bits of one exp_sum a row; what lies past a row's
         * n values is not touched. */
        hl_real tile[2][MAX + 1];
        double sums[2];
        memcpy(tile[0], x, sizeof tile[0]);
        memcpy(tile[1], y, sizeof tile[1]);
        hl_vmath_exp_sum_rows(tile[0], MAX + 1, 2, n, (hl_real[]){1, (hl_real)0.5}, sums);
        ck_assert(sums[0] == sum && memcmp(tile[0], y, n * sizeof *y) == 0 && tile[0][n] == 100);
        ck_assert(sums[1] == hl_vmath_exp_sum(y, (hl_real)0.5, e, n));
        ck_assert(memcmp(tile[1], e, n * sizeof *e) == 0 && tile[1][n] == -7);
        /* A NaN anywhere in the row makes the max NaN, even among -inf. */
        for (size_t k = 0; k < n; k++) {
            const hl_real saved = x[k];
            x[k] = NAN;
            ck_assert_msg(isnan((double)hl_vmath_max(x, n)), "n=%zu: NaN at %zu lost", n, k);
            x[k] = saved;
        }
    }
    const hl_real masked[3] = {-INFINITY, -INFINITY, -INFINITY};
    ck_assert(hl_vmath_max(masked, 3) == -INFINITY);
    ck_assert(hl_vmath_max(masked, 0) == -INFINITY);
}
END_TEST

/* The dot product against a long double sum, at every length up to three
 * vectors of partial sums and a long row, on values of mixed sign and scale:
 * within a few roundings of a double sum (the float build's products are
 * exact in double), and nothing past the row counted. */
START_TEST(test_vmath_dot)
{
    enum { MAX = 1000 };
    static hl_real x[MAX + 1], y[MAX + 1];
    hl_rng rng;
    hl_rng_seed(&rng, 13);
    for (size_t n = 0; n <= MAX; n = n < 50 ? n + 1 : MAX) {
        long double want = 0, size = 0;
        for (size_t i = 0; i < n; i++) {
            x[i] = (hl_real)((2 * hl_rng_uniform(&rng) - 1) * pow(10, 3 * hl_rng_uniform(&rng)));
            y[i] = (hl_real)(2 * hl_rng_uniform(&rng) - 1);
            want += (long double)x[i] * y[i];
            size += fabsl((long double)x[i] * y[i]);
        }
        x[n] = (hl_real)1e30; /* past the row: must not count */
        y[n] = 1;
        const double got = hl_vmath_dot(x, y, n);
        ck_assert_msg(fabsl(got - want) <= 1e-14L * size * (n + 1), "n=%zu: %.17g, want %.17Lg",
                      n, got, want);
        ck_assert(hl_vmath_dot(y, x, n) == got);
        if (n == MAX)
            break;
    }
    x[0] = NAN;
    ck_assert(isnan(hl_vmath_dot(x, y, 20)));
}
END_TEST

/* Cross-entropy's gradient row against hl_vmath_exp and the formula element
 * by element, bit for bit, with the one-hot at every position of rows of every
 * length up to three vectors, stored and added, and nothing written past the
 * row; the embedding's add row likewise. */
START_TEST(test_vmath_xent_grad_and_add)
{
    enum { MAX = 50 };
    hl_rng rng;
    hl_rng_seed(&rng, 11);
    const hl_real a = (hl_real)0.75, b = (hl_real)1.5, scale = (hl_real)0.3;
    for (size_t n = 1; n <= MAX; n++) {
        hl_real x[MAX], p[MAX], base[MAX + 1], y[MAX + 1];
        for (size_t i = 0; i < n; i++) {
            x[i] = (hl_real)(8 * hl_rng_uniform(&rng) - 4);
            base[i] = (hl_real)(2 * hl_rng_uniform(&rng) - 1);
        }
        hl_vmath_exp(x, a, b, p, n);
        for (size_t hot = 0; hot < n; hot++)
            for (int overwrite = 0; overwrite < 2; overwrite++) {
                memcpy(y, base, n * sizeof *y);
                y[n] = -7;
                hl_vmath_xent_grad(x, a, b, scale, hot, y, n, overwrite);
                for (size_t i = 0; i < n; i++) {
                    const hl_real d = scale * (p[i] - (hl_real)(i == hot));
                    const hl_real want = overwrite ? d : base[i] + d;
                    ck_assert_msg(y[i] == want, "n=%zu hot=%zu overwrite=%d: y[%zu] = %.9g, "
                                  "want %.9g", n, hot, overwrite, i, (double)y[i],
                                  (double)want);
                }
                ck_assert(y[n] == -7);
            }
        memcpy(y, base, n * sizeof *y);
        y[n] = -7;
        hl_vmath_add(x, y, n);
        for (size_t i = 0; i < n; i++)
            ck_assert(y[i] == base[i] + x[i]);
        ck_assert(y[n] == -7);
    }
}
END_TEST

/* Soft-capping's tanh (cap 1) against libm at every 509th float pattern and
 * around the switch at |u| = 1/4; the double build calls libm's tanh. */
START_TEST(test_vmath_softcap_tanh)
{
#ifdef HL_REAL_DOUBLE
    const double max_ulp = 0;
#else
    const double max_ulp = 4;
#endif
    enum { N = 256 };
    hl_real x[N], y[N];
    uint32_t bits = 0;
    for (;;) {
        for (int i = 0; i < N; i++, bits += SWEEP_STEP)
            x[i] = from_bits(bits);
        hl_vmath_softcap(x, 1, y, N);
        for (int i = 0; i < N; i++) {
            const double e = ulp_error(y[i], tanh((double)x[i]));
            ck_assert_msg(e <= max_ulp, "tanh(%.9g) = %.9g, want %.9g (%.2f ulp)", (double)x[i],
                          (double)y[i], tanh((double)x[i]), e);
        }
        if (bits < (uint32_t)N * SWEEP_STEP)
            break; /* wrapped */
    }
    for (int i = 0; i < N; i++)
        x[i] = (hl_real)(0.24 + 0.02 * i / N) * (i % 2 ? -1 : 1);
    hl_vmath_softcap(x, 1, y, N);
    for (int i = 0; i < N; i++)
        ck_assert(ulp_error(y[i], tanh((double)x[i])) <= max_ulp);
    /* cap·tanh(x/cap) at a large cap is x to rounding; ±inf caps to ±cap. */
    x[0] = 2, x[1] = -3, x[2] = INFINITY, x[3] = -INFINITY, x[4] = NAN;
    hl_vmath_softcap(x, 1000, y, 5);
    ck_assert(fabs((double)y[0] - 2) < 1e-5 && fabs((double)y[1] + 3) < 1e-5);
    ck_assert(y[2] == 1000 && y[3] == -1000 && isnan((double)y[4]));
}
END_TEST

Suite *vmath_suite(void)
{
    Suite *s = suite_create("vmath");
    TCase *tc = tcase_create("vmath");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_vmath_exp);
    tcase_add_test(tc, test_vmath_erf);
    tcase_add_test(tc, test_vmath_rows);
    tcase_add_test(tc, test_vmath_dot);
    tcase_add_test(tc, test_vmath_xent_grad_and_add);
    tcase_add_test(tc, test_vmath_softcap_tanh);
    suite_add_tcase(s, tc);
    return s;
}
