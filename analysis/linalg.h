/*
 * linalg.h: the small dense linear algebra the head analyses need, in double
 * precision on row-major arrays: eigenvalues of a general real matrix (for
 * the copying score of an OV circuit) and Frobenius norms of products of
 * low-rank factors (for composition scores).
 *
 *     double a[4] = {0, -1, 1, 0}, re[2], im[2];
 *     hl_eigenvalues(2, a, re, im, &err);          // ±i: re = {0, 0}, im = {1, -1}
 */
#ifndef HL_LINALG_H
#define HL_LINALG_H

#include "core/error.h"

/* The n eigenvalues of the real (n,n) matrix a (not changed), in no
 * particular order, by Householder reduction to Hessenberg form and the
 * shifted complex QR algorithm. HL_ERR_NUMERIC when a holds a NaN or an
 * infinity or the iteration does not converge, HL_ERR_NOMEM, HL_ERR_ARG for
 * n < 1. */
hl_status hl_eigenvalues(int n, const double *a, double *re, double *im, hl_error *err);

/* c (m,n) = a (m,k) · b (k,n), or with ta / tb the transpose of the stored a
 * (k,m) / b (n,k). */
void hl_matmul_d(int m, int n, int k, const double *a, int ta, const double *b, int tb, double *c);

/* tr(xᵀ·y) = Σ x∘y over n values. */
double hl_dot_d(const double *x, const double *y, long n);

#endif
