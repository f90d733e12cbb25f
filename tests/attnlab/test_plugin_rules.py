"""The sequential (adaptive-seed) stopping rules are one registry kind (attnlab.rules): every registered rule keeps
the contract replay reads, and a throwaway rule registered here (a Hoeffding confidence sequence for bounded
differences, its interval from the formula below) is decided by ``replay``, accepted by the sweep's plan check as
``hydra.sweeper.boundary``, labelled in the claims table and section, and simulated, with no edit to those modules."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pytest

from analysis.claims import adaptive as claims_adaptive
from analysis.stats import anytime, simulate
from attnlab import sequential
from attnlab.claims import parse_claims
from attnlab.registry import registry
from attnlab.rules import ESTIMANDS, RULES, Look, ordered
from experiments.sweep import adaptive
from experiments.sweep.adaptive import AdaptiveError, Cell, Plan

NAME = "throwaway_hoeffding"
LABEL = "anytime CS (Hoeffding, union over looks)"
ASSUMPTION = "assumes only independent seeds whose metric lies within the bounds (a throwaway)"


def hoeffding(values: Sequence[float], alpha: float, lo: float, hi: float) -> list[tuple[float, float]]:
    """Hoeffding's inequality at look n with alpha_n = alpha / (n (n + 1)) (summing to alpha over all looks): the
    mean lies within (hi − lo) sqrt(log(2 / alpha_n) / (2 n)) of the sample mean; the running intersection."""
    out, low, high, total = [], -math.inf, math.inf, 0.0
    for n, x in enumerate(values, start=1):
        total += x
        half = (hi - lo) * math.sqrt(math.log(2 * n * (n + 1) / alpha) / (2 * n))
        low, high = max(low, total / n - half), min(high, total / n + half)
        out.append((low, high))
    return out


class Hoeffding:
    @staticmethod
    def intervals(values: Sequence[float], alpha: float, look: Look) -> list[tuple[float, float]]:
        if look.support is None:
            raise ValueError(f"boundary={NAME} needs the observations' bounds [lo, hi]; none were given")
        return hoeffding(values, alpha, *look.support)

    @staticmethod
    def center(values: Sequence[float]) -> float:
        return sum(values) / len(values) if values else math.nan

    @staticmethod
    def undecided(values: Sequence[float]) -> str:
        return ""

    @staticmethod
    def settings(mixture: float, bounds: tuple[float, float] | None) -> str:
        return f"boundary {NAME}, metric bounds {list(bounds or ())}"


@pytest.fixture
def throwaway() -> Iterator[str]:
    RULES.register(
        NAME,
        estimand="mean",
        order=90,
        text="Hoeffding confidence sequence, union bound over looks",
        assumption=ASSUMPTION,
        label=LABEL,
        ratio="bounds paired differences",
        bounds=True,
    )(Hoeffding)
    try:
        yield NAME
    finally:
        RULES.unregister(NAME)


# differences in [0.7, 0.9]: Hoeffding's half-width on [-1, 1] falls below their mean 0.8 between 30 and 40 looks
DIFFS = [0.7, 0.9] * 25


def first_decided(values: Sequence[float], alpha: float) -> int:
    """By hand: the first look whose Hoeffding interval on [-1, 1] lies above 0."""
    for n in range(1, len(values) + 1):
        half = 2 * math.sqrt(math.log(2 * n * (n + 1) / alpha) / (2 * n))
        if sum(values[:n]) / n - half > 0:
            return n
    return -1


def test_the_registry_is_a_kind_and_lists_the_three_rules_default_first():
    assert registry("sequential rule") is RULES
    assert ordered()[:1] == ["t_mixture"] and {"t_mixture", "betting", "median"} <= set(RULES.names())
    assert sequential.BOUNDARIES == tuple(ordered())


@pytest.mark.parametrize("name", RULES.names())
def test_every_rule_keeps_the_contract_replay_reads(name: str):
    declared, method = RULES.declared(name), RULES.get(name)
    assert declared.estimand in ESTIMANDS and declared.text and declared.label and declared.assumption
    assert sequential.rule(name) == declared.text
    values = [0.31, -0.12, 0.45, 0.2, 0.05, 0.38, -0.02, 0.27, 0.5, 0.11]
    seq = method.intervals(values, 0.05, Look(support=(-1.0, 1.0)))
    assert len(seq) == len(values)
    lows, highs = [low for low, _ in seq], [high for _, high in seq]
    # a running intersection: never widens
    assert lows == sorted(lows) and highs == sorted(highs, reverse=True)
    expected = float(np.median(values)) if declared.estimand == "median" else float(np.mean(values))
    assert method.center(values) == pytest.approx(expected)


def test_replay_decides_with_a_throwaway_rule_at_the_look_the_formula_gives(throwaway: str):
    n = first_decided(DIFFS, 0.05)
    assert 30 < n <= 40
    decision = sequential.replay(DIFFS, "greater", 0.0, None, 0.05, boundary=throwaway, support=(-1.0, 1.0))
    assert (decision.verdict, decision.n) == ("supported", n)
    assert decision.mean == pytest.approx(sum(DIFFS[:n]) / n)
    assert sequential.rule(throwaway) == "Hoeffding confidence sequence, union bound over looks"
    # a rule valid under divergence sees a lost pair at its scored value: the same decision as without the mark
    lost = [False] * len(DIFFS)
    lost[3] = True
    assert sequential.replay(DIFFS, "greater", 0.0, None, 0.05, boundary=throwaway, support=(-1, 1), lost=lost) == (
        decision
    )


def test_the_plan_check_accepts_a_throwaway_boundary_with_its_bounds(throwaway: str):
    plan = Plan((0, 1), 1, 8, 0.05, 1.0, throwaway, (0.0, 1.0))
    plan.check()
    with pytest.raises(AdaptiveError, match=f"hydra.sweeper.bounds=null is not allowed with boundary={throwaway}"):
        replace(plan, bounds=None).check()
    with pytest.raises(AdaptiveError, match=f"choose one of t_mixture, betting, median, {throwaway}$"):
        replace(plan, boundary="hoeffding").check()
    ratio = parse_claims(
        [
            {
                "name": "r",
                "metric": "test/token_acc@32",
                "a": {"x": 1},
                "expect": "ratio",
                "over": 16,
                "bounds": [0.5, None],
            }
        ],
        "test",
    )
    with pytest.raises(AdaptiveError, match=f"boundary={throwaway}, which bounds paired differences"):
        adaptive.check_boundary(ratio, plan)


def test_the_claims_table_and_section_name_a_throwaway_rule(throwaway: str):
    assert claims_adaptive.TESTS[throwaway] == LABEL and throwaway in claims_adaptive.TESTS
    state = {
        "plan": {
            "boundary": throwaway,
            "bounds": [0.0, 1.0],
            "mixture": 1.0,
            "alpha": 0.05,
            "alpha_per_claim": 0.05,
            "first": [0, 1],
            "step": 1,
            "budget": 8,
        },
        "rounds": [],
        "finished": True,
    }
    head, said, params = claims_adaptive.section_lines(Path("sweep"), state, [])[:3]
    assert head.endswith("Hoeffding confidence sequence, union bound over looks")
    assert said == f"the rule {ASSUMPTION}" and f"boundary {throwaway}, metric bounds [0.0, 1.0]" in params


def test_the_simulation_runs_a_throwaway_rule_as_replay_decides_it(throwaway: str):
    assert throwaway in simulate.RULES and throwaway in simulate.rules_for("accuracy k/32, ties")
    assert throwaway not in simulate.rules_for("gaussian")  # it needs bounds: the bounded families only
    pairs = simulate.draw("accuracy, symmetric divergence", 12, 40, True, seed=3)
    looks = simulate.run(throwaway, pairs, (40,), 0.05, 0.0, bounded=True)
    for d, got in zip((pairs.a - pairs.b).tolist(), looks.decision[40]):
        decision = sequential.replay(d, "greater", 0.0, None, 0.05, boundary=throwaway, support=(-1.0, 1.0))
        assert got == {"supported": 1, "contradicted": -1}.get(decision.verdict, 0)
    share = anytime.decided_share(0.8, 0.1, (0.0, math.inf), 40, 0.05, reps=20, boundary=throwaway, support=(-1, 1))
    assert share.power == 1.0 and 30 < share.mean_seeds <= 45  # about where the formula decides a mean of 0.8


def test_the_fingerprint_of_a_plan_is_its_content_hashed_as_before():
    # a resumed sweep must find its state: the hash of the cells, the claims and the plan's fields (without the
    # budget, and without boundary and bounds for the default rule), computed here by hand
    cells = [Cell("x=1", ("x=1",), {"x": 1}), Cell("x=2", ("x=2",), {"x": 2})]
    claims = parse_claims(
        [{"name": "c", "metric": "test/token_acc", "a": {"x": 1}, "b": {"x": 2}, "expect": "greater"}], "test"
    )
    for plan in (Plan((0, 1), 2, 8, 0.05), Plan((0, 1), 2, 8, 0.05, 1.0, "betting", (0.0, 1.0))):
        settings = {"first": [0, 1], "step": 2, "alpha": 0.05, "mixture": 1.0}
        if plan.boundary != "t_mixture":
            settings.update(boundary=plan.boundary, bounds=[0.0, 1.0])
        content = {"cells": ["x=1", "x=2"], "claims": [claims[0].key()], "plan": settings}
        digest = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]
        assert adaptive.fingerprint(cells, claims, plan) == digest
