/* Tests for ops/rope.c: rotary embedding, whole and partial, against the
 * formula in double, the rotation's norm and relative-position property, its
 * gradient, thread and kernel-set independence, and errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"
#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define FORWARD_TOL 1e-13
#else
#define FORWARD_TOL 2e-6
#endif

static hl_tensor *build_rope(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_rope(g, in[0], *(const hl_real *)ctx);
}

typedef struct {
    hl_real base;
    int rot; /* rot_dims of hl_rope_partial; 0: hl_rope */
} partial;

static hl_tensor *build_rope_partial(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    const partial *p = ctx;
    return p->rot ? hl_rope_partial(g, in[0], p->base, p->rot) : hl_rope(g, in[0], p->base);
}

START_TEST(test_rope_forward)
{
    const int B = 2, H = 3, T = 17, D = 10;
    hl_tensor *x = tu_random("x", 4, (int[]){B, H, T, D}, false, 1, -2, 2);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_rope(g, x, 10000);
    ck_assert(!hl_graph_failed(g));
    ck_assert_int_eq(y->rank, 4);
    ck_assert(hl_tensor_same_shape(x, y));
    for (size_t r = 0; r < x->numel / D; r++) {
        const int t = (int)(r % T);
        const hl_real *xr = x->data + r * D, *yr = y->data + r * D;
        double norm_x = 0, norm_y = 0;
        for (int i = 0; i < D / 2; i++) {
            const double th = t * pow(10000.0, -2.0 * i / D);
            const double lo = xr[i] * cos(th) - xr[i + D / 2] * sin(th);
            const double hi = xr[i + D / 2] * cos(th) + xr[i] * sin(th);
            ck_assert_msg(fabs(yr[i] - lo) <= FORWARD_TOL && fabs(yr[i + D / 2] - hi) <= FORWARD_TOL,
                          "row %zu pair %d: (%g, %g), want (%g, %g)", r, i, (double)yr[i],
                          (double)yr[i + D / 2], lo, hi);
            norm_x += (double)xr[i] * xr[i] + (double)xr[i + D / 2] * xr[i + D / 2];
            norm_y += (double)yr[i] * yr[i] + (double)yr[i + D / 2] * yr[i + D / 2];
        }
        ck_assert(fabs(norm_x - norm_y) <= 1e-5 * (1 + norm_x)); /* a rotation */
        if (t == 0) /* position 0 is not rotated */
            for (int i = 0; i < D; i++)
                ck_assert(yr[i] == xr[i]);
    }
    hl_tensor_free(x);
    hl_graph_free(g);
}
END_TEST

/* The point of rotary positions: q_t·k_s depends on t - s only. */
START_TEST(test_rope_relative)
{
    const int T = 9, D = 8;
    hl_tensor *q = hl_tensor_new("q", 2, (int[]){T, D}, false);
    hl_tensor *k = hl_tensor_new("k", 2, (int[]){T, D}, false);
    hl_tensor *a = tu_random("a", 1, &D, false, 2, -1, 1), *b = tu_random("b", 1, &D, false, 3, -1, 1);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) {
            q->data[t * D + i] = a->data[i]; /* the same vector at every position */
            k->data[t * D + i] = b->data[i];
        }
    hl_graph *g = hl_graph_new(0);
    hl_tensor *rq = hl_rope(g, q, 100), *rk = hl_rope(g, k, 100);
    ck_assert(!hl_graph_failed(g));
    for (int off = 0; off < 4; off++) {
        double first = 0;
        for (int s = 0; s + off < T; s++) {
            double dot = 0;
            for (int i = 0; i < D; i++)
                dot += (double)rq->data[(s + off) * D + i] * rk->data[s * D + i];
            if (s == 0)
                first = dot;
            ck_assert_msg(fabs(dot - first) <= 1e-5, "offset %d: q_%d·k_%d = %g, q_%d·k_0 = %g",
                          off, s + off, s, dot, off, first);
        }
    }
    hl_tensor_free(q);
    hl_tensor_free(k);
    hl_tensor_free(a);
    hl_tensor_free(b);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_rope_gradient)
{
    hl_real base = 10000;
    hl_tensor *x = tu_random("x", 4, (int[]){2, 3, 5, 6}, true, 4, -2, 2);
    tu_gradcheck("rope", build_rope, &base, &x, 1);
    base = 7;
    hl_tensor *y = tu_random("x", 2, (int[]){17, 34}, true, 5, -2, 2);
    tu_gradcheck("rope (17,34) base 7", build_rope, &base, &y, 1);
    hl_tensor_free(x);
    hl_tensor_free(y);
}
END_TEST

