"""The fixed design of equal power that ``python -m analysis.claims`` prices for each claim of an adaptive sweep:
the suite's own fixed test of that claim kind, at the sweep's alpha per claim and the observed spreads, with the
adaptive rule's power; and "not computable" with its reason where there is nothing to price."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from analysis.claims.adaptive import fixed_equivalent, section_lines
from analysis.stats import equal_power
from analysis.stats.claims import ratio_test, two_sample_test
from attnlab.claims import parse_claim
from attnlab.sequential import replay

# two claims share alpha 0.05: each is decided, and its fixed test sized, at 0.025
PLAN = {"alpha": 0.05, "alpha_per_claim": 0.025, "mixture": 1.0, "budget": 16, "first": [0, 1, 2], "step": 2}
# unequal spreads and an odd count, so a wrong side's sd or a pooled formula gives another design
A = np.array([1.31, 0.72, 1.55, 0.98, 1.12, 0.41, 1.27])
B = np.array([0.35, 0.62, 0.18, 0.71, 0.44, 0.52, 0.60])
RATIOS = np.array([0.97, 0.93, 1.01, 0.95, 0.99, 0.92, 0.98])
SIDES = {"a": {"position": "rope"}, "b": {"position": "alibi"}}
CASES = {
    "greater": ({"expect": "greater", **SIDES}, (0.0, math.inf)),
    "less-with-margin": ({"expect": "less", "margin": 0.2, **SIDES}, (-math.inf, -0.2)),  # contradicted: a − b > 0
    "equivalent": ({"expect": "equivalent", "margin": 1.0, **SIDES}, (-1.0, 1.0)),
    "ratio": ({"expect": "ratio", "a": {"position": "rope"}, "over": 16, "bounds": [0.9, None]}, (0.9, math.inf)),
    "ratio-both-bounds": (
        {"expect": "ratio", "a": {"position": "rope"}, "over": 16, "bounds": [0.9, 1.05]},
        (0.9, 1.05),
    ),
}


def _claim(raw: dict):
    metric = "token_acc@32" if raw["expect"] == "ratio" else "val/loss"
    return parse_claim({"metric": metric, **raw}, "claims[0]")


def _inputs(claim):
    if claim.expect == "ratio":
        return list(RATIOS), {"a_values": list(RATIOS), "b_values": None}
    return list(A - B), {"a_values": list(A), "b_values": list(B)}


@pytest.mark.parametrize("case", CASES)
def test_each_claim_kind_is_priced_with_its_own_fixed_test_at_the_rules_power(case):
    raw, edges = CASES[case]
    claim = _claim(raw)
    values, sides = _inputs(claim)
    design = fixed_equivalent(values, sides, claim, PLAN)
    # the suite's fixed test of this claim (analysis.stats.claims) is the one priced
    ones = np.ones_like(RATIOS)  # a ratio of means over unit denominators: the mean ratio the rule sees
    suite = ratio_test(RATIOS, ones, claim) if claim.expect == "ratio" else two_sample_test(A, B, claim)
    assert design.test == suite.test
    # its power: the anytime rule replayed seed by seed (attnlab.sequential) on Gaussian sequences of the observed
    # mean and spread, correct decisions counted; a Monte-Carlo reference independent of the vectorised simulation
    mean = float(np.mean(values))
    sd_a, sd_b = (RATIOS.std(ddof=1), None) if claim.expect == "ratio" else (A.std(ddof=1), B.std(ddof=1))
    rng = np.random.default_rng(21)
    runs = rng.normal(mean, np.std(values, ddof=1), (400, PLAN["budget"]))  # the rule sees the paired differences
    right = "supported" if edges[0] < mean < edges[1] else "contradicted"
    said = [replay(list(r), claim.expect, claim.margin, claim.bounds, PLAN["alpha_per_claim"]) for r in runs]
    share = float(np.mean([d.verdict == right for d in said]))
    assert 0 < design.power < 1
    assert design.power == pytest.approx(share, abs=3 * math.sqrt(share * (1 - share) / 400) + 0.02)
    # the fewest seeds whose fixed test, at the claim's edges and alpha per claim, has that power
    n = design.seeds
    power = equal_power.fixed_power
    assert power(n, mean, edges, sd_a, sd_b, 0.025) >= design.power
    assert n == 2 or power(n - 1, mean, edges, sd_a, sd_b, 0.025) < design.power


def test_what_cannot_be_priced_says_why():
    claim = _claim(CASES["equivalent"][0])
    flat = [0.5, 0.5, 0.5]
    same = fixed_equivalent([0.0, 0.0, 0.0], {"a_values": flat, "b_values": flat}, claim, PLAN)
    assert same.seeds is None and "zero spread" in same.describe()
    short = fixed_equivalent([0.3], {"a_values": [0.8], "b_values": [0.5]}, claim, PLAN)
    assert short.seeds is None and "fewer than 2 seeds" in short.describe()
    ratio = _claim(CASES["ratio"][0])
    alone = fixed_equivalent([0.97], {"a_values": [0.97], "b_values": None}, ratio, PLAN)
    assert alone.seeds is None and alone.test == ratio_test(RATIOS, np.ones_like(RATIOS), ratio).test


def test_the_section_states_each_claims_fixed_design_or_why_not():
    claim = _claim(CASES["equivalent"][0])
    values, sides = _inputs(claim)
    priced = fixed_equivalent(values, sides, claim, PLAN)
    flat = [0.5, 0.5, 0.5]
    unpriced = fixed_equivalent([0.0, 0.0, 0.0], {"a_values": flat, "b_values": flat}, claim, PLAN)
    decision = replay(values, claim.expect, claim.margin, claim.bounds, PLAN["alpha_per_claim"])
    state = {"rule": "rule", "plan": PLAN, "rounds": [], "finished": True}
    details = [{"claim": claim, "decision": decision, "fixed": d} for d in (priced, unpriced)]
    lines = section_lines(Path("sweep"), state, details)
    assert any("exceeded it when one cell's seeds sometimes diverge" in line for line in lines[:3])
    assert f"a fixed design of equal power: {priced.seeds} seeds per side (TOST (Welch) at power" in lines[-2]
    assert "a fixed design of equal power: not computable (every seed gave the same value" in lines[-1]
