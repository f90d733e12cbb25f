"""The report's comparison tests are one registry kind: every registered test keeps the contract the comparison
table reads (antisymmetric estimate, a p-value, an interval around the estimate), Welch's matches its textbook
formula, and a throwaway test registered here is used by ``compare_cells`` and checked by the same contract."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.stats.comparison_tests import RESULT_KEYS, TESTS
from analysis.stats.inference import compare_cells
from attnlab.registry import registry

# unequal sizes and spreads, so that Welch's and the pooled t differ
A = [0.61, 0.64, 0.70, 0.58]
B = [0.52, 0.55, 0.50]


def test_problems(names: list[str]) -> list[str]:
    """What breaks the contract of ``compare_cells`` in any test of ``names``, on A against B."""
    problems = []
    for name in names:
        forward, backward = TESTS.get(name)(A, B, 0.95), TESTS.get(name)(B, A, 0.95)
        if not set(RESULT_KEYS) <= set(forward):
            problems.append(f"{name}: returns {sorted(forward)}, not {list(RESULT_KEYS)}")
            continue
        if not forward["diff"] == pytest.approx(-backward["diff"]) or forward["p"] != pytest.approx(backward["p"]):
            problems.append(f"{name}: swapping the samples changes more than the estimate's sign")
        if not 0 <= forward["p"] <= 1:
            problems.append(f"{name}: p={forward['p']} is no probability")
        low, high = forward["diff_low"], forward["diff_high"]
        if not (math.isnan(low) and math.isnan(high)) and not low <= forward["diff"] <= high:
            problems.append(f"{name}: the interval [{low}, {high}] misses the estimate {forward['diff']}")
    return problems


test_problems.__test__ = False  # a helper, not a test


def test_every_comparison_test_keeps_the_contract():
    assert test_problems(TESTS.names()) == [] and "welch" in TESTS.names()
    assert registry("statistical test") is TESTS


def test_welch_is_the_unequal_variance_t_of_the_textbook():
    a, b = np.array(A), np.array(B)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))  # Welch–Satterthwaite
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    got = TESTS.get("welch")(A, B, 0.95)
    assert got["t"] == pytest.approx(t) and got["p"] == pytest.approx(2 * stats.t.sf(abs(t), df))
    assert (got["diff_low"], got["diff_high"]) == pytest.approx(
        (a.mean() - b.mean() - half, a.mean() - b.mean() + half)
    )


def runs_frame(cells: dict[str, list[float]], metric: str) -> pd.DataFrame:
    rows = [
        {"task": "copy", "cell": cell, "cell_label": cell, "status": "completed", metric: value}
        for cell, values in cells.items()
        for value in values
    ]
    return pd.DataFrame(rows)


def test_a_throwaway_test_is_one_registered_function():
    @TESTS.register("throwaway_rank", estimand="difference of medians", metrics=("test/token_acc",))
    def rank_test(a, b, confidence=0.95) -> dict[str, float]:
        u = stats.mannwhitneyu(a, b, alternative="two-sided")
        return {
            "diff": float(np.median(a) - np.median(b)),
            "diff_low": math.nan,
            "diff_high": math.nan,
            "t": float(u.statistic - len(a) * len(b) / 2),
            "p": float(u.pvalue),
        }

    try:
        assert test_problems(["throwaway_rank"]) == []
        runs = runs_frame({"base": B, "other": A}, "test/token_acc")
        table = compare_cells(runs, "test/token_acc", "base", ["base", "other"], test="throwaway_rank")
        # 4 against 3 seeds, every value of A above every value of B: U = 12, exact two-sided p = 2 / C(7, 3)
        assert table["p"].tolist() == pytest.approx([2 / math.comb(7, 3)])
        assert table["diff"].tolist() == pytest.approx([(0.61 + 0.64) / 2 - 0.52])
        with pytest.raises(ValueError, match="test='throwaway_rank' does not accept metric='val/loss'"):
            compare_cells(runs_frame({"base": B}, "val/loss"), "val/loss", "base", ["base"], test="throwaway_rank")
    finally:
        TESTS.unregister("throwaway_rank")
    default = compare_cells(runs_frame({"base": B, "other": A}, "test/token_acc"), "test/token_acc", "base", ["other"])
    assert default["p"].tolist() == pytest.approx([stats.ttest_ind(A, B, equal_var=False).pvalue])
