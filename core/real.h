/*
 * real.h: the one scalar type of headlab.
 *
 * Everything numeric is hl_real: float by default, double when built with
 * `make REAL=double` (which defines HL_REAL_DOUBLE). The double build exists
 * so finite-difference gradient checks can use tight tolerances.
 *
 *     hl_real y = HL_EXP(x);   // expf in the float build, exp in the double build
 */
#ifndef HL_REAL_H
#define HL_REAL_H

#include <float.h>
#include <math.h>

#ifdef HL_REAL_DOUBLE
typedef double hl_real;
#define HL_REAL_NAME "double"
#define HL_REAL_MAX DBL_MAX /* the largest finite hl_real */
#define HL_REAL_MIN DBL_MIN /* the smallest normal positive hl_real */
#define HL_EXP exp
#define HL_LOG log
#define HL_SQRT sqrt
#define HL_TANH tanh
#define HL_ERF erf
#define HL_FABS fabs
#else
typedef float hl_real;
#define HL_REAL_NAME "float"
#define HL_REAL_MAX FLT_MAX
#define HL_REAL_MIN FLT_MIN
#define HL_EXP expf
#define HL_LOG logf
#define HL_SQRT sqrtf
#define HL_TANH tanhf
#define HL_ERF erff
#define HL_FABS fabsf
#endif

#endif