START_TEST(test_rope_threads)
{
    hl_real base = 10000;
    hl_tensor *x = tu_random("x", 4, (int[]){4, 4, 64, 34}, true, 6, -3, 3);
    ck_assert(x->numel >= HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("rope", build_rope, &base, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_rope_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *odd = hl_tensor_new("x", 3, (int[]){2, 4, 5}, false);
    hl_tensor *vec = hl_tensor_new("x", 1, (int[]){4}, false);
    tu_expect_error(g, hl_rope(g, odd, 10000), "rope", "(2,4,5)", "D even", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_rope(g, vec, 10000), "rope", "(4)", NULL);
    hl_graph_reset(g);
    hl_tensor *ok = hl_tensor_new("x", 2, (int[]){3, 4}, false);
    tu_expect_error(g, hl_rope(g, ok, 1), "rope", "base 1", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_rope(g, ok, (hl_real)NAN), "rope", "base", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_rope(g, NULL, 10000), "rope", "NULL", NULL);
    hl_tensor_free(odd);
    hl_tensor_free(vec);
    hl_tensor_free(ok);
    hl_graph_free(g);
}
END_TEST

/* GPT-NeoX's partial rotary: the first rot values of each row rotated with
 * the angles of a rot-wide row, the rest unchanged (bit for bit). */
static void check_partial_forward(int T, int D, int rot, double base, uint64_t seed)
{
    hl_tensor *x = tu_random("x", 3, (int[]){2, T, D}, false, seed, -2, 2);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_rope_partial(g, x, (hl_real)base, rot);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    ck_assert(hl_tensor_same_shape(x, y));
    const int half = rot / 2;
    for (size_t r = 0; r < x->numel / D; r++) {
        const int t = (int)(r % T);
        const hl_real *xr = x->data + r * D, *yr = y->data + r * D;
        for (int i = 0; i < half; i++) {
            /* inv_freq = 1 / base^(arange(0, rot, 2) / rot), as Hugging Face's */
            const double th = t * (1 / pow(base, (2.0 * i) / rot));
            const double lo = xr[i] * cos(th) - xr[i + half] * sin(th);
            const double hi = xr[i + half] * cos(th) + xr[i] * sin(th);
            ck_assert_msg(fabs(yr[i] - lo) <= FORWARD_TOL && fabs(yr[i + half] - hi) <= FORWARD_TOL,
                          "T %d D %d rot %d, row %zu pair %d: (%g, %g), want (%g, %g)", T, D, rot,
                          r, i, (double)yr[i], (double)yr[i + half], lo, hi);
        }
        ck_assert_msg(!memcmp(yr + rot, xr + rot, (size_t)(D - rot) * sizeof *yr),
                      "T %d D %d rot %d, row %zu: the pass-through part changed", T, D, rot, r);
    }
    hl_tensor_free(x);
    hl_graph_free(g);
}

START_TEST(test_rope_partial_forward)
{
    check_partial_forward(17, 10, 4, 10000, 11);
    check_partial_forward(5, 7, 6, 100, 12); /* D odd: only rot must be even */
    check_partial_forward(9, 64, 16, 10000, 13); /* Pythia: rotary_pct 0.25 */
    check_partial_forward(3, 34, 2, 7, 14);
    check_partial_forward(6, 12, 12, 500, 15);
}
END_TEST

/* hl_rope is hl_rope_partial with rot_dims = D, forward and backward. */
START_TEST(test_rope_partial_whole_row)
{
    const int shapes[][4] = {{2, 3, 5, 6}, {1, 2, 17, 34}, {2, 2, 9, 128}};
    for (int k = 0; k < 3; k++) {
        hl_tensor *x = tu_random("x", 4, shapes[k], true, 16 + (uint64_t)k, -2, 2);
        partial whole = {10000, 0}, same = {10000, shapes[k][3]};
        size_t n_a, n_b;
        hl_real *a = tu_forward_backward(build_rope_partial, &whole, &x, 1, &n_a);
        hl_real *b = tu_forward_backward(build_rope_partial, &same, &x, 1, &n_b);
        ck_assert_uint_eq(n_a, n_b);
        ck_assert_msg(!memcmp(a, b, n_a * sizeof *a), "rope and rope_partial (D %d) differ",
                      shapes[k][3]);
        free(a);
        free(b);
        hl_tensor_free(x);
    }
}
END_TEST

START_TEST(test_rope_partial_gradient)
{
    hl_tensor *x = tu_random("x", 4, (int[]){2, 3, 5, 7}, true, 17, -2, 2);
    tu_gradcheck("rope_partial rot 4 of 7", build_rope_partial, &(partial){100, 4}, &x, 1);
    tu_gradcheck("rope_partial rot 2 of 7", build_rope_partial, &(partial){7, 2}, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_rope_partial_threads)
{
    hl_tensor *x = tu_random("x", 4, (int[]){4, 4, 64, 34}, true, 18, -3, 3);
    ck_assert(x->numel >= HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("rope_partial", build_rope_partial, &(partial){10000, 10}, &x, 1);
    hl_tensor_free(x);
}
END_TEST

START_TEST(test_rope_partial_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *x = hl_tensor_new("x", 3, (int[]){2, 4, 7}, false);
    hl_tensor *vec = hl_tensor_new("x", 1, (int[]){4}, false);
    const int bad[] = {0, 3, 8, -2, 1};
    for (int i = 0; i < 5; i++) {
        char rot[32];
        snprintf(rot, sizeof rot, "rot_dims %d", bad[i]);
        tu_expect_error(g, hl_rope_partial(g, x, 10000, bad[i]), "rope_partial", rot, "2..D = 7",
                        "(2,4,7)", NULL);
        hl_graph_reset(g);
    }
    tu_expect_error(g, hl_rope_partial(g, vec, 10000, 2), "rope_partial", "(4)", "(...,T,D)",
                    NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_rope_partial(g, x, 1, 4), "rope_partial", "base 1", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_rope_partial(g, NULL, 10000, 4), "rope_partial", "NULL", NULL);
    hl_tensor_free(x);
    hl_tensor_free(vec);
    hl_graph_free(g);
}
END_TEST

Suite *rope_suite(void)
{
    Suite *s = suite_create("rope");
    TCase *tc = tcase_create("rope");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_rope_forward);
    tcase_add_test(tc, test_rope_relative);
    tcase_add_test(tc, test_rope_gradient);
    tcase_add_test(tc, test_rope_threads);
    tcase_add_test(tc, test_rope_errors);
    tcase_add_test(tc, test_rope_partial_forward);
    tcase_add_test(tc, test_rope_partial_whole_row);
    tcase_add_test(tc, test_rope_partial_gradient);
    tcase_add_test(tc, test_rope_partial_threads);
    tcase_add_test(tc, test_rope_partial_errors);
    suite_add_tcase(s, tc);
    return s;
}
