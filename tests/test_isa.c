/* Tests for ops/isa.c and the kernel sets of ops/kernels/: choosing a set,
 * refusing one the CPU lacks, and the same bits from every set with FMA on
 * the same inputs — GEMM, tile products, row kernels, the fused attention,
 * composed ops forward and backward (whole training runs of the programs
 * under each set: tests/test_examples.c). The portable set without hardware
 * FMA is held to a tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/kernels.h"
#include "ops/tile_gemm.h"
#include "ops/vmath.h"
#include "tests/testutil.h"

/* How far the portable set without FMA may stray from the FMA sets,
 * relative to the largest magnitude of a result. HL_ISA_LOG=FILE appends the
 * measured differences (docs/kernels.md). */
#ifdef HL_REAL_DOUBLE
#define NO_FMA_TOL 1e-12
#else
#define NO_FMA_TOL 2e-5
#endif

/* ---- What each set computes: a function filling out[0..n) on the active set. */
typedef size_t compute_fn(hl_real *out, size_t cap);

/* Runs compute on every supported set and compares each with the first (the
 * best): bit for bit where both have FMA, within NO_FMA_TOL otherwise. */
static void check_sets_agree(const char *what, compute_fn *compute, size_t cap)
{
    const hl_isa before = hl_isa_active();
    hl_real *ref = malloc(cap * sizeof *ref), *got = malloc(cap * sizeof *got);
    ck_assert(ref && got);
    hl_error err = {0};
    const hl_isa best = hl_isa_best();
    ck_assert_int_eq(hl_isa_use(best, &err), HL_OK);
    const size_t n = compute(ref, cap);
    int compared = 0;
    for (int i = 0; i < HL_ISA_COUNT; i++) {
        const hl_isa isa = (hl_isa)i;
        if (isa == best || !hl_isa_supported(isa))
            continue;
        ck_assert_int_eq(hl_isa_use(isa, &err), HL_OK);
        ck_assert_uint_eq(compute(got, cap), n);
        compared++;
        if (hl_kernels()->fma) {
            for (size_t j = 0; j < n; j++)
                ck_assert_msg(!memcmp(&ref[j], &got[j], sizeof ref[j]),
                              "%s: %s and %s differ at %zu: %.9g vs %.9g", what,
                              hl_isa_name(best), hl_isa_name(isa), j, (double)ref[j],
                              (double)got[j]);
        } else {
            double scale = 0, worst = 0;
            for (size_t j = 0; j < n; j++)
                if (isfinite((double)ref[j]))
                    scale = fmax(scale, fabs((double)ref[j]));
            for (size_t j = 0; j < n; j++) {
                if (!isfinite((double)ref[j])) {
                    ck_assert_msg(memcmp(&ref[j], &got[j], sizeof ref[j]) == 0 ||
                                      (isnan((double)ref[j]) && isnan((double)got[j])),
                                  "%s: %s gives %g where %s gives %g", what, hl_isa_name(isa),
                                  (double)got[j], hl_isa_name(best), (double)ref[j]);
                    continue;
                }
                worst = fmax(worst, fabs((double)ref[j] - (double)got[j]));
            }
            const char *log = getenv("HL_ISA_LOG");
            FILE *f = log ? fopen(log, "a") : NULL;
            if (f) {
                fprintf(f, "%s %s %s largest_diff %.3g largest_value %.3g\n", HL_REAL_NAME,
                        what, hl_isa_name(isa), worst, scale);
                fclose(f);
            }
            ck_assert_msg(worst <= NO_FMA_TOL * fmax(scale, 1), "%s: %s (no FMA) off by %g",
                          what, hl_isa_name(isa), worst);
        }
    }
    ck_assert_int_eq(hl_isa_use(before, &err), HL_OK);
    /* On a CPU with one set there is nothing to compare; say so. */
    if (!compared)
        fprintf(stderr, "isa: %s: only %s on this CPU\n", what, hl_isa_name(best));
    free(ref);
    free(got);
}

static void fill(hl_real *x, size_t n, uint64_t seed, double lo, double hi)
{
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (hl_real)(lo + (hi - lo) * hl_rng_uniform(&rng));
}

/* ---- Selection. */

