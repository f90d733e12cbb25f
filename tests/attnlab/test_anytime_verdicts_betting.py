"""The betting confidence sequence (attnlab/betting.py) is the paper's: Waudby-Smith and Ramdas (2024, JRSS-B),
Section 4, the hedged capital process with the predictable plug-in bet truncated per candidate at c/m (c/(1 − m)) and
nowhere else. Checked against the paper's formulas written out here on a grid of candidate means, and against the
authors' package confseq where it is installed (it needs a C++ build; the test skips without it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab import betting

ALPHA = 0.05
GRID = np.linspace(0.0, 1.0, 20_001)  # candidate means on [0, 1], 5e-5 apart
STEP = GRID[1] - GRID[0]
# paired accuracy differences in [-1, 1] over 10 seeds: small, mostly positive, one tie at 0
DIFFS = [0.03, -0.02, 0.05, 0.01, 0.0, 0.04, -0.01, 0.02, 0.03, 0.01]


def paper_cs(y: np.ndarray, alpha: float, c: float = 0.5, theta: float = 0.5) -> list[tuple[float, float]]:
    """The running intersection of {m : max(theta K_t^+(m), (1 − theta) K_t^-(m)) < 1/alpha} on GRID, from the
    paper's formulas: mu_t = (1/2 + sum y) / (t + 1), sigma2_t = (1/4 + sum (y_i − mu_i)^2) / (t + 1),
    lambda_t = sqrt(2 log(2/alpha) / (sigma2_{t−1} t log(1 + t))), lambda_t^+(m) = min(lambda_t, c/m),
    lambda_t^-(m) = min(lambda_t, c/(1 − m))."""
    t = np.arange(1, len(y) + 1)
    mu = (0.5 + np.cumsum(y)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((y - mu) ** 2)) / (t + 1)
    sigma2_before = np.concatenate([[0.25], sigma2[:-1]])
    lam = np.sqrt(2 * math.log(2 / alpha) / (sigma2_before * t * np.log(1 + t)))  # (T,)
    with np.errstate(divide="ignore"):
        up = np.minimum(lam[:, None], c / GRID[None, :])  # (T, M)
        down = np.minimum(lam[:, None], c / (1 - GRID[None, :]))
    log_up = np.cumsum(np.log1p(up * (y[:, None] - GRID[None, :])), axis=0)
    log_down = np.cumsum(np.log1p(-down * (y[:, None] - GRID[None, :])), axis=0)
    hedged = np.maximum(math.log(theta) + log_up, math.log(1 - theta) + log_down)
    inside = np.logical_and.accumulate(hedged < math.log(1 / alpha), axis=0)  # the running intersection
    return [(float(GRID[row].min()), float(GRID[row].max())) for row in inside]


LAWS = {
    "small differences": np.array(DIFFS),
    "beta accuracies' differences": np.random.default_rng(0).beta(95, 5, 40)
    - np.random.default_rng(1).beta(90, 10, 40),
    "far from the middle": np.full(12, 0.9),  # candidates near the edges: c/m exceeds 1 there
}


@pytest.mark.parametrize("law", LAWS)
def test_the_intervals_are_the_papers_at_every_look(law):
    d = LAWS[law]
    ours = betting.intervals(list(d), ALPHA, -1.0, 1.0)
    for (low, high), (p_low, p_high) in zip(ours, paper_cs((d + 1) / 2, ALPHA)):
        # ours is bisected to 1e-10 on the excluded side of each root: within one grid step of the grid's edges
        assert (low + 1) / 2 == pytest.approx(p_low, abs=STEP) and (high + 1) / 2 == pytest.approx(p_high, abs=STEP)


def test_ten_small_differences_give_the_papers_interval_not_the_whole_range():
    # with the bet capped at 1/2 before the per-candidate truncation, the interval after 10 seeds was [−1, 1]
    low, high = betting.intervals(DIFFS, ALPHA, -1.0, 1.0)[-1]
    assert -0.47 < low < -0.46 and 0.47 < high < 0.49


def test_the_intervals_match_confseq():
    confseq = pytest.importorskip("confseq.betting")
    for d in LAWS.values():
        y = (d + 1) / 2
        lower, upper = confseq.betting_cs(y, alpha=ALPHA, breaks=4000, running_intersection=True)
        ours = betting.intervals(list(d), ALPHA, -1.0, 1.0)
        for (low, high), c_low, c_high in zip(ours, lower, upper):
            assert (low + 1) / 2 == pytest.approx(c_low, abs=1 / 4000) and (high + 1) / 2 == pytest.approx(
                c_high, abs=1 / 4000
            )
