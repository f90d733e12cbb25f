"""Adaptive seeds under the betting boundary (``hydra.sweeper.boundary=betting``, ``bounds``): the plan's checks, the
decision, the state's fingerprint, and on a real grid the one-line refusals and the analysis' agreement."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from analysis.claims.adaptive import SIMULATED, check_observed, fixed_equivalent, section_lines
from analysis.stats import anytime
from attnlab.claims import ClaimError, parse_claims
from attnlab.sequential import replay
from experiments.sweep import adaptive
from experiments.sweep.adaptive import AdaptiveError, Plan
from tests.analysis.claims.test_adaptive_claims import CASES, PLAN, _claim, _inputs
from tests.experiments.sweep.test_adaptive import CLAIM, adaptive_args, cell, claim, claims_cli
from tests.helpers.sweeps import multirun, refused_in_process, results


@pytest.mark.parametrize(
    "plan,said",
    [
        (Plan((0, 1), 1, 8, 0.05, 1.0, "bets"), "hydra.sweeper.boundary='bets' is not allowed; choose one of"),
        (Plan((0, 1), 1, 8, 0.05, 1.0, "betting"), "hydra.sweeper.bounds=null is not allowed with boundary=betting"),
        (Plan((0, 1), 1, 8, 0.05, 1.0, "betting", (1.0, 0.0)), "hydra.sweeper.bounds=[1.0, 0.0] is not allowed"),
        (Plan((0, 1), 1, 8, 0.05, 1.0, "betting", (0.0, 0.0)), "hydra.sweeper.bounds=[0.0, 0.0] is not allowed"),
        (Plan((0, 1), 1, 8, 0.05, 1.0, "betting", (0.0,)), "hydra.sweeper.bounds=[0.0] is not allowed"),
        (Plan((0, 1), 1, 8, 0.05, 1.0, "betting", ("a", 1)), "hydra.sweeper.bounds=['a', 1] is not allowed"),
    ],
)
def test_a_bad_boundary_or_bounds_is_refused_naming_its_key(plan: Plan, said: str) -> None:
    with pytest.raises(AdaptiveError, match=said.replace("[", r"\[").replace("]", r"\]")):
        plan.check()


def test_a_ratio_claim_is_refused_under_the_betting_boundary() -> None:
    ratio = parse_claims(
        [{"metric": "token_acc@48", "over": 24, "a": {"position": "rope"}, "expect": "ratio", "bounds": [0.5, None]}],
        "claims",
    )[0]
    plan = Plan((0, 1), 1, 8, 0.05, 1.0, "betting", (0.0, 1.0))
    with pytest.raises(AdaptiveError, match="a ratio claim .* is not allowed with hydra.sweeper.boundary=betting"):
        adaptive.check_boundary([ratio], plan)
    adaptive.check_boundary([ratio], Plan((0, 1), 1, 8, 0.05))  # the t-mixture takes ratios


def test_a_seed_outside_the_bounds_is_refused_naming_claim_metric_and_value() -> None:
    plan = Plan((0, 1), 1, 8, 0.05, 1.0, "betting", (0.0, 1.0))
    done = {"status": "completed"}
    a = {0: {**done, "metrics": {"val/loss": 0.4}}, 1: {**done, "metrics": {"val/loss": 0.5}}}
    b = {0: {**done, "metrics": {"val/loss": 0.3}}, 1: {**done, "metrics": {"val/loss": 2.75}}}
    with pytest.raises(AdaptiveError, match=r"claim '.*': val/loss=2.75 \(side b, seed 1\) lies outside"):
        adaptive.check_observed(claim(), (a, b), plan)
    adaptive.check_observed(claim(), (a, b), Plan((0, 1), 1, 8, 0.05))  # the t-mixture assumes no bounds


def test_the_decision_uses_the_betting_boundary_on_the_differences_range() -> None:
    plan = Plan((0, 1), 1, 40, 0.05, 1.0, "betting", (0.2, 0.9))
    values = [-0.5, -0.45, -0.6, -0.55, -0.5] * 6
    found = adaptive.decide(claim(), values, plan, 2)
    assert found == replay(values, "less", 0.0, None, 0.025, boundary="betting", support=(-0.7, 0.7))
    assert found != adaptive.decide(claim(), values, Plan((0, 1), 1, 40, 0.05), 2)  # not the t-mixture's


def test_the_fingerprint_includes_the_boundary_and_a_t_mixture_state_still_resumes(tmp_path: Path) -> None:
    cells, claims = [cell("rope"), cell("alibi")], [claim()]
    t_mixture = Plan((0, 1), 1, 4, 0.05)
    fingerprints = {
        adaptive.fingerprint(cells, claims, plan)
        for plan in (
            t_mixture,
            Plan((0, 1), 1, 4, 0.05, 1.0, "betting", (0.0, 1.0)),
            Plan((0, 1), 1, 4, 0.05, 1.0, "betting", (0.0, 2.0)),
        )
    }
    assert len(fingerprints) == 3
    # the state a sweep wrote before the boundary was a choice (and while the budget was part of the fingerprint): the
    # same content without the two keys; it still resumes
    old = {k: v for k, v in asdict(t_mixture).items() if k not in ("boundary", "bounds")}
    content = {"cells": sorted(c.key for c in cells), "claims": [c.key() for c in claims], "plan": old}
    before = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]
    written = {**adaptive.new_state(cells, claims, t_mixture, []), "fingerprint": before}
    adaptive.save_state(tmp_path, written)
    expected = adaptive.new_state(cells, claims, t_mixture, [])
    assert adaptive.load_state(tmp_path, expected, cells, claims, t_mixture)["fingerprint"] == expected["fingerprint"]
    state = adaptive.new_state(cells, claims, Plan((0, 1), 1, 4, 0.05, 1.0, "betting", (0.0, 1.0)), [])
    assert state["plan"]["boundary"] == "betting" and state["plan"]["bounds"] == [0.0, 1.0]
    assert "betting" in state["rule"] and "Waudby-Smith" in state["rule"]


# -- on a real grid ---------------------------------------------------------------------------------
ACCURACY_CLAIM = {**CLAIM, "metric": "val/token_acc", "expect": "greater"}


@pytest.mark.parametrize(
    "extra,said",
    [
        (["hydra.sweeper.boundary=betting"], "hydra.sweeper.bounds=null is not allowed with boundary=betting"),
        (["hydra.sweeper.boundary=betting", "hydra.sweeper.bounds=[1,0]"], "hydra.sweeper.bounds=[1, 0] is not"),
    ],
    ids=["betting-without-bounds", "bounds-reversed"],
)
def test_bad_bounds_stop_in_one_line_before_any_seed_trains(tmp_path: Path, monkeypatch, capfd, extra, said) -> None:
    """The command's main() in this process (as the adaptive sweeper's other refusals): the same sweeper, exit
    code and stderr line as a process of its own, without its start."""
    args = adaptive_args(tmp_path, [ACCURACY_CLAIM], *extra)
    code, stderr, sweep_dir = refused_in_process(tmp_path, monkeypatch, capfd, *args)
    assert code == 2, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.startswith("attnlab:")]
    assert len(lines) == 1 and said in lines[0], stderr[-2000:]
    assert "Traceback" not in stderr
    assert not list(sweep_dir.rglob("result.json")) and not (sweep_dir / "adaptive.json").exists()


@pytest.mark.slow
def test_a_loss_outside_the_bounds_is_refused_in_one_line_at_the_first_decision(tmp_path: Path) -> None:
    args = adaptive_args(tmp_path, [CLAIM], "hydra.sweeper.boundary=betting", "hydra.sweeper.bounds=[0,1]")
    proc, _ = multirun(tmp_path, *args, timeout=240)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("attnlab:")]
    assert len(lines) == 1 and "val/loss=" in lines[0] and "lies outside hydra.sweeper.bounds=[0, 1]" in lines[0]
    assert CLAIM["name"] in lines[0]


@pytest.mark.slow
def test_a_betting_sweep_records_its_boundary_and_the_analysis_decides_the_same(tmp_path: Path) -> None:
    args = adaptive_args(tmp_path, [ACCURACY_CLAIM], "hydra.sweeper.boundary=betting", "hydra.sweeper.bounds=[0,1]")
    args = [a for a in args if not a.startswith("hydra.sweeper.budget=")] + ["hydra.sweeper.budget=4"]
    proc, sweep_dir = multirun(tmp_path, *args, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads((sweep_dir / "adaptive.json").read_text())
    assert state["finished"] and state["plan"]["boundary"] == "betting" and state["plan"]["bounds"] == [0, 1]
    found = results(sweep_dir)
    by_seed = {(r["config"]["optim.lr"], r["seed"]): r["metrics"]["val/token_acc"] for r in found.values()}
    seeds = sorted(s for lr, s in by_seed if lr == 0.01)
    diffs = [by_seed[(0.01, s)] - by_seed[(1e-9, s)] for s in seeds]
    mine = replay(diffs, "greater", 0.0, None, 0.05, boundary="betting", support=(-1.0, 1.0))
    assert (mine.verdict, mine.n) == (state["decisions"][0]["verdict"], state["decisions"][0]["n"])
    shown = claims_cli(sweep_dir)
    assert shown.returncode == (0 if mine.verdict == "supported" else 1), shown.stderr  # 1: a claim not supported
    assert "boundary betting, metric bounds [0, 1]" in shown.stdout and "anytime CS (betting)" in shown.stdout
    said = f"{mine.verdict} after {mine.n} seed pair(s)" if mine.verdict else f"undecided at the budget ({mine.n}"
    assert said in shown.stdout


# -- the analysis of a finished sweep ----------------------------------------------------------------
BETTING_PLAN = {**PLAN, "boundary": "betting", "bounds": [0.0, 2.0]}


def test_the_section_names_the_betting_boundary_and_its_bounds() -> None:
    claim = _claim(CASES["greater"][0])
    values, sides = _inputs(claim)
    decision = replay(values, "greater", 0.0, None, 0.025, boundary="betting", support=(-2.0, 2.0))
    fixed = fixed_equivalent(values, sides, claim, BETTING_PLAN)
    state = {"rule": None, "plan": BETTING_PLAN, "rounds": [], "finished": True}
    lines = section_lines(Path("sweep"), state, [{"claim": claim, "decision": decision, "fixed": fixed}])
    assert "Waudby-Smith" in lines[0] and "valid for any distribution" in lines[1]
    assert "boundary betting, metric bounds [0, 2] (paired differences in [-2, 2])" in lines[2]
    old = section_lines(
        Path("sweep"), {**state, "plan": PLAN}, [{"claim": claim, "decision": decision, "fixed": fixed}]
    )
    assert "boundary t_mixture, mixture c = 1" in old[2] and "Lai" in old[0]  # a state without the key: t-mixture


def test_the_betting_rule_is_priced_by_simulating_the_betting_rule() -> None:
    # the fixed design of equal power is sized at the betting rule's own power within the budget, on the differences'
    # range [lo - hi, hi - lo], not at the t-mixture's
    claim = _claim(CASES["greater"][0])
    values, sides = _inputs(claim)
    plan = {**BETTING_PLAN, "budget": 30}
    priced = fixed_equivalent(values, sides, claim, plan)
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    edges = (0.0, math.inf)
    betting = anytime.decided_share(mean, sd, edges, 30, 0.025, 1.0, SIMULATED, boundary="betting", support=(-2, 2))
    mixture = anytime.decided_share(mean, sd, edges, 30, 0.025, 1.0, SIMULATED)
    assert 0 < betting.power < mixture.power
    assert priced.power == pytest.approx(betting.power) and priced.seeds is not None


def test_the_analysis_refuses_a_seed_outside_the_sweeps_bounds() -> None:
    claim = _claim(CASES["greater"][0])
    with pytest.raises(ClaimError, match=r"val/loss=2.5 \(side a\) lies outside the bounds \[0, 2\]"):
        check_observed(claim, {"a_values": [1.0, 2.5], "b_values": [0.5, 0.5]}, (0.0, 2.0))
