"""One way for each thing: one ``flatten`` for the writer and the reader of result.json, one Welch test and one Holm
correction for the report and the claims, each checked against an independent reference."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from analysis.stats import inference


def test_the_writer_and_the_reader_of_result_json_share_one_flatten():
    import analysis.data.rows as rows_module
    import experiments.record.result as result_module
    from attnlab.flatten import flatten

    assert result_module.flatten is flatten and rows_module.flatten is flatten
    tree = {"model": {"d_model": 64, "roles": {}}, "optim": {"lr": 1e-3, "betas": [0.9, 0.98]}, "seed": 0}
    # spelled out by hand: dotted keys, lists and empty mappings kept as values
    assert flatten(tree) == {
        "model.d_model": 64,
        "model.roles": {},
        "optim.lr": 1e-3,
        "optim.betas": [0.9, 0.98],
        "seed": 0,
    }
    assert flatten({"peak": 1.5}, "cost.") == {"cost.peak": 1.5}


# Unequal sizes and spreads, where Student's and Welch's formulas give different numbers.
SAMPLES = [
    ([0.61, 0.64, 0.70], [0.52, 0.55, 0.58, 0.60, 0.71, 0.49, 0.66]),
    ([3.1, 2.9, 3.4, 3.0, 3.3], [2.2, 3.9]),
    ([10.0, 10.5, 9.0, 11.0], [7.5, 8.0, 12.0, 6.0, 9.5, 8.5]),
]


@pytest.mark.parametrize("a, b", SAMPLES)
def test_welch_is_scipys_welch(a, b):
    got = inference.welch(a, b, confidence=0.9)
    want = sps.ttest_ind(a, b, equal_var=False)
    low, high = want.confidence_interval(0.9)
    assert [got["t"], got["p"], got["diff_low"], got["diff_high"]] == pytest.approx(
        [want.statistic, want.pvalue, low, high], rel=1e-12
    )
    assert got["diff"] == pytest.approx(np.mean(a) - np.mean(b), rel=1e-12)


@pytest.mark.parametrize(
    "a, b", [([1.0, 1.0, 1.0], [1.0, 1.0]), ([1.0, 1.0, 1.0], [2.0, 2.0]), ([2.0, 2.0], [1.0, 1.0, 1.0])]
)
def test_welch_on_constant_samples_says_what_scipy_says(a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = sps.ttest_ind(a, b, equal_var=False)
        low, high = want.confidence_interval(0.95)
    got = inference.welch(a, b)
    for mine, theirs in [
        (got["t"], want.statistic),
        (got["p"], want.pvalue),
        (got["diff_low"], low),
        (got["diff_high"], high),
    ]:
        assert (math.isnan(mine) and math.isnan(theirs)) or mine == theirs, (got, want, low, high)


def test_holm_by_hand_with_a_gap_and_ties():
    # Four finite p-values, sorted 0.01, 0.02, 0.02, 0.04, times 4, 3, 2, 1: 0.04, 0.06, 0.04, 0.04; the running
    # maximum keeps them monotone: 0.04, 0.06, 0.06, 0.06. The NaN is not counted and stays NaN.
    got = inference.holm([0.02, math.nan, 0.04, 0.01, 0.02])
    np.testing.assert_allclose(got, [0.06, math.nan, 0.06, 0.04, 0.06], rtol=1e-12)
    assert len(inference.holm([])) == 0


@pytest.mark.parametrize("seed", range(6))
def test_holm_is_statsmodels_holm(seed):
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 12))
    # small p-values (products past 1 are capped), ties, and NaNs that are not counted
    p = np.round(rng.uniform(0, 0.3, m) ** rng.uniform(0.5, 3), 3)
    p[rng.random(m) < 0.2] = math.nan
    finite = np.isfinite(p)
    got = inference.holm(p)
    assert np.isnan(got[~finite]).all()
    if finite.any():
        np.testing.assert_allclose(got[finite], multipletests(p[finite], method="holm")[1], rtol=1e-12)


def test_the_claims_use_the_reports_holm(monkeypatch):
    from analysis.claims import evaluate

    calls = []
    monkeypatch.setattr(inference, "holm", lambda p: calls.append(list(p)) or np.full(len(p), 0.5))
    rows = [
        {"p_for": 0.01, "p_against": 0.9, "lacked": "", "diff_low": 0.0, "diff_high": 1.0},
        {"p_for": 0.6, "p_against": 0.3, "lacked": "", "diff_low": -1.0, "diff_high": 1.0},
    ]
    from attnlab.claims import parse_claims

    # two hypotheses (one claim twice is refused: it would count one test twice in the correction)
    claims = parse_claims([{"metric": "m", "a": {"p": "x"}, "b": {"p": y}, "expect": "greater"} for y in ("y", "z")])
    out = evaluate.decide(rows, claims)
    assert calls == [[0.01, 0.3]] and out["p_holm"].tolist() == [0.5, 0.5]
