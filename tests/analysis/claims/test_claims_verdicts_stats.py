"""The numbers behind a verdict (issue 45): the false-verdict rate of the fixed-n engine under a null, the ratio of
means and its delta-method interval, the seeds that would decide a claim priced before the data, and the expected
best of n trials with pruned trials counted as drawn. Every expected value is computed here, by hand or by brute
force, never by the code under test.
"""

from __future__ import annotations

import gc
import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from analysis.claims.evaluate import COLUMNS, decide
from analysis.stats.claims import ratio_test, seeds_needed, two_sample_test
from attnlab.claims import parse_claim
from tests.analysis.claims.test_claims_verdicts import claim, claims_file, run_row, verdicts

ALPHA = 0.05
REPS = 2000


def _decided(a: np.ndarray, b: np.ndarray, parsed) -> str:
    test = two_sample_test(a, b, parsed)
    row = {c: math.nan for c in COLUMNS}
    row.update(lacked="", p_for=test.p_for, p_against=test.p_against, _test=test)
    return decide([row], [parsed]).iloc[0]["verdict"]


@pytest.mark.slow
@pytest.mark.parametrize("n", [3, 5, 10])
def test_under_a_null_a_verdict_either_way_is_wrong_at_most_alpha(n, monkeypatch):
    """Two equal Gaussian cells at margin 0: any verdict is wrong. Before: 0.074, 0.102, 0.097 (2,000 each)."""
    # statsmodels' multipletests collects garbage on every call (0.2 s here): nothing to collect in this loop
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    rng = np.random.default_rng(4500 + n)
    parsed = parse_claim(claim("null", "greater"), "claims[0]")
    wrong = sum(_decided(rng.normal(0, 1, n), rng.normal(0, 1, n), parsed) != "inconclusive" for _ in range(REPS))
    se = math.sqrt(ALPHA * (1 - ALPHA) / REPS)
    assert wrong / REPS <= ALPHA + 3 * se, f"n={n}: {wrong / REPS:.3f} false verdicts"


# ---------------------------------------------------------------- the ratio of means

TOP = np.array([0.50, 1.00, 0.29, 0.62])  # per-seed ratios 0.5, 2, 0.483, 0.886: their mean is not the estimand
BOTTOM = np.array([1.00, 0.50, 0.60, 0.70])


def test_the_ratio_claim_is_the_ratio_of_means_with_a_delta_method_interval():
    parsed = parse_claim(
        {"metric": "token_acc@16", "a": {"attention": "local"}, "expect": "ratio", "over": 8, "bounds": [0.9, None]},
        "claims[0]",
    )
    evidence = ratio_test(TOP, BOTTOM, parsed)
    # by hand: 2.41 / 2.80
    assert evidence.estimate == pytest.approx(2.41 / 2.80, rel=1e-12)
    assert np.mean(TOP / BOTTOM) == pytest.approx(0.9672, abs=1e-3)  # what averaging per-seed ratios gave
    # delta method: Var(x̄/ȳ) ≈ (x̄/ȳ)² (Var x̄ / x̄² + Var ȳ / ȳ² − 2 Cov(x̄, ȳ) / (x̄ ȳ)), the textbook form
    n, xm, ym = 4, TOP.mean(), BOTTOM.mean()
    vx, vy = TOP.var(ddof=1) / n, BOTTOM.var(ddof=1) / n
    cxy = float(np.sum((TOP - xm) * (BOTTOM - ym))) / (n - 1) / n
    se = (xm / ym) * math.sqrt(vx / xm**2 + vy / ym**2 - 2 * cxy / (xm * ym))
    half = sps.t.ppf(1 - ALPHA / 2, n - 1) * se  # one bound: a direction, its two-sided 95% interval
    assert (evidence.low, evidence.high) == pytest.approx((xm / ym - half, xm / ym + half), rel=1e-10)
    assert evidence.statistic == pytest.approx((xm / ym - 0.9) / se, rel=1e-10)


