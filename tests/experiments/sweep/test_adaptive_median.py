"""Adaptive seeds under the median boundary (``hydra.sweeper.boundary=median``): the plan's checks, the refusal of
ratio claims, the decision, the state's fingerprint, the analysis' section, and on a tiny real grid a planted effect
decided before the budget with the analysis and the report naming the rule and the median."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.claims.adaptive import SIMULATED, evaluate_adaptive, fixed_equivalent, section_lines
from analysis.report.document.model import fmt
from analysis.stats import anytime
from attnlab import median
from attnlab.claims import ClaimError, parse_claims
from attnlab.sequential import BOUNDARIES, replay
from experiments.sweep import adaptive
from experiments.sweep.adaptive import AdaptiveError, Plan
from tests.analysis.claims.test_adaptive_claims import CASES, PLAN, _claim, _inputs
from tests.experiments.sweep.test_adaptive import BUDGET, CLAIM, adaptive_args, cell, claim, claims_cli, report_md
from tests.helpers.sweeps import multirun, refused_in_process, results

MEDIAN = Plan((0, 1), 1, 40, 0.05, 1.0, "median")
RATIO = {"metric": "token_acc@48", "over": 24, "a": {"position": "rope"}, "expect": "ratio", "bounds": [0.5, None]}


def test_the_median_boundary_is_a_choice_and_a_misspelt_one_lists_it() -> None:
    MEDIAN.check()  # no bounds needed: the median CS assumes no range
    assert "median" in BOUNDARIES
    with pytest.raises(AdaptiveError, match="hydra.sweeper.boundary='medain' is not allowed; choose one of .*median"):
        Plan((0, 1), 1, 8, 0.05, 1.0, "medain").check()


def test_a_ratio_claim_is_refused_under_the_median_boundary_in_one_line() -> None:
    ratio = parse_claims([RATIO], "claims")[0]
    with pytest.raises(AdaptiveError) as err:
        adaptive.check_boundary([ratio], MEDIAN)
    said = str(err.value)
    assert "\n" not in said and "hydra.sweeper.boundary=median" in said and "use boundary=t_mixture" in said
    adaptive.check_boundary([ratio], Plan((0, 1), 1, 8, 0.05))  # the t-mixture takes ratios


def test_a_diverged_seed_cannot_hide_a_clear_median_difference() -> None:
    # a is lower by about 0.5 on every seed but the second, where a's run diverged (+40): the mean is pulled above 0 and
    # the t-mixture's interval stays too wide to decide; the median is decided once 12 of 13 lie below 0 (at alpha/2,
    # depth(13) = 2: at most one difference at or above 0)
    values = [-0.5, 40.0, -0.45, -0.6, -0.55, -0.5, -0.4, -0.5, -0.55, -0.45, -0.5, -0.6, -0.35, -0.5]
    found = adaptive.decide(claim(), values, Plan((0, 1), 1, 40, 0.05, 1.0, "median"), 2)
    assert found == replay(values, "less", 0.0, None, 0.025, boundary="median")
    assert (found.verdict, found.n) == ("supported", 13) and median.depth(13, 0.025) == 2
    assert found.mean == pytest.approx(-0.5)  # the estimate is the median, not the mean
    low, high = median.intervals(values[:13], 0.025)[-1]
    assert (found.low, found.high) == (low, high) and high < 0
    assert adaptive.decide(claim(), values, Plan((0, 1), 1, 40, 0.05), 2).verdict is None  # the t-mixture: undecided


def test_the_fingerprint_includes_the_median_boundary_and_the_state_names_the_rule() -> None:
    cells, claims = [cell("rope"), cell("alibi")], [claim()]
    plans = (
        Plan((0, 1), 1, 4, 0.05),
        Plan((0, 1), 1, 4, 0.05, 1.0, "median"),
        Plan((0, 1), 1, 4, 0.05, 1.0, "betting", (0, 1)),
    )
    assert len({adaptive.fingerprint(cells, claims, plan) for plan in plans}) == 3  # a resume cannot switch rules
    state = adaptive.new_state(cells, claims, plans[1], [])
    assert state["plan"]["boundary"] == "median" and "Howard and Ramdas" in state["rule"] and "median" in state["rule"]


MEDIAN_PLAN = {**PLAN, "boundary": "median", "bounds": None}


def test_the_section_says_the_claim_is_about_the_median_paired_difference() -> None:
    claim_ = _claim(CASES["greater"][0])
    values, sides = _inputs(claim_)
    decision = replay(values, "greater", 0.0, None, 0.025, boundary="median")
    fixed = fixed_equivalent(values, sides, claim_, MEDIAN_PLAN)
    state = {"rule": None, "plan": MEDIAN_PLAN, "rounds": [], "finished": True}
    lines = section_lines(Path("sweep"), state, [{"claim": claim_, "decision": decision, "fixed": fixed}])
    assert "Howard and Ramdas" in lines[0] and "decides on the median paired difference, not the mean" in lines[1]
    assert "boundary median (claims on the median paired difference)" in lines[2]
    assert "of the median of paired differences a − b [" in lines[-1] and "sample median" in lines[-1]


def test_the_median_rule_is_priced_by_simulating_the_median_rule() -> None:
    claim_ = _claim(CASES["greater"][0])
    values, sides = _inputs(claim_)
    priced = fixed_equivalent(values, sides, claim_, {**MEDIAN_PLAN, "budget": 30})
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    own = anytime.decided_share(mean, sd, (0.0, math.inf), 30, 0.025, 1.0, SIMULATED, boundary="median")
    mixture = anytime.decided_share(mean, sd, (0.0, math.inf), 30, 0.025, 1.0, SIMULATED)
    assert priced.power == pytest.approx(own.power) and own.power != mixture.power


def test_the_analysis_refuses_a_ratio_claim_of_a_median_sweep_before_reading_runs() -> None:
    state = {"plan": MEDIAN_PLAN, "claims_raw": [RATIO]}
    with pytest.raises(ClaimError, match="ratio claim .* under the median boundary, which decides on the median"):
        evaluate_adaptive(None, state, "sweep/adaptive.json")


# -- on a real grid ---------------------------------------------------------------------------------
def test_a_ratio_claim_under_the_median_boundary_stops_in_one_line_before_any_seed_trains(
    tmp_path: Path, monkeypatch, capfd
) -> None:
    ratio = {**RATIO, "a": {"optim.lr": 0.01}}
    args = adaptive_args(tmp_path, [ratio], "hydra.sweeper.boundary=median")
    code, stderr, sweep_dir = refused_in_process(tmp_path, monkeypatch, capfd, *args)
    assert code == 2, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.startswith("attnlab:")]
    assert len(lines) == 1 and "not allowed with hydra.sweeper.boundary=median" in lines[0], stderr[-2000:]
    assert "Traceback" not in stderr
    assert not list(sweep_dir.rglob("result.json")) and not (sweep_dir / "adaptive.json").exists()


@pytest.mark.slow
def test_a_planted_effect_is_decided_by_the_median_before_the_budget_and_the_analysis_agrees(tmp_path: Path) -> None:
    args = adaptive_args(tmp_path, None, "hydra/launcher=ensemble", "hydra.sweeper.boundary=median")
    proc, sweep_dir = multirun(tmp_path, *args, timeout=600)  # three rounds; a bound on a loaded machine
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads((sweep_dir / "adaptive.json").read_text())
    assert state["finished"] and state["plan"]["boundary"] == "median"
    assert state["decisions"][0]["verdict"] == "supported"
    found = results(sweep_dir)
    seeds = sorted(r["seed"] for r in found.values() if r["config"]["optim.lr"] == 0.01)
    assert len(seeds) < BUDGET
    # replayed from the result files alone: the median rule's decision, at the first look its depth allows
    by_seed = {(r["config"]["optim.lr"], r["seed"]): r["metrics"]["val/loss"] for r in found.values()}
    diffs = [by_seed[(0.01, s)] - by_seed[(1e-9, s)] for s in seeds]
    mine = replay(diffs, "less", 0.0, None, 0.05, boundary="median")
    assert mine.verdict == "supported" and mine.n == state["decisions"][0]["n"]
    assert mine.mean == pytest.approx(float(np.median(diffs[: mine.n])))
    shown = claims_cli(sweep_dir)
    assert shown.returncode == 0, shown.stderr
    assert f"supported after {mine.n} seed pair(s)" in shown.stdout and "anytime CS (median" in shown.stdout
    assert "boundary median (claims on the median paired difference)" in shown.stdout
    assert f"median a − b {fmt(mine.mean)}" in shown.stdout  # the estimate is labelled as the median it is
    text = report_md(sweep_dir, tmp_path / "report")
    assert "Howard and Ramdas" in text and "of the median of paired differences a − b [" in text
    assert CLAIM["name"] in text


@pytest.mark.parametrize(
    "boundary, label",
    [("median", "median a − b -0.500 [-0.700, -0.300]"), ("t_mixture", "a − b -0.500 [-0.700, -0.300]")],
)
def test_the_terminal_table_names_what_the_estimate_is_of_and_shows_no_t_for_a_confidence_sequence(
    boundary: str, label: str
) -> None:
    from analysis.claims.adaptive import TESTS
    from analysis.claims.evaluate import COLUMNS
    from analysis.claims.render import format_text

    row = {c: math.nan for c in COLUMNS}  # as evaluate_adaptive fills a row: no t statistic, no df
    row.update(
        claim="c", metric="val/loss", expect="a − b < 0", a="lr=0.01", b="lr=1e-9", a_n=6, b_n=6,
        diff=-0.5, diff_low=-0.7, diff_high=-0.3, test=TESTS[boundary], verdict="supported", lacked="",
        source="", paper="",
    )  # fmt: skip
    line = next(x for x in format_text(pd.DataFrame([row])).splitlines() if x.strip().startswith("anytime CS"))
    assert line.strip().startswith(f"{TESTS[boundary]}: —, {label}, p —"), line
    assert "t = " not in line
