"""Adaptive seeds (hydra/sweeper=adaptive): the plan and its refusals, which cell a claim names, the pairing of
seeds, and on a tiny real grid: a planted effect decided before the budget, the same decisions from
``python -m analysis.claims``, and a sweep killed between rounds resuming at its round."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnlab.claims import parse_claims
from attnlab.sequential import replay
from experiments.sweep import adaptive
from experiments.sweep.adaptive import AdaptiveError, Cell, Plan
from tests.helpers.env import ENV
from tests.helpers.sweeps import QUIET, multirun, refused_in_process, results
from tests.helpers.warm import run_module


def claim(**fields):
    raw = {"metric": "val/loss", "a": {"position": "rope"}, "b": {"position": "alibi"}, "expect": "less", **fields}
    return parse_claims([raw], "claims")[0]


def cell(position: str, window: int = 4) -> Cell:
    return Cell(
        f"position={position},attention.window={window}", (), {"position.name": position, "attention.window": window}
    )


@pytest.mark.parametrize(
    "plan,said",
    [
        (
            Plan((0, 1, 2), 2, 2, 0.05),
            "hydra.sweeper.budget=2 is not allowed; it must be an integer >= the first round's 3",
        ),
        (Plan((0, 1), 0, 8, 0.05), "hydra.sweeper.step=0 is not allowed"),
        (Plan((0,), 1, 8, 0.05), "hydra.sweeper.first_round=1 is not allowed"),
        (Plan((0, 1), 1, 8, 1.5), "hydra.sweeper.alpha=1.5 is not allowed"),
        (Plan((0, 1), 1, 8, 0.05, 0.0), "hydra.sweeper.mixture=0.0 is not allowed"),
    ],
)
def test_a_bad_plan_is_refused_naming_its_key(plan: Plan, said: str) -> None:
    with pytest.raises(AdaptiveError, match=said.replace("(", r"\(").replace(")", r"\)")):
        plan.check()


def test_next_seeds_continue_the_numbering_and_stop_at_the_budget() -> None:
    plan = Plan((3, 5), 2, 5, 0.05)
    assert plan.next_seeds([3, 5]) == [6, 7]
    assert plan.next_seeds([3, 5, 6, 7]) == [8]
    assert plan.next_seeds([3, 5, 6, 7, 8]) == []


def test_a_claim_side_names_exactly_one_cell_of_the_grid() -> None:
    cells = [cell("rope"), cell("alibi")]
    a, b = adaptive.claim_cells(cells, [claim()])[0]
    assert (a.key, b.key) == (cells[0].key, cells[1].key)
    with pytest.raises(
        AdaptiveError, match=r"claims\[0\]\.b=\{position=t5\} names no cell of the grid: position is one of alibi, rope"
    ):
        adaptive.claim_cells(cells, [claim(b={"position": "t5"})])
    two_windows = [cell("rope", 4), cell("rope", 8), cell("alibi")]
    with pytest.raises(AdaptiveError, match=r"claims\[0\]\.a=\{position=rope\} covers 2 cells"):
        adaptive.claim_cells(two_windows, [claim()])
    with pytest.raises(AdaptiveError, match="hydra/sweeper=adaptive needs claims"):
        adaptive.claim_cells(cells, [])


def test_seeds_pair_by_number_and_a_seed_without_a_value_is_a_lost_pair_at_the_worst_value() -> None:
    done = lambda v: {"status": "completed", "metrics": {"val/loss": v}}  # noqa: E731
    a = {0: done(1.0), 1: done(1.5), 2: {"status": "failed"}, 4: done(0.5)}
    b = {0: done(2.0), 1: done(2.5), 2: done(9.0), 3: done(3.0), 4: done(1.25)}
    found = adaptive.claim_values(claim(), a, b)
    assert found.values == [-1.0, -1.0, math.inf, -0.75]  # a loss's worst value is +inf
    assert found.lost == [False, False, True, False]
    assert found.sides == {
        "a": {"completed": 3, "diverged": 0, "failed": 1},
        "b": {"completed": 5, "diverged": 0, "failed": 0},
    }
    ratio = parse_claims(
        [{"metric": "token_acc@16", "a": {"position": "rope"}, "expect": "ratio", "over": 8, "bounds": [0.5, None]}],
        "c",
    )[0]
    by_length = {0: {"status": "completed", "by_length": {"16": {"token_acc": 0.6}, "8": {"token_acc": 0.8}}}}
    assert adaptive.claim_values(ratio, by_length, None).values == [pytest.approx(0.75)]


def test_a_state_written_by_another_grid_is_refused(tmp_path: Path) -> None:
    plan = Plan((0, 1), 1, 4, 0.05)
    first = adaptive.new_state([cell("rope"), cell("alibi")], [claim()], plan, [])
    adaptive.save_state(tmp_path, first)
    assert adaptive.load_state(tmp_path, first)["fingerprint"] == first["fingerprint"]
    other = adaptive.new_state([cell("rope"), cell("t5")], [claim(b={"position": "t5"})], plan, [])
    with pytest.raises(AdaptiveError, match="another grid, claims or plan"):
        adaptive.load_state(tmp_path, other)


# -- on a real grid ---------------------------------------------------------------------------------
# Two cells that differ in a learning rate that trains and one that leaves the weights where they
# started: their val/loss differ by far more than their seeds spread (a planted effect).
GRID = [*QUIET, "task=reverse", "trainer.max_steps=12", "optim.lr=0.01,0.000000001"]
CLAIM = {
    "name": "a learning rate that trains lowers the loss",
    "metric": "val/loss",
    "a": {"optim.lr": 0.01},
    "b": {"optim.lr": 0.000000001},
    "expect": "less",
}
BUDGET = 8


def adaptive_args(tmp_path: Path, claims: list | None = None, *extra: str) -> list[str]:
    claims_file = tmp_path / "claims.yaml"
    claims_file.write_text(json.dumps({"claims": [CLAIM] if claims is None else claims}))
    return [
        *GRID,
        "hydra/sweeper=adaptive",
        "hydra.sweeper.first_round=2",
        "hydra.sweeper.step=2",
        f"hydra.sweeper.budget={BUDGET}",
        f"hydra.sweeper.claims_file={claims_file}",
        *extra,
    ]


@pytest.mark.parametrize(
    "claims,extra,said",
    [
        ([], [], "hydra/sweeper=adaptive needs claims to decide"),
        ([{**CLAIM, "b": {"optim.lr": 0.5}}], [], "b={optim.lr=0.5} names no cell of the grid: optim.lr is one of"),
        (None, ["hydra.sweeper.budget=1"], "hydra.sweeper.budget=1 is not allowed"),
        ([{**CLAIM, "expect": "equivalent", "margin": 0}], [], "margin=0 is not allowed"),
    ],
    ids=["no-claims", "cell-not-in-grid", "budget-below-first-round", "margin-not-positive"],
)
def test_bad_input_stops_in_one_line_before_any_seed_trains(
    tmp_path: Path, monkeypatch, capfd, claims, extra, said
) -> None:
    code, stderr, sweep_dir = refused_in_process(tmp_path, monkeypatch, capfd, *adaptive_args(tmp_path, claims, *extra))
    assert code == 2, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.startswith("attnlab:")]
    assert len(lines) == 1 and said in lines[0], stderr[-2000:]
    assert "Traceback" not in stderr
    assert not list(sweep_dir.rglob("result.json")) and not (sweep_dir / "adaptive.json").exists()


def report_md(sweep_dir: Path, out: Path) -> str:
    """The sweep's report built by ``python -m analysis.report`` as a user runs it; its report.md."""
    report = run_module("analysis.report", str(sweep_dir), "--out", str(out), "--no-paper", env=ENV, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    return (out / "report.md").read_text()


def claims_cli(sweep_dir: Path) -> subprocess.CompletedProcess:
    return run_module("analysis.claims", str(sweep_dir), env=ENV, timeout=120)


@pytest.mark.slow
def test_a_planted_effect_is_decided_before_the_budget_and_the_analysis_agrees(tmp_path: Path) -> None:
    proc, sweep_dir = multirun(tmp_path, *adaptive_args(tmp_path, None, "hydra/launcher=ensemble"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads((sweep_dir / "adaptive.json").read_text())
    assert state["finished"] and state["decisions"][0]["verdict"] == "supported"
    found = results(sweep_dir)
    seeds = sorted(r["seed"] for r in found.values() if r["config"]["optim.lr"] == 0.01)
    assert len(seeds) < BUDGET and seeds == list(range(len(seeds)))
    assert all(r["ensemble"]["members"] == 2 for r in found.values())  # each round's seeds of a cell: one ensemble
    # the decision, replayed here from the result files alone, is the sweep's
    by_seed = {(r["config"]["optim.lr"], r["seed"]): r["metrics"]["val/loss"] for r in found.values()}
    diffs = [by_seed[(0.01, s)] - by_seed[(1e-9, s)] for s in seeds]
    mine = replay(diffs, "less", 0.0, None, 0.05)
    assert mine.verdict == "supported" and mine.n == state["decisions"][0]["n"]
    shown = claims_cli(sweep_dir)
    assert shown.returncode == 0, shown.stderr
    assert "[SUPPORTED]" in shown.stdout and f"supported after {mine.n} seed pair(s)" in shown.stdout
    assert f"{len(seeds)} seeds ({', '.join(map(str, seeds))})" in shown.stdout
    assert "a fixed design of equal power: " in shown.stdout and "(Welch two-sided at power" in shown.stdout
    # the report's Claims section says the same
    text = report_md(sweep_dir, tmp_path / "report")
    assert "anytime CS (Lai t-mixture)" in text and f"supported after {mine.n} seed pair(s)" in text
    assert "seeds per side (Welch two-sided at power" in text and "sometimes diverge" in text


@pytest.mark.slow
def test_a_sweep_killed_between_rounds_resumes_at_its_round(tmp_path: Path) -> None:
    args = [*adaptive_args(tmp_path, [CLAIM]), f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    args = [a for a in args if a != "hydra.sweeper.step=2"] + ["hydra.sweeper.step=1"]
    command = [sys.executable, "-m", "experiments.train", "-m", *args]
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    state_file = tmp_path / "sweep" / "adaptive.json"
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            if state_file.exists():
                state = json.loads(state_file.read_text())
                if len(state["rounds"]) >= 2 and not state["rounds"][1]["done"]:
                    break  # round 2 is planned and training
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before its second round could be interrupted"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    killed = json.loads(state_file.read_text())
    assert [r["done"] for r in killed["rounds"]] == [True, False]
    first_round = {
        p: p.stat().st_mtime_ns
        for p in (tmp_path / "sweep").rglob("result.json")
        if json.loads(p.read_text())["seed"] in (0, 1)
    }
    assert len(first_round) == 4
    again = run_module(*command[2:], cwd=tmp_path, env=ENV, timeout=300)  # the same command, from the warm Python
    assert again.returncode == 0, again.stderr[-3000:]
    said = again.stdout + again.stderr
    assert "Adaptive seeds: round 1" not in said and "Adaptive seeds: round 2" in said
    assert {p: p.stat().st_mtime_ns for p in first_round} == first_round  # round 1 was not trained again
    state = json.loads(state_file.read_text())
    assert state["finished"] and [r["round"] for r in state["rounds"]] == list(range(1, len(state["rounds"]) + 1))
    assert state["rounds"][1]["seeds"] == killed["rounds"][1]["seeds"]
    shown = claims_cli(tmp_path / "sweep")
    verdict = state["decisions"][0]["verdict"]
    assert f"[{(verdict or 'inconclusive').upper()}]" in shown.stdout
