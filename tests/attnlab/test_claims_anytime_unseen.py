"""The adaptive sweep's t-mixture on a bounded metric: its interval also spans the divergence rates its seeds leave
possible (attnlab.sequential.widened), as the fixed-n engine's does
(tests/analysis/claims/test_claims_unseen_divergence.py).

Expected values: the beta-binomial mixture's bound found by integrating the mixture numerically (scipy's quad) and
solving for the rate (brentq), and Lai's t-mixture interval from its closed form written out here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize

from attnlab.sequential import replay, unseen_rate

ALPHA = 0.05
# paired differences a − b of 10 seeds of two accuracies, a about 4 points ahead, none diverged
DIFFS = [0.041, 0.038, 0.044, 0.036, 0.043, 0.040, 0.039, 0.042, 0.037, 0.045]


def mixture_bound(n: int, alpha: float) -> float:
    """The largest rate p the uniform-prior mixture over n events-free trials keeps: its martingale
    ∫ (1 − θ)^n dθ / (1 − p)^n reaches 1 / alpha there."""
    mass = integrate.quad(lambda t: (1 - t) ** n, 0, 1)[0]
    return optimize.brentq(lambda p: mass / (1 - p) ** n - 1 / alpha, 0.0, 1 - 1e-9, xtol=1e-14)


@pytest.mark.parametrize("n", [1, 3, 10, 30])
def test_the_unseen_rate_is_where_the_beta_binomial_mixture_reaches_one_over_alpha(n):
    assert unseen_rate(n, ALPHA / 4) == pytest.approx(mixture_bound(n, ALPHA / 4), rel=1e-9)


def lai(values: list[float], alpha: float, c: float = 1.0) -> tuple[float, float]:
    """Lai's t-mixture interval after all values, closed form: mean ± s·sqrt(R / (n − R)), s the 1/n deviation."""
    x = np.array(values)
    n = len(x)
    r = (n + c) * (1 - (alpha * alpha * c / (n + c)) ** (1 / n))
    half = x.std() * math.sqrt(r / (n - r)) if r < n else math.inf  # too few values: no interval yet
    return x.mean() - half, x.mean() + half


def test_an_accuracy_is_decided_on_its_scored_means_not_its_converged_seeds_alone():
    """Before: supported after 3 pairs (the t-mixture at alpha on converged differences); a cell diverging one seed
    in ten shows none in ten seeds 35% of the time."""
    plain = replay(DIFFS, "greater", 0.0, None, ALPHA, metric="test/score")  # a metric without a range
    assert plain.verdict == "supported"
    found = replay(DIFFS, "greater", 0.0, None, ALPHA, metric="test/token_acc")
    assert found.verdict is None and found.n == len(DIFFS)
    # the running intersection is the last interval here (equal spread throughout), widened by 10 seeds' bound
    low, high = lai(DIFFS, ALPHA / 2)
    slack = mixture_bound(len(DIFFS), ALPHA / 4) * 1.0  # an accuracy's range: 1
    assert found.low == pytest.approx(max(lai(DIFFS[:k], ALPHA / 2)[0] for k in range(2, 11)) - slack, rel=1e-9)
    assert found.high == pytest.approx(min(lai(DIFFS[:k], ALPHA / 2)[1] for k in range(2, 11)) + slack, rel=1e-9)
    assert low - slack < 0 < high + slack


def test_a_ratio_and_an_unbounded_metric_are_not_widened():
    ratios = [1.02, 0.98, 1.01, 0.99, 1.0, 1.03]
    plain = replay(ratios, "ratio", 0.0, (0.5, None), ALPHA, metric="test/score")
    assert replay(ratios, "ratio", 0.0, (0.5, None), ALPHA, metric="token_acc@16") == plain
    losses = replay(DIFFS, "greater", 0.0, None, ALPHA, metric="val/loss")
    assert losses == replay(DIFFS, "greater", 0.0, None, ALPHA, metric="test/score")