def test_a_ratio_over_a_zero_mean_is_refused_in_one_line(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    for seed in range(3):
        row = run_row("local", seed, 0.5)
        row["by_length"] = {"8": {"token_acc": 0.0}, "16": {"token_acc": 0.0}}
        (sweep / f"r{seed}").mkdir(parents=True)
        (sweep / f"r{seed}" / "result.json").write_text(json.dumps(row))
    ratio = {"name": "flat", "metric": "token_acc@16", "a": {"attention": "local"}, "expect": "ratio", "over": 8}
    code, out = verdicts(capsys, sweep, claims_file(tmp_path / "c.yaml", {**ratio, "bounds": [0.9, None]}))
    assert code == 1 and "lacked: the mean of token_acc@8 over side a is 0: no ratio of means" in out, out


# ---------------------------------------------------------------- seeds that would decide, priced before the data


def test_seeds_that_would_decide_are_priced_at_min_effect_never_at_the_observed_difference():
    rng = np.random.default_rng(7)
    a, b = rng.normal(0, 1, 6), rng.normal(0, 1.5, 6)
    with_effect = parse_claim(claim("c", "greater", min_effect=0.8), "claims[0]")
    near = seeds_needed(two_sample_test(a, b, with_effect), with_effect, ALPHA)
    far = seeds_needed(two_sample_test(a + 0.3, b, with_effect), with_effect, ALPHA)  # same spreads, other mean
    assert near[0] == far[0]  # the observed difference does not enter
    # the normal approximation n = (z_{1-alpha/2} + z_{0.8})² (sd_a² + sd_b²) / e² bounds the t-based answer below
    normal = (sps.norm.ppf(1 - ALPHA / 2) + sps.norm.ppf(0.8)) ** 2 * (a.var(ddof=1) + b.var(ddof=1)) / 0.8**2
    assert normal <= near[0] <= normal + 3
    plain = parse_claim(claim("c", "greater"), "claims[0]")
    assert seeds_needed(two_sample_test(a, b, plain), plain, ALPHA)[0] is None  # margin 0 and no min_effect
    assert "give min_effect" in seeds_needed(two_sample_test(a, b, plain), plain, ALPHA)[1]


# ---------------------------------------------------------------- expected best of n trials, pruned ones drawn


def _brute_expected_min(scores: list[float], n: int) -> float:
    """The mean over every ordered draw of n trials with replacement of the lowest score drawn."""
    draws = list(itertools.product(scores, repeat=n))
    return sum(min(d) for d in draws) / len(draws)


def test_pruned_trials_are_drawn_in_the_expected_best_curve(tmp_path):
    from analysis.report.document.model import Table, fmt
    from analysis.report.sections.tuned import tuned_section
    from tests.helpers.studies import tuned_sweep

    sweep = tuned_sweep(tmp_path, {"multihead": {"tuned": [1.0, 1.1], "default": [1.2, 1.3]}})
    record = json.loads((sweep / "tuned.json").read_text())
    record["cells"][0]["trials"] = [
        {"number": 0, "state": "complete", "params": {"optim.lr": 0.002}, "value": 2.0},
        {"number": 1, "state": "complete", "params": {"optim.lr": 0.001}, "value": 1.5},
        {"number": 2, "state": "pruned", "params": {"optim.lr": 0.01}, "value": 3.0},  # its last reported loss
        {"number": 3, "state": "pruned", "params": {"optim.lr": 0.02}, "value": None},  # reported nothing: worst
    ]
    (sweep / "tuned.json").write_text(json.dumps(record))
    section = tuned_section(sweep, tmp_path / "out")
    table = next(b for b in section.blocks if isinstance(b, Table))
    expected = _brute_expected_min([2.0, 1.5, 3.0, 3.0], 4)  # four trials drawn, the loss minimised
    assert table.rows[0][-1].startswith(f"{fmt(expected)} ± "), table.rows[0]
    assert not math.isclose(expected, _brute_expected_min([2.0, 1.5], 2))  # dropping them would read otherwise