START_TEST(test_isa_names_and_choice)
{
    hl_isa isa;
    for (int i = 0; i < HL_ISA_COUNT; i++) {
        ck_assert(hl_isa_parse(hl_isa_name((hl_isa)i), &isa));
        ck_assert_int_eq(isa, i);
    }
    ck_assert(!hl_isa_parse("sse9", &isa) && !hl_isa_parse(NULL, &isa));
    ck_assert(hl_isa_supported(HL_ISA_PORTABLE));
    ck_assert(hl_isa_supported(hl_isa_best()));
    char list[64];
    ck_assert_ptr_nonnull(strstr(hl_isa_list(list, sizeof list), hl_isa_name(hl_isa_best())));
    ck_assert_ptr_nonnull(strstr(list, "portable"));
    /* A set the CPU (or build) lacks is refused with a message naming it. */
    for (int i = 0; i <= HL_ISA_COUNT; i++) {
        hl_error err = {0};
        const hl_status s = hl_isa_use((hl_isa)i, &err);
        if (i < HL_ISA_COUNT && hl_isa_supported((hl_isa)i)) {
            ck_assert_int_eq(s, HL_OK);
            ck_assert_int_eq(hl_isa_active(), i);
            ck_assert_int_eq(hl_kernels()->isa, i);
        } else {
            ck_assert_int_eq(s, HL_ERR_ARG);
            ck_assert_ptr_nonnull(strstr(err.message, "not supported on this CPU"));
        }
    }
    hl_error err = {0};
    ck_assert_int_eq(hl_isa_use(hl_isa_best(), &err), HL_OK);
}
END_TEST

START_TEST(test_isa_from_environment)
{
    const char *saved = getenv("HL_ISA");
    char *keep = saved ? strdup(saved) : NULL;
    hl_error err = {0};
    setenv("HL_ISA", "sse9", 1);
    ck_assert_int_eq(hl_isa_init_from_env(&err), HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "HL_ISA=sse9"));
    ck_assert_ptr_nonnull(strstr(err.message, "portable"));
    hl_error_clear(&err);
    setenv("HL_ISA", "portable", 1);
    ck_assert_int_eq(hl_isa_init_from_env(&err), HL_OK);
    ck_assert_int_eq(hl_isa_active(), HL_ISA_PORTABLE);
    unsetenv("HL_ISA");
    ck_assert_int_eq(hl_isa_init_from_env(&err), HL_OK);
    ck_assert_int_eq(hl_isa_active(), hl_isa_best());
    if (keep) {
        setenv("HL_ISA", keep, 1);
        free(keep);
    }
    ck_assert_int_eq(hl_isa_init_from_env(&err), HL_OK);
}
END_TEST

/* ---- The same bits on every set. */

/* GEMMs of ragged sizes, every transpose, alpha and beta: each kernel shape,
 * its edges and the packed and in-place paths. */
static size_t compute_gemm(hl_real *out, size_t cap)
{
    static const int sizes[][3] = {{1, 1, 1},    {3, 17, 5},   {17, 3, 64},   {33, 65, 31},
                                   {100, 7, 129}, {64, 64, 64}, {257, 130, 71}, {15, 300, 1030}};
    size_t used = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int t = 0; t < 4; t++) {
            const int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
            const bool ta = t & 1, tb = t & 2;
            hl_real *a = malloc((size_t)M * K * sizeof *a), *b = malloc((size_t)K * N * sizeof *b);
            ck_assert(a && b && used + (size_t)M * N <= cap);
            fill(a, (size_t)M * K, 11 + s, -1, 1);
            fill(b, (size_t)K * N, 12 + s, -1, 1);
            hl_real *c = out + used;
            fill(c, (size_t)M * N, 13 + s, -1, 1);
            hl_gemm(ta, tb, M, N, K, t == 3 ? (hl_real)0.5 : 1, a, ta ? M : K, b, tb ? K : N,
                    t == 1 ? (hl_real)0.25 : 0, c, N);
            used += (size_t)M * N;
            free(a);
            free(b);
        }
    return used;
}

START_TEST(test_isa_gemm_same_bits) { check_sets_agree("gemm", compute_gemm, 1 << 20); }
END_TEST

