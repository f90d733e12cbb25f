"""Verdicts of adaptive-seed sweeps a reviewer accepts (issue 45), through the sweeper's own decision function and
``python -m analysis.claims`` on a sweep folder: diverged and failed seeds count toward the decision, Bonferroni
stands beside every verdict and the sweep and the claims table agree, no verdict comes from a sample without
spread or from an empty running intersection, the median rule says what it is about, and a larger budget continues
the same sequences."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from analysis.claims.cli import main as claims_main
from attnlab import median
from attnlab.claims import parse_claims
from experiments.sweep import adaptive
from experiments.sweep.adaptive import AdaptiveError, Cell, Plan
from hydra_plugins.attnlab_launcher.adaptive_sweeper import _decide, _decision_row
from tests.helpers.cell_fixtures import flat_config, result, write

METRIC = "test/token_acc"
RAW = [{"name": "soft beats local", "metric": METRIC, "a": {"attention": "soft"}, "b": {"attention": "local"}}]
SOFT = [0.91, 0.93, 0.90, 0.94, 0.92, 0.95]  # unequal values: no tie hides a wrong pairing


def _cells() -> list[Cell]:
    return [
        Cell(f"attention={name}", (f"attention={name}",), flat_config("copy", name, "rope", 0))
        for name in ("soft", "local")
    ]


def sweep_folder(tmp_path: Path, local: list[float | None], plan: Plan, raw=None) -> tuple[Path, dict]:
    """A finished adaptive sweep as the sweeper leaves it: a result.json per seed (None: the seed diverged with a NaN
    loss, as a real sweep's six seeds did) and adaptive.json with the one round that trained them."""
    raw = RAW if raw is None else raw
    claims = parse_claims([{**c, "expect": c.get("expect", "greater")} for c in raw], "claims")
    raw = [{**c, "expect": c.get("expect", "greater")} for c in raw]
    cells = _cells()
    sweep = tmp_path / "sweep"
    folders: dict[str, dict[str, str]] = {}
    for cell, values in zip(cells, (SOFT, local)):
        name = cell.key.split("=")[1]
        for seed, value in enumerate(values):
            config = flat_config("copy", name, "rope", seed)
            status = "completed" if value is not None else "diverged"
            metrics = {METRIC: value if value is not None else math.nan, "val/loss": 1.0 if value else math.nan}
            folder = f"{name}_{seed}"
            write(sweep / folder, result(f"{name}-{seed}", config, metrics, status))
            folders.setdefault(cell.key, {})[str(seed)] = folder
    state = adaptive.new_state(cells, claims, plan, raw)
    state["rounds"] = [{"round": 1, "first_job": 0, "seeds": {}, "done": True, "folders": folders}]
    state["finished"] = True
    adaptive.save_state(sweep, state)
    return sweep, state


def sweeper_decisions(sweep: Path, state: dict, plan: Plan) -> list[dict]:
    """The sweeper's decision rows, from its own decision function on the sweep's result files."""
    claims = parse_claims(state["claims_raw"], "claims")
    sides = adaptive.claim_cells(_cells(), claims)
    folders = {
        key: {int(s): str(sweep / f) for s, f in seeds.items()} for key, seeds in state["rounds"][0]["folders"].items()
    }
    decided = _decide(plan, claims, sides, folders)
    return [_decision_row(c, d, o, plan, len(claims)) for c, (d, o) in zip(claims, decided)]


def claims_cli(sweep: Path, capsys) -> tuple[int, str]:
    code = claims_main([str(sweep)])
    return code, capsys.readouterr().out


ALL_DIVERGED = [None] * 6  # the real sweep: one cell's six seeds all NaN


def test_six_diverged_seeds_decide_under_the_median_rule_at_the_accuracy_floor(tmp_path, capsys):
    # today: the six pairs were dropped, "undecided at the budget (0 seed pairs)"
    plan = Plan((0, 1), 2, 6, 0.05, 1.0, "median")
    sweep, state = sweep_folder(tmp_path, ALL_DIVERGED, plan)
    row = sweeper_decisions(sweep, state, plan)[0]
    # the differences are SOFT − 0 (an accuracy's worst value): all six above 0, and at alpha 0.05 the median CS
    # after 6 differences is [d_(1), d_(6)] (depth 1), so the first look that can decide does
    assert median.depth(6, 0.05) == 1 and median.depth(5, 0.05) == 0
    assert (row["verdict"], row["n"]) == ("supported", 6)
    assert row["low"] == pytest.approx(min(SOFT)) and row["high"] == pytest.approx(max(SOFT))
    assert row["sides"]["b"] == {"completed": 0, "diverged": 6, "failed": 0}
    assert "b: 0 completed, 6 diverged, 0 failed" in row["summary"]
    code, out = claims_cli(sweep, capsys)
    assert code == 0 and "[SUPPORTED] soft beats local" in out
    assert "supported after 6 seed pair(s)" in out and "b: 0 completed, 6 diverged, 0 failed" in out


def test_six_diverged_seeds_stop_the_t_mixture_undecided_with_the_reason(tmp_path, capsys):
    plan = Plan((0, 1), 2, 6, 0.05)
    sweep, state = sweep_folder(tmp_path, ALL_DIVERGED, plan)
    row = sweeper_decisions(sweep, state, plan)[0]
    said = "6 diverged or failed seed pair(s); a mean-based rule does not decide on survivors"
    assert row["verdict"] is None and row["reason"] == said and said in row["summary"]
    code, out = claims_cli(sweep, capsys)
    assert code == 1 and "[INCONCLUSIVE] soft beats local" in out and said in out


def test_a_diverged_seed_enters_the_betting_rule_at_the_declared_floor(tmp_path):
    # three of six local seeds diverged, the other three match soft: at the floor the three lost pairs are
    # differences near +0.9, the others 0, so the mean difference is about 0.46, not 0 as on the survivors
    local = [0.91, None, 0.90, None, 0.92, None]
    plan = Plan((0, 1), 2, 6, 0.05, 1.0, "betting", (0.0, 1.0))
    observed = adaptive.claim_values(
        parse_claims([{**RAW[0], "expect": "greater"}], "c")[0],
        {s: {"status": "completed", "metrics": {METRIC: v}} for s, v in enumerate(SOFT)},
        {
            s: {"status": "completed", "metrics": {METRIC: v}} if v is not None else {"status": "diverged"}
            for s, v in enumerate(local)
        },
        plan.bounds,
    )
    expected = [a - (b if b is not None else 0.0) for a, b in zip(SOFT, local)]
    assert observed.values == pytest.approx(expected) and observed.lost == [b is None for b in local]


def test_bonferroni_stands_beside_every_verdict_and_the_sweep_and_its_claims_table_agree(tmp_path, capsys):
    raw = [
        RAW[0],
        {
            "name": "local is within 0.5 of soft",
            "metric": METRIC,
            "a": {"attention": "local"},
            "b": {"attention": "soft"},
            "expect": "equivalent",
            "margin": 0.5,
        },
    ]
    plan = Plan((0, 1), 2, 6, 0.05, 1.0, "median")
    sweep, state = sweep_folder(tmp_path, [0.80, 0.82, None, 0.81, 0.79, 0.83], plan, raw)
    rows = sweeper_decisions(sweep, state, plan)
    code, out = claims_cli(sweep, capsys)
    for row in rows:
        assert "Bonferroni over 2 claim(s), alpha 0.025 each" in row["summary"]
        verdict = (row["verdict"] or "inconclusive").upper()
        block = out.split(f"[{verdict}] {row['claim']}")[1].split("\n[")[0]  # the claim's block of the table
        assert "Bonferroni over 2 claim(s), alpha 0.025 each" in block
        said = f"{row['verdict']} after {row['n']} seed pair(s)" if row["verdict"] else "undecided"
        line = next(x for x in out.splitlines() if x.strip().startswith(f"{row['claim']}:"))
        assert said in line and "Bonferroni over 2 claim(s), alpha 0.025 each" in line


def test_the_median_rule_says_it_is_about_the_median_of_paired_differences(tmp_path, capsys):
    plan = Plan((0, 1), 2, 6, 0.05, 1.0, "median")
    sweep, _ = sweep_folder(tmp_path, [0.80, 0.82, 0.84, 0.81, 0.79, 0.83], plan)
    _, out = claims_cli(sweep, capsys)
    assert f"{METRIC}: median of paired differences a − b > 0" in out


# -- no verdict from a sample without spread or from an empty intersection --------------------------------------------
def _claim(**fields):
    return parse_claims([{**RAW[0], "expect": "greater", **fields}], "claims")[0]


def test_no_spread_gives_no_interval_and_no_verdict():
    # a = [1, 1, 1], b = [31/32] * 3: the differences are 1/32 three times. Today: a zero-width interval [1/32, 1/32]
    # and "supported" after 2 pairs.
    plan = Plan((0, 1), 1, 3, 0.05)
    found = adaptive.decide(_claim(), [1 / 32] * 3, plan, 1)
    assert found.verdict is None and found.reason.startswith("no spread: all 3 observations are equal")
    assert (found.low, found.high) == (-math.inf, math.inf)


def test_an_empty_running_intersection_is_a_model_violation_never_a_decision():
    # tight differences near 0.02 give an interval of about [0.018, 0.022] (the claim's margin 0.02 inside it), then
    # zeros pull the interval below 0.018: the running intersection is empty. Today: "contradicted" from it.
    values = [0.0200, 0.0202, 0.0198, 0.0201, 0.0199, 0.0200] + [0.0] * 60
    plan = Plan((0, 1), 1, 80, 0.05)
    found = adaptive.decide(_claim(margin=0.02), values, plan, 1)
    assert found.verdict is None and found.reason.startswith("model violation: the running intersection is empty")
    assert found.low > found.high


# -- a larger budget continues the same sequences ----------------------------------------------------------------------
def test_a_larger_budget_continues_the_sweep_and_a_changed_claim_is_refused_in_one_line(tmp_path):
    plan = Plan((0, 1), 2, 6, 0.05)
    sweep, state = sweep_folder(tmp_path, [0.90, 0.92, 0.91, 0.93, 0.90, 0.94], plan)
    claims, cells = parse_claims(state["claims_raw"], "claims"), _cells()
    larger = Plan((0, 1), 2, 10, 0.05)
    resumed = adaptive.load_state(sweep, adaptive.new_state(cells, claims, larger, RAW), cells, claims, larger)
    assert resumed["rounds"] == state["rounds"] and resumed["plan"]["budget"] == 10 and not resumed["finished"]
    assert larger.next_seeds(list(range(6))) == [6, 7]  # the next round continues the seed numbering
    other = parse_claims([{**RAW[0], "expect": "less"}], "claims")
    with pytest.raises(AdaptiveError) as err:
        adaptive.load_state(sweep, adaptive.new_state(cells, other, larger, RAW), cells, other, larger)
    assert "\n" not in str(err.value) and "another grid, claims or plan" in str(err.value)
    assert json.loads((sweep / "adaptive.json").read_text())["plan"]["budget"] == 6  # nothing written on a refusal


def test_a_completed_seed_without_the_claim_metric_is_refused_in_one_line():
    with pytest.raises(AdaptiveError) as err:
        adaptive.claim_values(
            _claim(), {0: {"status": "completed", "metrics": {"val/loss": 1.0}}}, {0: {"status": "diverged"}}
        )
    assert "\n" not in str(err.value) and "seed 0 of side a completed without test/token_acc" in str(err.value)


class _Launcher:
    """Stands in for Hydra's launcher: each job writes its seed's result.json (the values given per cell), as a run
    would, and reports its folder."""

    def __init__(self, sweep: Path, values: dict[str, list[float]]) -> None:
        self.sweep, self.values, self.batches = sweep, values, []

    def launch(self, batch, initial_job_idx):
        from types import SimpleNamespace

        self.batches.append([job[-1] for job in batch])
        out = []
        for job in batch:
            name, seed = job[0].split("=")[1], int(job[-1].split("=")[1])
            folder = self.sweep / f"{name}_{seed}"
            config = flat_config("copy", name, "rope", seed)
            write(folder, result(f"{name}-{seed}", config, {METRIC: self.values[name][seed]}))
            out.append(SimpleNamespace(working_dir=str(folder), hydra_cfg=None))
        return out


def test_the_sweeper_continues_the_same_sequence_when_the_budget_is_raised(tmp_path):
    from hydra_plugins.attnlab_launcher.adaptive_sweeper import AdaptiveSeedSweeper

    # soft and local differ by +-0.02 around 0 seed by seed: the claim stays undecided at 4 seeds and at 6
    values = {"soft": [0.90, 0.92] * 4, "local": [0.92, 0.90] * 4}
    claims, cells, sweep = parse_claims([{**RAW[0], "expect": "greater"}], "claims"), _cells(), tmp_path / "sweep"
    sides = adaptive.claim_cells(cells, claims)
    sweeper = AdaptiveSeedSweeper.__new__(AdaptiveSeedSweeper)  # its rounds only: no Hydra context needed
    sweeper.launcher = _Launcher(sweep, values)
    for budget in (4, 6):
        plan = Plan((0, 1), 2, budget, 0.05)
        state = adaptive.load_state(sweep, adaptive.new_state(cells, claims, plan, RAW), cells, claims, plan)
        sweeper._rounds(state, sweep, plan, claims, cells, sides)
    written = json.loads((sweep / "adaptive.json").read_text())
    assert sweeper.launcher.batches == [["seed=0", "seed=1"] * 2, ["seed=2", "seed=3"] * 2, ["seed=4", "seed=5"] * 2]
    assert [r["round"] for r in written["rounds"]] == [1, 2, 3] and written["finished"]
    assert written["budgets"] == [4, 6] and written["plan"]["budget"] == 6
    assert written["decisions"][0]["verdict"] is None and written["decisions"][0]["n"] == 6
