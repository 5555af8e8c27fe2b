/*
 * sweep.h: how the finite-difference error depends on the step.
 *
 * A central difference (f(x+h) - f(x-h)) / 2h has two errors: truncation,
 * about h²·f'''/6, which falls with h, and rounding, about ε_mach·|f| / h,
 * which rises as h shrinks. Their sum is smallest near h ~ ε_mach^(1/3):
 * around 1e-3..1e-2 for float, 1e-5..1e-6 for double. A sweep runs the same
 * gradient check (core/gradcheck.h) at a list of steps and reports the error
 * at each, to show that curve and pick the step.
 *
 * Below an input's resolution the step vanishes: x+h and x-h round to the
 * same hl_real, there is no difference to take, and hl_gradcheck sees 0/0 for
 * that element. A sweep point counts such elements as `lost`; they are left
 * out of its maxima, and hl_gradcheck_sweep_best never picks a point with any.
 *
 *     double eps[] = {1e-1, 1e-2, 1e-3, 1e-4};
 *     hl_gradcheck_sweep_point pts[4];
 *     if (hl_gradcheck_sweep(g, build, NULL, &x, 1, eps, 4, NULL, pts) == HL_OK) {
 *         int best = hl_gradcheck_sweep_best(pts, 4);
 *         printf("best step %.0e: max abs err %.2e\n", pts[best].eps, pts[best].max_abs_err);
 *     }
 */
#ifndef HL_GRADCHECK_SWEEP_H
#define HL_GRADCHECK_SWEEP_H

#include <stddef.h>

#include "core/gradcheck.h"

typedef struct hl_gradcheck_sweep_point {
    double eps;         /* the step */
    double max_abs_err; /* max |analytic - numeric| over every checked input */
    double max_rel_err; /* max |analytic - numeric| / max(|analytic|, |numeric|) */
    size_t lost;        /* elements whose step rounds to nothing (not in the maxima) */
} hl_gradcheck_sweep_point;

/* Runs hl_gradcheck once per step eps[0..n_eps) with opts' reduction seed
 * (opts NULL: hl_gradcheck_defaults(); its eps, atol and rtol are not used)
 * and fills points[i] for eps[i]. HL_OK when every check ran; otherwise the
 * error status, with the message in g. */
hl_status hl_gradcheck_sweep(hl_graph *g, hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                             int n_inputs, const double *eps, int n_eps,
                             const hl_gradcheck_opts *opts, hl_gradcheck_sweep_point *points);

/* The index of the point with the smallest max_abs_err among those with no
 * lost element (the first of equals); -1 when there is none. */
int hl_gradcheck_sweep_best(const hl_gradcheck_sweep_point *points, int n);

#endif