/* Tile products of every edge: rows and columns not multiples of any block. */
static size_t compute_tiles(hl_real *out, size_t cap)
{
    enum { MAX = 70 };
    hl_real a[MAX * MAX], b[MAX * MAX];
    fill(a, MAX * MAX, 21, -1, 1);
    fill(b, MAX * MAX, 22, -1, 1);
    size_t used = 0;
    static const int dims[] = {1, 5, 8, 13, 16, 24, 33, 40, 64, 70};
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 10; j++) {
            const int m = dims[i], n = dims[j], k = dims[(i + j) % 10];
            ck_assert(used + (size_t)m * n <= cap);
            hl_real *c = out + used;
            fill(c, (size_t)m * n, 23, -1, 1);
            /* A read transposed when i + j is odd; scaled when j is 2 mod 4. */
            const bool t = (i + j) & 1;
            if ((j & 3) == 2)
                hl_tile_gemm_scaled(m, n, k, a, t ? 1 : MAX, t ? MAX : 1, b, MAX, (hl_real)0.3, c,
                                    (size_t)n);
            else
                hl_tile_gemm(m, n, k, a, t ? 1 : MAX, t ? MAX : 1, b, MAX, j & 1, c, (size_t)n);
            used += (size_t)m * n;
        }
    return used;
}

START_TEST(test_isa_tile_gemm_same_bits) { check_sets_agree("tile_gemm", compute_tiles, 1 << 17); }
END_TEST

/* ---- Exact on each set, against the plain arithmetic. */

/* Packing copies and scales, so every set must give exactly alpha·src where
 * the operand has values and 0 in the padding, and write nothing past width. */
static void check_packing(void)
{
    enum { MAX = 70, LD = MAX + 3, SENTINEL = 7 };
    static const int sizes[][3] = {{1, 1, 1},  {3, 8, 5},   {8, 8, 8},    {13, 16, 16},
                                   {16, 16, 9}, {5, 24, 33}, {33, 40, 17}, {64, 64, 64},
                                   {70, 70, 70}, {0, 8, 4}};
    hl_real src[MAX * LD], dst[MAX * LD];
    fill(src, MAX * LD, 31, -1, 1);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int transposed = 0; transposed < 2; transposed++) {
            const int rows = sizes[s][0], width = sizes[s][1], kc = sizes[s][2];
            const hl_real alpha = s & 1 ? (hl_real)0.3 : 1;
            for (int i = 0; i < MAX * LD; i++)
                dst[i] = SENTINEL;
            hl_gemm_pack_fn *pack = transposed ? hl_kernels()->gemm_pack_transposed
                                               : hl_kernels()->gemm_pack;
            pack(rows, width, kc, alpha, src, LD, dst, LD);
            for (int k = 0; k < kc; k++)
                for (int r = 0; r < LD; r++) {
                    hl_real want = r >= width ? SENTINEL : 0;
                    if (r < rows)
                        want = alpha * (transposed ? src[r * LD + k] : src[k * LD + r]);
                    ck_assert_msg(!memcmp(&dst[k * LD + r], &want, sizeof want),
                                  "%s %s (%d,%d,%d): k %d, r %d: %g, not %g",
                                  hl_isa_name(hl_isa_active()),
                                  transposed ? "pack_transposed" : "pack", rows, width, kc, k, r,
                                  (double)dst[k * LD + r], (double)want);
                }
        }
}

/* The scaled tile product is the product, then a multiply: the same bits. */
static void check_scaled_tiles(void)
{
    enum { MAX = 70 };
    static const int dims[] = {1, 5, 8, 13, 16, 33, 64, 70};
    hl_real a[MAX * MAX], b[MAX * MAX], c[MAX * MAX], want[MAX * MAX];
    fill(a, MAX * MAX, 41, -1, 1);
    fill(b, MAX * MAX, 42, -1, 1);
    const hl_real scale = (hl_real)0.125 * (hl_real)1.3;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            const int m = dims[i], n = dims[j], k = dims[(i + j) % 8];
            hl_tile_gemm(m, n, k, a, MAX, 1, b, MAX, false, want, (size_t)n);
            for (int e = 0; e < m * n; e++)
                want[e] *= scale;
            fill(c, (size_t)m * n, 43, -1, 1);
            hl_tile_gemm_scaled(m, n, k, a, MAX, 1, b, MAX, scale, c, (size_t)n);
            ck_assert_msg(!memcmp(c, want, (size_t)m * n * sizeof *c),
                          "%s: scaled tile (%d,%d,%d) is not the product times the scale",
                          hl_isa_name(hl_isa_active()), m, n, k);
        }
}

/* Runs check on every supported set. */
static void on_every_set(void (*check)(void))
{
    hl_error err = {0};
    for (int i = 0; i < HL_ISA_COUNT; i++) {
        if (!hl_isa_supported((hl_isa)i))
            continue;
        ck_assert_int_eq(hl_isa_use((hl_isa)i, &err), HL_OK);
        check();
    }
    ck_assert_int_eq(hl_isa_init_from_env(&err), HL_OK);
}

