#!/usr/bin/env python3
"""Prints the erf polynomial coefficients of ops/vmath.c and their error.

Each piece is fitted to Chebyshev nodes by mpmath.chebyfit (nearly minimax),
highest power first, as ops/vmath.c's horner() takes them:
  G(t) = erf(sqrt(z))/sqrt(z) at z = t + 2, t in [-2, 2]   (|x| < 2: erf = |x|·G(x² - 2))
  E(t) = erfc(t + 3), t in [-1, 1]                          (2 ≤ |x| ≤ 4: erf = 1 - E(|x| - 3))
Needs python3-mpmath.
"""
import mpmath as mp

mp.mp.dps = 40


def g(z):
    return 2 / mp.sqrt(mp.pi) if z == 0 else mp.erf(mp.sqrt(z)) / mp.sqrt(z)


for name, f, terms in (("ERF_G", lambda t: g(t + 2), 11), ("ERF_E", lambda t: mp.erfc(t + 3), 12)):
    interval = [-2, 2] if name == "ERF_G" else [-1, 1]
    coeffs, err = mp.chebyfit(f, interval, terms, error=True)
    print("%s (max error %s):" % (name, mp.nstr(err, 3)))
    print(",\n".join("    %.9ef" % float(c) for c in coeffs))
