/* Eigenvalues and small products in double precision: see linalg.h. */
#include "analysis/linalg.h"

#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef double complex cplx;

void hl_matmul_d(int m, int n, int k, const double *a, int ta, const double *b, int tb, double *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (ta ? a[(long)p * m + i] : a[(long)i * k + p]) *
                     (tb ? b[(long)j * k + p] : b[(long)p * n + j]);
            c[(long)i * n + j] = s;
        }
}

double hl_dot_d(const double *x, const double *y, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++)
        s += x[i] * y[i];
    return s;
}

/* Householder reduction of h (n,n) to upper Hessenberg form, in place: a
 * similarity transform, so the eigenvalues stay. */
static void to_hessenberg(int n, double *h, double *v)
{
    for (int k = 0; k + 2 < n; k++) {
        const int m = n - k - 1; /* rows k+1..n-1 */
        double norm = 0;
        for (int i = 0; i < m; i++)
            norm += h[(k + 1 + i) * n + k] * h[(k + 1 + i) * n + k];
        norm = sqrt(norm);
        if (norm == 0)
            continue;
        const double x0 = h[(k + 1) * n + k], alpha = x0 > 0 ? -norm : norm;
        double vnorm = 0;
        for (int i = 0; i < m; i++) {
            v[i] = h[(k + 1 + i) * n + k] - (i == 0 ? alpha : 0);
            vnorm += v[i] * v[i];
        }
        vnorm = sqrt(vnorm);
        for (int i = 0; i < m; i++)
            v[i] /= vnorm;
        for (int j = 0; j < n; j++) { /* (I - 2vvᵀ)·h */
            double s = 0;
            for (int i = 0; i < m; i++)
                s += v[i] * h[(k + 1 + i) * n + j];
            for (int i = 0; i < m; i++)
                h[(k + 1 + i) * n + j] -= 2 * v[i] * s;
        }
        for (int r = 0; r < n; r++) { /* h·(I - 2vvᵀ) */
            double s = 0;
            for (int i = 0; i < m; i++)
                s += h[r * n + k + 1 + i] * v[i];
            for (int i = 0; i < m; i++)
                h[r * n + k + 1 + i] -= 2 * s * v[i];
        }
    }
}

/* The eigenvalue of the trailing 2x2 block of rows lo..hi nearer its last
 * diagonal entry (Wilkinson's shift). */
static cplx wilkinson_shift(const cplx *h, int n, int hi)
{
    const cplx a = h[(hi - 1) * n + hi - 1], b = h[(hi - 1) * n + hi];
    const cplx c = h[hi * n + hi - 1], d = h[hi * n + hi];
    const cplx half = (a + d) / 2, disc = csqrt(half * half - (a * d - b * c));
    const cplx mu1 = half + disc, mu2 = half - disc;
    return cabs(mu1 - d) < cabs(mu2 - d) ? mu1 : mu2;
}

/* One shifted QR step on the active block lo..hi of the Hessenberg matrix h:
 * h - mu·I = QR by Givens rotations, then h = RQ + mu·I. */
static void qr_step(cplx *h, int n, int lo, int hi, cplx mu, cplx *cs, cplx *sn)
{
    for (int k = lo; k <= hi; k++)
        h[k * n + k] -= mu;
    for (int k = lo; k < hi; k++) {
        const cplx x = h[k * n + k], y = h[(k + 1) * n + k];
        const double r = hypot(cabs(x), cabs(y));
        cs[k] = r > 0 ? x / r : 1;
        sn[k] = r > 0 ? y / r : 0;
        for (int j = k; j <= hi; j++) {
            const cplx p = h[k * n + j], q = h[(k + 1) * n + j];
            h[k * n + j] = conj(cs[k]) * p + conj(sn[k]) * q;
            h[(k + 1) * n + j] = -sn[k] * p + cs[k] * q;
        }
    }
    for (int k = lo; k < hi; k++)
        for (int i = lo; i <= hi; i++) {
            const cplx p = h[i * n + k], q = h[i * n + k + 1];
            h[i * n + k] = p * cs[k] + q * sn[k];
            h[i * n + k + 1] = -p * conj(sn[k]) + q * conj(cs[k]);
        }
    for (int k = lo; k <= hi; k++)
        h[k * n + k] += mu;
}