START_TEST(test_isa_packing_exact) { on_every_set(check_packing); }
END_TEST

START_TEST(test_isa_scaled_tiles_exact) { on_every_set(check_scaled_tiles); }
END_TEST

/* Row kernels (vmath, rotary, norms) on rows of every length up to past two
 * partial-sum blocks, with large, tiny and special values. */
static size_t compute_rows(hl_real *out, size_t cap)
{
    enum { LEN = 75 };
    hl_real x[LEN], dy[LEN];
    fill(x, LEN, 31, -12, 12);
    fill(dy, LEN, 32, -1, 1);
    x[3] = -INFINITY;
    x[9] = (hl_real)88.5;
    x[40] = (hl_real)-95;
    size_t used = 0;
    for (size_t n = 0; n <= LEN; n++) {
        ck_assert(used + 19 * n + 2 <= cap);
        out[used] = hl_vmath_max(x, n);
        out[used + 1] = (hl_real)hl_vmath_exp_sum(x, 1, out + used + 2, n);
        used += n + 2;
        hl_vmath_exp(x, (hl_real)0.5, (hl_real)0.25, out + used, n);
        used += n;
        hl_vmath_erf(x, out + used, n);
        used += n;
        hl_vmath_gelu(x, out + used, n);
        used += n;
        hl_vmath_gelu_grad(x, dy, out + used, n, true);
        used += n;
        memcpy(out + used, dy, n * sizeof *dy);
        hl_vmath_gelu_grad(x, dy, out + used, n, false);
        used += n;
        hl_vmath_gelu_tanh(x, out + used, n);
        used += n;
        hl_vmath_gelu_tanh_grad(x, dy, out + used, n, true);
        used += n;
        memcpy(out + used, dy, n * sizeof *dy);
        hl_vmath_gelu_tanh_grad(x, dy, out + used, n, false);
        used += n;
        /* SwiGLU with x as the gate and dy as up; rotary with x's rows as
         * cosines and dy's as sines (any values: the bits are the point). */
        hl_vmath_swiglu(x, dy, out + used, n);
        used += n;
        hl_vmath_swiglu_grad(x, dy, dy, out + used, out + used + n, n, true);
        used += 2 * n;
        memcpy(out + used, x, n * sizeof *x);
        memcpy(out + used + n, dy, n * sizeof *dy);
        hl_vmath_swiglu_grad(dy, x, x, out + used, out + used + n, n, false);
        used += 2 * n;
        /* Cross-entropy's row gradient with the one-hot at each end and
         * inside, stored and added; the embedding's scatter-add row. */
        hl_vmath_xent_grad(x, 2, (hl_real)0.5, (hl_real)0.125, n / 3, out + used, n, true);
        used += n;
        memcpy(out + used, dy, n * sizeof *dy);
        hl_vmath_xent_grad(dy, -1, (hl_real)0.25, (hl_real)-3, n ? n - 1 : 0, out + used, n,
                           false);
        used += n;
        memcpy(out + used, x, n * sizeof *x);
        hl_vmath_add(dy, out + used, n);
        used += n;
        /* Softmax's rows in double: the normalisation, and the backward with
         * x as probabilities and dy as their gradient, stored and added. */
        ck_assert(used + 3 * n <= cap);
        hl_vmath_mul_double(x, 1.0 / 3, out + used, n);
        used += n;
        hl_vmath_softmax_grad(x, dy, 0.375, (hl_real)0.125, out + used, n, true);
        used += n;
        memcpy(out + used, dy, n * sizeof *dy);
        hl_vmath_softmax_grad(dy, x, -2.5, 1, out + used, n, false);
        used += n;
        /* The dot product in double, whole: its rounding to hl_real and the
         * rest; of x past its -inf (at 3) with dy, and of dy with itself. */
        ck_assert(used + 4 <= cap);
        const double dots[2] = {hl_vmath_dot(x + 4, dy + 4, n > 4 ? n - 4 : 0),
                                hl_vmath_dot(dy, dy, n)};
        for (int d = 0; d < 2; d++) {
            out[used++] = (hl_real)dots[d];
            out[used++] = (hl_real)(dots[d] - (double)(hl_real)dots[d]);
        }
        /* exp_sum of two rows at once (x and dy, a row stride past n), in
         * place, with their sums. */
        ck_assert(used + 2 * n + 3 <= cap);
        memcpy(out + used, x, n * sizeof *x);
        memcpy(out + used + n + 1, dy, n * sizeof *dy);
        double row_sums[2];
        hl_vmath_exp_sum_rows(out + used, n + 1, 2, n, (hl_real[]){2, (hl_real)-0.5}, row_sums);
        out[used + n] = (hl_real)row_sums[0];
        out[used + 2 * n + 1] = (hl_real)row_sums[1];
        used += 2 * n + 2;
        /* Soft-capping, forward and through the cross-entropy gradient,
         * stored and added. */
        ck_assert(used + 3 * n <= cap);
        hl_vmath_softcap(x, (hl_real)7.5, out + used, n);
        used += n;
        hl_vmath_softcap_xent_grad(x, (hl_real)7.5, 2, (hl_real)0.5, (hl_real)0.125, n / 3,
                                   out + used, n, true);
        used += n;
        memcpy(out + used, dy, n * sizeof *dy);
        hl_vmath_softcap_xent_grad(dy, (hl_real)0.3, -1, (hl_real)0.25, (hl_real)-3,
                                   n ? n - 1 : 0, out + used, n, false);
        used += n;
        if (n % 2 == 0) {
            hl_kernels()->rope_row(x, dy, x + n / 2, 1, out + used, n / 2, false);
            memcpy(out + used + n, x, n * sizeof *x);
            hl_kernels()->rope_row(dy, x, dy, -1, out + used + n, n / 2, true);
            used += 2 * n;
        }
        /* The norm kernels on a row with a large offset, dy as gamma and x's
         * tail as beta. */
        const hl_norm_kernels *k = &hl_kernels()->norm;
        hl_real row[LEN];
        for (size_t i = 0; i < n; i++)
            row[i] = 1000 + 3 * dy[i];
        const double mean = k->sum(row, 0, false, n) / (n ? (double)n : 1);
        const double rstd = 1 / sqrt(k->sum(row, mean, true, n) / (n ? (double)n : 1) + 1e-5);
        double sums[2];
        k->grad_sums(row, x + LEN - n, dy, mean, rstd, n, &sums[0], &sums[1]);
        ck_assert(used + 4 * n + 4 <= cap);
        out[used++] = (hl_real)mean;
        out[used++] = (hl_real)rstd;
        out[used++] = (hl_real)sums[0];
        out[used++] = (hl_real)sums[1];
        k->scale(row, mean, rstd, dy, x + LEN - n, out + used, n);
        k->scale(row, 0, rstd, NULL, NULL, out + used + n, n);
        used += 2 * n;
        k->grad(row, dy, dy, mean, rstd, sums[0] / 7, sums[1] / 7, out + used, n, true);
        memcpy(out + used + n, dy, n * sizeof *dy);
        k->grad(row, dy, NULL, 0, rstd, 0, sums[1], out + used + n, n, false);
        used += 2 * n;
    }
    return used;
}

