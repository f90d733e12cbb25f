"""The expected best validation score after n trials of a search, with its spread (Dodge et al. 2019,
"Show Your Work: Improved Reporting of Experimental Results", EMNLP, section 3).

From N observed trial scores, the best of n trials drawn with replacement has the empirical distribution
P(best <= v_(i)) = (i / N)^n over the sorted scores v_(1) <= ... <= v_(N), so

    E[best_n] = sum_i v_(i) * ((i / N)^n - ((i - 1) / N)^n)

and its variance is E[best_n^2] - E[best_n]^2. For a score that is minimised (a loss), the best is the
lowest: the same estimator on the negated scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def expected_best(scores: Sequence[float], n: int, *, maximize: bool = True) -> tuple[float, float]:
    """(expected best of ``n`` trials, its standard deviation) from the observed ``scores``."""
    if n < 1:
        raise ValueError(f"n={n}: the number of trials must be at least 1")
    values = np.asarray(list(scores), dtype=float)
    if values.size == 0 or not np.all(np.isfinite(values)):
        raise ValueError("scores: need at least one score, all finite (a failed trial has no score)")
    ordered = np.sort(values if maximize else -values)  # ascending: the best is the last
    N = ordered.size
    i = np.arange(1, N + 1)
    weights = (i / N) ** n - ((i - 1) / N) ** n  # P(best of n = the i-th smallest)
    mean = float(np.sum(weights * ordered))
    variance = max(float(np.sum(weights * ordered**2)) - mean**2, 0.0)  # rounding can dip below 0
    return (mean if maximize else -mean), variance**0.5


def expected_best_curve(scores: Sequence[float], *, maximize: bool = True) -> list[tuple[int, float, float]]:
    """(n, expected best, standard deviation) for n = 1 .. the number of scores."""
    return [(n, *expected_best(scores, n, maximize=maximize)) for n in range(1, len(list(scores)) + 1)]