/* Eigenvalues of the complex Hessenberg matrix h, deflating from the bottom. */
static hl_status hessenberg_qr(cplx *h, int n, double norm, double *re, double *im,
                               hl_error *err)
{
    cplx *cs = malloc(sizeof *cs * (size_t)n), *sn = malloc(sizeof *sn * (size_t)n);
    if (!cs || !sn) {
        free(cs);
        free(sn);
        return hl_error_set(err, HL_ERR_NOMEM, "eigenvalues: out of memory (n = %d)", n);
    }
    hl_status s = HL_OK;
    for (int hi = n - 1, iter = 0; hi >= 0;) {
        int lo = hi;
        /* A subdiagonal entry is negligible against its two diagonal
         * neighbours, or against the whole matrix: the second keeps a cluster
         * of tiny eigenvalues (a low-rank circuit's) from iterating for ever,
         * at a backward error of DBL_EPSILON·|A|, as any stable solver has. */
        while (lo > 0) {
            const double scale = cabs(h[lo * n + lo]) + cabs(h[(lo - 1) * n + lo - 1]);
            const double sub = cabs(h[lo * n + lo - 1]);
            if (sub <= DBL_EPSILON * scale || sub <= DBL_EPSILON * norm)
                break;
            lo--;
        }
        if (lo == hi) {
            re[hi] = creal(h[hi * n + hi]);
            im[hi] = cimag(h[hi * n + hi]);
            hi--;
            iter = 0;
            continue;
        }
        if (++iter > 60 * n) {
            s = hl_error_set(err, HL_ERR_NUMERIC, "eigenvalues: the QR iteration did not "
                             "converge for a (%d,%d) matrix", n, n);
            break;
        }
        /* Every 10th try an exceptional shift breaks a cycle. */
        cplx mu = iter % 10 == 0 ? h[hi * n + hi] + cabs(h[hi * n + hi - 1])
                                 : wilkinson_shift(h, n, hi);
        qr_step(h, n, lo, hi, mu, cs, sn);
    }
    free(cs);
    free(sn);
    return s;
}

hl_status hl_eigenvalues(int n, const double *a, double *re, double *im, hl_error *err)
{
    if (n < 1 || !a || !re || !im)
        return hl_error_set(err, HL_ERR_ARG, "eigenvalues: need a (n,n) matrix with n >= 1");
    double norm = 0;
    for (long i = 0; i < (long)n * n; i++) {
        if (!isfinite(a[i]))
            return hl_error_set(err, HL_ERR_NUMERIC, "eigenvalues: the (%d,%d) matrix holds a "
                                "NaN or an infinity", n, n);
        norm += a[i] * a[i];
    }
    double *h = malloc(sizeof *h * (size_t)n * n), *v = malloc(sizeof *v * (size_t)n);
    cplx *hc = malloc(sizeof *hc * (size_t)n * n);
    hl_status s = HL_OK;
    if (!h || !v || !hc) {
        s = hl_error_set(err, HL_ERR_NOMEM, "eigenvalues: out of memory (n = %d)", n);
    } else if (norm == 0) {
        memset(re, 0, sizeof *re * (size_t)n);
        memset(im, 0, sizeof *im * (size_t)n);
    } else {
        memcpy(h, a, sizeof *h * (size_t)n * n);
        to_hessenberg(n, h, v);
        for (long i = 0; i < (long)n * n; i++)
            hc[i] = h[i];
        s = hessenberg_qr(hc, n, sqrt(norm), re, im, err);
    }
    free(h);
    free(v);
    free(hc);
    return s;
}