START_TEST(test_isa_vmath_same_bits) { check_sets_agree("vmath", compute_rows, 1 << 17); }
END_TEST

/* A graph's output and every input gradient, into out. */
static size_t forward_backward(hl_gradcheck_fn fn, hl_tensor *const *in, int n_in, hl_real *out,
                               size_t cap)
{
    size_t n = 0;
    hl_real *values = tu_forward_backward(fn, NULL, in, n_in, &n);
    ck_assert(n <= cap);
    memcpy(out, values, n * sizeof *values);
    free(values);
    return n;
}

static hl_tensor *build_fused_attention(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_attention_masks m = {.causal = true};
    return hl_attention(g, in[0], in[1], in[2], (hl_real)0.3, &m);
}

/* Two heads of 70 queries, 24 wide: ragged tiles on every set, by whole rows;
 * then one head of 260, by the online softmax. */
static size_t compute_attention(hl_real *out, size_t cap)
{
    static const int shapes[2][4] = {{1, 2, 70, 24}, {1, 1, 260, 8}};
    size_t n = 0;
    for (int s = 0; s < 2; s++) {
        hl_tensor *in[3];
        for (int i = 0; i < 3; i++)
            in[i] = tu_random("qkv", 4, shapes[s], true, 41 + (uint64_t)i, -2, 2);
        n += forward_backward(build_fused_attention, in, 3, out + n, cap - n);
        for (int i = 0; i < 3; i++)
            hl_tensor_free(in[i]);
    }
    return n;
}

START_TEST(test_isa_attention_same_bits)
{
    check_sets_agree("attention", compute_attention, 1 << 16);
}
END_TEST

/* A transformer-like chain: layernorm, a linear with a bias (which the GEMM
 * kernels start their sums from), GELU, attention scores by matmul, softmax,
 * and cross-entropy, forward and backward. */
static hl_tensor *build_block(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    static const int32_t targets[] = {1, 4, 0, 2, 3, 4, 1, 0, 2, 3, 1, 2, 0};
    hl_tensor *h = hl_layernorm(g, in[0], NULL, NULL, (hl_real)1e-5);
    h = hl_gelu(g, hl_linear(g, h, in[1], in[2]));
    hl_tensor *p = hl_softmax(g, hl_matmul(g, h, h, HL_TRANS_B));
    h = hl_matmul(g, p, h, 0);
    return hl_cross_entropy(g, hl_narrow(g, h, 1, 0, 5), targets, -1);
}

static size_t compute_block(hl_real *out, size_t cap)
{
    hl_tensor *in[3] = {tu_random("x", 2, (int[]){13, 37}, true, 51, -2, 2),
                        tu_random("w", 2, (int[]){21, 37}, true, 52, -0.5, 0.5),
                        tu_random("b", 1, (int[]){21}, true, 56, -0.5, 0.5)};
    const size_t n = forward_backward(build_block, in, 3, out, cap);
    for (int i = 0; i < 3; i++)
        hl_tensor_free(in[i]);
    return n;
}

START_TEST(test_isa_ops_same_bits) { check_sets_agree("ops", compute_block, 1 << 14); }
END_TEST

/* The same with today's parts: RMSNorm, a SwiGLU MLP, rotary q and k, smeared
 * keys. */
static hl_tensor *build_modern_block(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    static const int32_t targets[] = {1, 4, 0, 2, 3, 4, 1, 0, 2, 3, 1, 2, 0};
    hl_tensor *h = hl_rmsnorm(g, in[0], NULL, (hl_real)1e-5);
    h = hl_swiglu(g, hl_linear(g, h, in[1], NULL)); /* (13,21) */
    hl_tensor *x = hl_reshape(g, hl_narrow(g, h, 1, 0, 20), 4, (int[]){1, 1, 13, 20});
    hl_tensor *q = hl_rope(g, x, 10000), *k = hl_rope(g, hl_smear(g, x, in[2]), 10000);
    hl_tensor *p = hl_softmax(g, hl_matmul(g, q, k, HL_TRANS_B));
    h = hl_reshape(g, hl_matmul(g, p, x, 0), 2, (int[]){13, 20});
    return hl_cross_entropy(g, hl_narrow(g, h, 1, 0, 5), targets, -1);
}

static size_t compute_modern_block(hl_real *out, size_t cap)
{
    hl_tensor *in[3] = {tu_random("x", 2, (int[]){13, 37}, true, 53, -2, 2),
                        tu_random("w", 2, (int[]){42, 37}, true, 54, -0.5, 0.5),
                        tu_random("alpha", 1, (int[]){1}, true, 55, -1, 1)};
    const size_t n = forward_backward(build_modern_block, in, 3, out, cap);
    for (int i = 0; i < 3; i++)
        hl_tensor_free(in[i]);
    return n;
}

START_TEST(test_isa_modern_ops_same_bits)
{
    check_sets_agree("modern ops", compute_modern_block, 1 << 14);
}
END_TEST

Suite *isa_suite(void)
{
    Suite *s = suite_create("isa");
    TCase *tc = tcase_create("isa");
    tcase_add_test(tc, test_isa_names_and_choice);
    tcase_add_test(tc, test_isa_from_environment);
    tcase_add_test(tc, test_isa_gemm_same_bits);
    tcase_add_test(tc, test_isa_tile_gemm_same_bits);
    tcase_add_test(tc, test_isa_packing_exact);
    tcase_add_test(tc, test_isa_scaled_tiles_exact);
    tcase_add_test(tc, test_isa_vmath_same_bits);
    tcase_add_test(tc, test_isa_modern_ops_same_bits);
    tcase_add_test(tc, test_isa_attention_same_bits);
    tcase_add_test(tc, test_isa_ops_same_bits);
    suite_add_tcase(s, tc);
    return s;
}
