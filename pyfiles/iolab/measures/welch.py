"""Student's t, and the ratio B/A of two sets of repeats' geometric means with its Welch t-interval on their
logarithms (iolab.report.compare's docstring says why that interval).

    ratio_ci([100, 104, 98], [90, 93, 88]) → Ratio(ratio≈0.90, low, high, n_a=3, n_b=3)
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from iolab.units import significant

LEVEL = 0.95  # the interval's confidence


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom (df may be fractional, as Welch's is).

    SciPy's (Cephes') inverse of the t distribution; imported here, when a comparison has repeats.

    >>> round(t_quantile(0.975, 1), 3), round(t_quantile(0.975, 10), 3)
    (12.706, 2.228)
    """
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


@dataclasses.dataclass(frozen=True)
class Ratio:
    ratio: float  # geometric mean of B over geometric mean of A
    low: float | None  # the 95% interval; None when unknown (a single repeat)
    high: float | None
    n_a: int
    n_b: int

    @property
    def change(self) -> float:
        return self.ratio - 1

    def interval(self) -> str:
        if self.low is None:
            return "unknown (n=1)"
        return f"{significant(self.low)} – {significant(self.high or 0.0)}"


def ratio_ci(a: list[float], b: list[float], level: float | None = LEVEL) -> Ratio:
    """B/A with a Welch t-interval on logs (see the module's docstring for why); `level` None: no interval."""
    if min(a + b) <= 0:
        raise ValueError("ratios need positive values")
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    diff = statistics.fmean(lb) - statistics.fmean(la)
    ratio = math.exp(diff)
    if len(a) < 2 or len(b) < 2 or level is None:
        return Ratio(ratio, None, None, len(a), len(b))
    va, vb = statistics.variance(la) / len(a), statistics.variance(lb) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return Ratio(ratio, ratio, ratio, len(a), len(b))
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t_quantile(0.5 + level / 2, df) * se
    return Ratio(ratio, math.exp(diff - half), math.exp(diff + half), len(a), len(b))
