"""Bracketed searches the planner's answers share: a sign change on a log scale, and the first integer a test holds.

:func:`sign_change_log` is the ITP method (Oliveira and Takahashi, ACM TOMS 47(1), 2020) on log(x): it never takes
more evaluations than bisection to the same tolerance plus ``ITP_N0``, and where the function is smooth near its sign
change it converges superlinearly. Its interpolation is the secant in 1/x (a step's time is a constant plus its bytes
over the bandwidth, a straight line in 1/bandwidth), in the Illinois variant, which halves the weight of an end kept
twice so that a convex function does not pin one end. A bandwidth search over 1 kbit/s .. 1 Pbit/s to 1e-9 then
takes about ten evaluations instead of bisection's ~35.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["sign_change_log", "max_evaluations", "bisect_log", "bisect_int"]

ITP_K2 = 2.0  # truncation exponent (below 1 + golden ratio: superlinear)
ITP_N0 = 4  # evaluations allowed beyond bisection's


def max_evaluations(lo: float, hi: float, rel_tol: float) -> int:
    """The most evaluations :func:`sign_change_log` takes on [lo, hi] to ``rel_tol``: its two ends, bisection's
    halvings of log(hi / lo) down to ``rel_tol``, and ITP's one more."""
    width = math.log(hi / lo)
    return 2 + max(0, math.ceil(math.log2(width / rel_tol))) + ITP_N0


def sign_change_log(f: Callable[[float], float], lo: float, hi: float, rel_tol: float = 1e-9) -> float:
    """Where ``f`` changes sign in [lo, hi] (negative vs not negative at the ends), to within ``rel_tol`` of log(x):
    the geometric middle of the last bracket. Where both ends are on one side it converges on ``hi``."""
    a, b = math.log(lo), math.log(hi)
    ya, yb = f(lo), f(hi)
    negative_at_lo = ya < 0
    if (yb < 0) == negative_at_lo:  # no bracket: bisection converges on hi, so answer that at once
        return math.exp(b - 0.5 * min(rel_tol, b - a))
    eps = 0.5 * rel_tol
    k1 = 0.2 / (b - a)
    n_max = max(0, math.ceil(math.log2((b - a) / (2 * eps)))) + ITP_N0
    j = 0
    kept = 0  # +1: the last evaluations moved a (kept b), -1: moved b; Illinois halves the kept end's weight
    wa, wb = ya, yb  # the ends' values as the secant weighs them
    while b - a > rel_tol and j < n_max:  # n_max steps leave at most rel_tol (but for rounding)
        half = 0.5 * (a + b)
        radius = eps * 2.0 ** (n_max - j) - 0.5 * (b - a)
        truncation = k1 * (b - a) ** ITP_K2
        interpolated = _secant_in_inverse(a, b, wa, wb)
        sigma = math.copysign(1.0, half - interpolated)
        toward = interpolated + sigma * truncation if truncation <= abs(half - interpolated) else half
        x = toward if abs(toward - half) <= radius else half - sigma * radius
        x = min(max(x, a + 0.5 * eps), b - 0.5 * eps)  # a step off each end: a root on an end closes the bracket
        y = f(math.exp(x))
        if (y < 0) == negative_at_lo:
            a, wa = x, y
            wb, kept = (0.5 * wb if kept > 0 else wb), 1
        else:
            b, wb = x, y
            wa, kept = (0.5 * wa if kept < 0 else wa), -1
        j += 1
    return math.exp(0.5 * (a + b))


def _secant_in_inverse(a: float, b: float, ya: float, yb: float) -> float:
    """log(x) where the line through (1/x_a, ya) and (1/x_b, yb) crosses zero (the bracket's middle where it is
    flat)."""
    if yb == ya or not (math.isfinite(ya) and math.isfinite(yb)):
        return 0.5 * (a + b)
    sa, sb = math.exp(-a), math.exp(-b)
    s = (yb * sa - ya * sb) / (yb - ya)
    if not s > 0:
        return 0.5 * (a + b)
    return min(max(-math.log(s), a), b)


def bisect_log(f: Callable[[float], float], lo: float, hi: float, rel_tol: float = 1e-9) -> float:
    """Where ``f`` changes sign in [lo, hi] (negative vs not negative at the ends), halving log(x) to ``rel_tol``:
    for a function that jumps (step curves crossing where a window's rounds change), where interpolation gains
    nothing and halving decides, among several sign changes close together, always the same one."""
    negative_at_lo = f(lo) < 0
    a, b = math.log(lo), math.log(hi)
    while b - a > rel_tol:
        mid = 0.5 * (a + b)
        if (f(math.exp(mid)) < 0) == negative_at_lo:
            a = mid
        else:
            b = mid
    return math.exp(0.5 * (a + b))


def bisect_int(pred: Callable[[int], bool], lo: int, hi: int) -> int:
    """Smallest k in (lo, hi] with pred(k), given pred(lo) false and pred(hi) true (assumed monotone there)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi
