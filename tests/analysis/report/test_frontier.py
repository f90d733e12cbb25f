"""Quality against cost: the Pareto set against a brute-force reference, the report's frontier section on
fixture runs, the cached benchmark of each cell, and the training step timer.

Every expected Pareto set is computed here by comparing every pair of points, and every
expected cell mean by pandas on the values written; none comes from analysis.report.frontier_data.
"""

from __future__ import annotations

import ast
import re
import statistics

import numpy as np
import pandas as pd
import pytest

from analysis.data.collect import collect
from analysis.report.build import build_report
from analysis.report.plan.bench_cells import CACHE_FILE, measure_cells
from analysis.report.plan.frontier_data import pareto_mask
from experiments.training.callbacks import StepTimer, step_time_summary
from tests.helpers.cell_fixtures import flat_config, result, write

TRAIN, LENGTHS = [2, 12], (8, 12, 16)
CELLS = [(a, p) for a in ("multihead", "local", "soft") for p in ("sinusoidal", "rope")]
RATES = (0.001, 0.003)


def brute_force(cost, quality, higher: bool) -> set[int]:
    """Indices no other point dominates: as cheap or cheaper and as good or better, one of them strictly."""
    keep = set()
    ok = [i for i in range(len(cost)) if np.isfinite(cost[i]) and np.isfinite(quality[i])]
    for i in ok:
        dominated = False
        for j in ok:
            better = quality[j] >= quality[i] if higher else quality[j] <= quality[i]
            strictly = quality[j] != quality[i]
            if cost[j] <= cost[i] and better and (cost[j] < cost[i] or strictly):
                dominated = True
        if not dominated:
            keep.add(i)
    return keep


# ---------------------------------------------------------------- the Pareto set


@pytest.mark.parametrize("higher", [True, False], ids=["higher-better", "lower-better"])
def test_pareto_mask_equals_brute_force_on_random_points(higher: bool) -> None:
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 12))
        # Small integer grids make ties in cost, in quality and whole duplicate points common.
        cost = rng.integers(0, 5, n).astype(float)
        quality = rng.integers(0, 5, n).astype(float)
        if trial % 3 == 0:
            cost[rng.random(n) < 0.2] = np.nan
        mask = pareto_mask(cost, quality, higher_is_better=higher)
        assert set(np.flatnonzero(mask)) == brute_force(cost, quality, higher), (cost, quality)


def test_pareto_mask_single_cell_ties_and_duplicates() -> None:
    assert pareto_mask([3.0], [0.5]).tolist() == [True]
    assert pareto_mask([], []).tolist() == []
    assert pareto_mask([np.nan], [0.5]).tolist() == [False]
    # Equal points dominate neither; equal cost with worse quality is dominated (both directions).
    assert pareto_mask([1, 1, 1], [0.9, 0.9, 0.5]).tolist() == [True, True, False]
    assert pareto_mask([1, 1, 1], [0.9, 0.9, 0.5], higher_is_better=False).tolist() == [False, False, True]
    # A slower cell at equal quality is dominated; a slower and better one is not.
    assert pareto_mask([1, 2, 3], [0.5, 0.5, 0.7]).tolist() == [True, False, True]
    with pytest.raises(ValueError, match="one length"):
        pareto_mask([1, 2], [1])


# ---------------------------------------------------------------- the report section


def write_sweep(root, step_ms: bool = True) -> pd.DataFrame:
    """3 attention x 2 position x 2 learning rates x 2 seeds; the ground truth, one row per run."""
    rng = np.random.default_rng(11)
    truth = []
    for attention, position in CELLS:
        for lr in RATES:
            for seed in range(2):
                config = flat_config("copy", attention, position, seed, **{"optim.lr": lr})
                by_length = {str(n): {"token_acc": float(rng.uniform(0.2, 1.0))} for n in LENGTHS}
                res = result(
                    f"{attention}-{position}-{lr}-s{seed}",
                    config,
                    {"test/token_acc": float(np.mean([v["token_acc"] for v in by_length.values()]))},
                    by_length=by_length,
                )
                res["cost"]["peak_memory_mb"] = float(rng.uniform(100, 400))
                if step_ms:
                    res["cost"]["step_ms"] = float(rng.uniform(5, 40))
                write(root / f"{attention}-{position}-{lr}-s{seed}", res)
                truth.append(
                    {
                        "attention": attention,
                        "position": position,
                        "lr": lr,
                        "seed": seed,
                        "step_ms": res["cost"].get("step_ms", np.nan),
                        **{f"acc{n}": by_length[str(n)]["token_acc"] for n in LENGTHS},
                    }
                )
    return pd.DataFrame(truth)


def pareto_rows(markdown: str, table: str) -> list[list[str]]:
    """The rows of the Pareto table whose caption starts with ``table``."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"*{table}: the Pareto cells"))
    rows = []
    for line in lines[start + 4 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def _cell_of(label: str) -> tuple[str, str]:
    found = dict(re.findall(r"(attention|position)=(\w+)", label))
    return found["attention"], found["position"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("frontier")
    truth = write_sweep(root / "sweep")
    html = build_report([root / "sweep"], root / "out")
    return truth, html.parent / "report.md", html.parent


@pytest.mark.slow
def test_pareto_table_holds_the_brute_force_set_per_table_and_length(report) -> None:
    truth, md, _ = report
    markdown = md.read_text()
    assert "## Quality and cost" in markdown
    for lr in RATES:
        rows = pareto_rows(markdown, f"copy (optim.lr={lr})")
        means = truth[truth["lr"] == lr].groupby(["attention", "position"]).mean(numeric_only=True)
        for length in (12, 16):  # the longest trained, the longest evaluated
            expected = brute_force(means["step_ms"].to_numpy(), means[f"acc{length}"].to_numpy(), higher=True)
            expected_cells = {means.index[i] for i in expected}
            shown = [r for r in rows if r[1] == f"token_acc at length {length}"]
            assert {_cell_of(r[2]) for r in shown} == expected_cells
            for r in shown:  # each row's numbers are the cell's means over its seeds
                mean = means.loc[_cell_of(r[2])]
                assert float(r[3].split()[0]) == pytest.approx(mean[f"acc{length}"], abs=1e-3)
                assert float(r[4].split()[0]) == pytest.approx(mean["step_ms"], abs=1e-3)
            costs = [float(r[4].split()[0]) for r in shown]
            assert costs == sorted(costs)  # cheapest first


def test_a_loss_without_per_length_results_is_one_panel_where_lower_is_better(tmp_path) -> None:
    rng = np.random.default_rng(5)
    truth = []
    for attention, position in CELLS:
        for seed in range(2):
            res = result(
                f"{attention}-{position}-s{seed}",
                flat_config("copy", attention, position, seed),
                {"val/loss": float(rng.uniform(0.5, 2.0))},
            )
            res["train_lengths"], res["cost"]["step_ms"] = None, float(rng.uniform(5, 40))
            write(tmp_path / "sweep" / res["run_id"], res)
            truth.append(
                {
                    "attention": attention,
                    "position": position,
                    "loss": res["metrics"]["val/loss"],
                    "step_ms": res["cost"]["step_ms"],
                }
            )
    markdown = (build_report([tmp_path / "sweep"], tmp_path / "out").parent / "report.md").read_text()
    means = pd.DataFrame(truth).groupby(["attention", "position"]).mean()
    expected = {means.index[i] for i in brute_force(means["step_ms"].to_numpy(), means["loss"].to_numpy(), False)}
    rows = pareto_rows(markdown, "copy")
    assert {r[1] for r in rows} == {"val/loss"}
    assert {_cell_of(r[2]) for r in rows} == expected


def test_one_frontier_figure_per_table(report) -> None:
    _, md, out = report
    markdown = md.read_text()
    figures = re.findall(r"\]\((figures/frontier[^)]+\.png)\)", markdown)
    assert len(figures) == len(RATES)
    for path in figures:
        assert (out / path).stat().st_size > 10_000  # a drawn figure, not an empty canvas


@pytest.mark.slow
def test_runs_without_step_time_warn_once_and_still_report(tmp_path) -> None:
    write_sweep(tmp_path / "sweep", step_ms=False)
    with pytest.warns(UserWarning, match=r"no completed run records cost\.step_ms") as caught:
        html = build_report([tmp_path / "sweep"], tmp_path / "out")
    mine = [w for w in caught if "cost.step_ms" in str(w.message)]
    assert len(mine) == 1 and "\n" not in str(mine[0].message)
    markdown = (html.parent / "report.md").read_text()
    assert "## Quality and cost" in markdown and "no completed run records cost.step_ms" in markdown
    assert not list((html.parent / "figures").glob("frontier*.png"))


# ---------------------------------------------------------------- --bench: each cell measured, cached


def test_bench_measures_each_configuration_once_and_caches(tmp_path) -> None:
    truth = write_sweep(tmp_path / "sweep")
    runs = collect([tmp_path / "sweep"])
    seen = []

    def fake(config, environment):
        seen.append(config)
        # local is linear in T, the others quadratic; soft runs out of memory at the longest T
        slope = 1 if config.attention == "local" else 2
        return [
            {
                "attention": config.attention,
                "position": config.position,
                "backend": "math",
                "T": t,
                "status": "oom" if (config.attention == "soft" and t == 4096) else "ok",
                "ms": float(t**slope) / 1e4,
                "tokens_per_second": 1.0,
                "peak_mb": float(t**slope) / 1e3,
            }
            for t in environment["lengths"]
        ]

    first = measure_cells(runs.runs, tmp_path, measure=fake)
    # Configurations, not cells: the learning rate does not change the layer, so 6 of the 12 cells' layers.
    assert first.measured == len(seen) == len(truth.groupby(["attention", "position"]))
    assert set(first.by_cell) == set(runs.runs["cell"])
    assert (tmp_path / CACHE_FILE).is_file()
    again = measure_cells(runs.runs, tmp_path, measure=fake)
    assert again.measured == 0 and len(seen) == 6 and again.by_cell == first.by_cell


@pytest.mark.slow
def test_bench_runs_experiments_bench_scaling_per_configuration(tmp_path) -> None:
    write_sweep(tmp_path / "sweep")
    runs = collect([tmp_path / "sweep"])
    local_rope = runs.runs[(runs.runs["attention"] == "local") & (runs.runs["position"] == "rope")]
    measured = measure_cells(local_rope, tmp_path, lengths=(16, 32))
    records = next(iter(measured.by_cell.values()))
    assert [r["T"] for r in records] == [16, 32] and all(r["status"] == "ok" for r in records)
    assert all(r["ms"] > 0 and r["peak_mb"] > 0 for r in records)
    assert measured.bench["settings"]["lengths"] == [16, 32] and measured.measured == 1
    # the runs' parameters reach the benchmark as literals it reads back (ast.literal_eval)
    from analysis.report.plan.bench_cells import bench_command, cell_configurations

    config = next(iter(cell_configurations(local_rope).values()))
    command = bench_command(config, measured.bench["settings"], tmp_path / "b.json")
    given = command[command.index("--attention-param") + 1 : command.index("--position-param")]
    assert {k: ast.literal_eval(v) for k, v in (g.split("=", 1) for g in given)} == {"mode": "monotonic", "window": 8}
    assert command[command.index("--heads") + 1] == "1" and "--causal" not in command


@pytest.mark.slow
def test_a_benchmark_that_cannot_run_is_an_error_record_and_is_not_cached(tmp_path) -> None:
    from analysis.report.plan.bench_cells import Configuration, _environment, _measure

    broken = Configuration("nosuchattention", (), "none", (), 16, None, False, "auto")
    records = _measure(broken, _environment((16,)))
    assert [r["status"] for r in records] == ["error"] and "nosuchattention" in records[0]["error"]

    write_sweep(tmp_path / "sweep")
    runs = collect([tmp_path / "sweep"])
    calls = []

    def failing(config, environment):
        calls.append(config)
        return [
            {
                "attention": config.attention,
                "position": config.position,
                "backend": "auto",
                "T": t,
                "status": "error",
                "ms": None,
                "tokens_per_second": None,
                "peak_mb": None,
            }
            for t in environment["lengths"]
        ]

    measure_cells(runs.runs, tmp_path, measure=failing)
    again = measure_cells(runs.runs, tmp_path, measure=failing)
    assert again.measured == 6 and len(calls) == 12  # tried again, not read back from the cache


def test_bench_gives_each_layer_the_runs_parameters_and_names_what_differs(tmp_path) -> None:
    for attention, window in (("local", 4), ("local", 8), ("multihead", None)):
        changes = {"attention.window": window} if window else {}
        config = flat_config("copy", attention, "rope", 0, **changes)
        write(
            tmp_path / "sweep" / f"{attention}{window}", result(f"{attention}{window}", config, {"test/token_acc": 0.5})
        )
    runs = collect([tmp_path / "sweep"])
    seen = {}

    def fake(config, environment):
        seen[config.attention, dict(config.attention_params).get("window")] = dict(config.attention_params)
        return [
            {
                "attention": config.attention,
                "position": config.position,
                "backend": "math",
                "T": 16,
                "status": "ok",
                "ms": 1.0,
                "tokens_per_second": 1.0,
                "peak_mb": 1.0,
            }
        ]

    bench = measure_cells(runs.runs, tmp_path, measure=fake).bench
    # the window as the int the constructor takes (not 4.0 from a NaN-padded column), heads passed apart
    assert seen[("local", 4)] == {"mode": "monotonic", "window": 4} and isinstance(seen[("local", 4)]["window"], int)
    assert seen[("multihead", None)] == {}
    assert {r["attention"] for r in bench["records"]} == {"local(window=4)", "local(window=8)", "multihead"}


def test_bench_option_without_a_file_means_measure() -> None:
    from pathlib import Path

    from analysis.report.build import _parser

    assert _parser().parse_args(["sweep", "--out", "o", "--bench"]).bench is True
    assert _parser().parse_args(["sweep", "--out", "o", "--bench", "b.json"]).bench == Path("b.json")
    assert _parser().parse_args(["sweep", "--out", "o"]).bench is None


# ---------------------------------------------------------------- the training step timer


def test_step_time_is_the_median_after_warm_up() -> None:
    times = [500.0, 300.0, 200.0] + [10.0, 12.0, 11.0, 50.0, 13.0] * 4
    summary = step_time_summary(times, warmup=3)
    assert summary == {"step_ms": statistics.median(times[3:]), "step_ms_steps": len(times) - 3}
    # A short run keeps at least half of its steps; no step at all is unknown, not zero.
    assert step_time_summary([100.0, 4.0, 6.0], warmup=10) == {"step_ms": 5.0, "step_ms_steps": 2}
    assert step_time_summary([], warmup=10) == {"step_ms": None, "step_ms_steps": 0}
    assert StepTimer().summary()["step_ms"] is None
