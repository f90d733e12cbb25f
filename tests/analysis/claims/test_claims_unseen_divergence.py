"""A bounded metric's claim decided on the scored means, whatever the divergence rates the seeds leave possible
(analysis.stats.unseen_divergence), met where a user meets it: ``python -m analysis.claims DIR --claims FILE``.

Ten seeds of a cell that all converged are what a cell diverging one seed in ten shows 35% of the time; before, Welch's
test on them supported "a beats b" as if no divergence could be hiding. The expected intervals are written out here from
scipy's Clopper–Pearson interval (``binomtest(...).proportion_ci``) and Welch's formula at the corners of the box.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from tests.analysis.claims.test_claims_verdicts import SOFT, claim, claims_file, verdicts, write_folder

ALPHA = 0.05
STRONG = [0.951, 0.948, 0.955, 0.944, 0.957, 0.949, 0.952, 0.946, 0.958, 0.950]  # 0 of 10 diverged
WEAK = [0.301, 0.288, 0.312, 0.295, 0.306, 0.299, 0.284, 0.309, 0.291, 0.303]


def rate_bounds(diverged: int, n: int, tail: float) -> tuple[float, float]:
    """Clopper–Pearson bounds of a divergence rate, each one-sided at ``tail``."""
    ci = sps.binomtest(diverged, n).proportion_ci(confidence_level=1 - 2 * tail, method="exact")
    return ci.low, ci.high


def welch_low(a: np.ndarray, b: np.ndarray, wa: float, wb: float, tail: float) -> float:
    """Welch's one-sided lower edge of wa·mean(a) − wb·mean(b)."""
    va, vb = wa**2 * a.var(ddof=1) / len(a), wb**2 * b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return wa * a.mean() - wb * b.mean() - sps.t.ppf(1 - tail, df) * math.sqrt(va + vb)


def by_hand(a: list[float], b: list[float]) -> tuple[float, float]:
    """The 95% interval of a − b (scored means, accuracy worst 0): each edge at 0.025, of which half goes to Welch
    and a quarter to each side's Clopper–Pearson bound; the box's extreme corner."""
    x, y, tail = np.array(a), np.array(b), ALPHA / 2
    low_a, high_a = rate_bounds(0, len(a), tail / 4)
    low_b, high_b = rate_bounds(0, len(b), tail / 4)
    lower = min(welch_low(x, y, wa, wb, tail / 2) for wa, wb in itertools.product((1 - high_a, 1.0), (0.0, 1 - low_b)))
    upper = -min(welch_low(y, x, wb, wa, tail / 2) for wb, wa in itertools.product((1 - high_b, 1.0), (0.0, 1 - low_a)))
    return lower, upper


def test_ten_converged_seeds_do_not_exclude_a_divergence_they_would_rarely_show(tmp_path, capsys):
    """Before: [SUPPORTED] a − b > 0 by Welch on the converged seeds (p < 0.001); a diverging 1 seed in 10 shows no
    divergence in 10 seeds 35% of the time, and its scored mean would then be below b's."""
    folder = write_folder(tmp_path / "sweep", {"local": STRONG, "soft": SOFT})
    code, out = verdicts(capsys, folder, claims_file(tmp_path / "c.yaml", claim("local beats soft", "greater")))
    assert sps.ttest_ind(STRONG, SOFT, equal_var=False).pvalue < 0.001  # what decided before
    assert code == 1 and "[INCONCLUSIVE] local beats soft" in out, out
    low, high = by_hand(STRONG, SOFT)
    # 0 of 10 leave a divergence rate up to 0.398 (one-sided at 0.025 / 4): a's scored mean may be 0.6 × 0.95
    assert rate_bounds(0, 10, ALPHA / 8)[1] == pytest.approx(1 - (ALPHA / 8) ** (1 / 10), rel=1e-9)
    assert f"95% interval [{low:.3f}, {high:.3f}]" in out, out
    assert low < 0 < high
    assert "10 completed, 0 diverged, 0 failed" in out


def test_a_gap_larger_than_any_hidden_divergence_is_still_decided(tmp_path, capsys):
    folder = write_folder(tmp_path / "sweep", {"local": STRONG, "soft": WEAK})
    code, out = verdicts(capsys, folder, claims_file(tmp_path / "c.yaml", claim("local beats soft", "greater")))
    low, high = by_hand(STRONG, WEAK)
    assert low > 0 and code == 0 and "[SUPPORTED] local beats soft" in out, out
    assert f"95% interval [{low:.3f}, {high:.3f}]" in out, out
