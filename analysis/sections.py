"""Report tables built from the runs frame: results grid, effects, comparisons, costs, failures, provenance.

The grid of a task is every attention type × every position encoding seen in
that task. Each cell is shown: a value, or why there is none (failed, diverged,
missing, not reported).
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis import stats
from analysis.document import Bullets, Cell, Code, Paragraph, Section, Table, fmt, fmt_p

ONE_SEED_NOTICE = "no significance can be claimed with one seed"
COST_COLUMNS = [("cost.params", "params"), ("cost.train_seconds", "train s"),
                ("cost.tokens_per_second", "tokens/s"), ("cost.peak_memory_mb", "peak MB"), ("cost.steps", "steps")]
MAX_COMMANDS = 40


@dataclass(frozen=True)
class Grid:
    """The attention × position grid of one task."""

    task: str
    attentions: list[str]
    positions: list[str]

    @classmethod
    def of(cls, runs: pd.DataFrame, task: str) -> "Grid":
        rows = runs[runs["task"] == task]
        return cls(task, sorted(rows["attention"].unique()), sorted(rows["position"].unique()))

    def cells(self) -> list[tuple[str, str]]:
        return [(a, p) for a in self.attentions for p in self.positions]

    def header(self) -> list[str]:
        return ["attention \\ position", *self.positions]


def variant(attention: str, position: str) -> str:
    return f"{attention}+{position}"


def _cell_runs(runs: pd.DataFrame, grid: Grid, attention: str, position: str) -> pd.DataFrame:
    return runs[(runs["task"] == grid.task) & (runs["attention"] == attention) & (runs["position"] == position)]


def _status_counts(cell: pd.DataFrame) -> Counter:
    return Counter(cell["status"])


def _gap(counts: Counter) -> Cell:
    """A cell with no value: which runs it has, or none at all."""
    if not counts:
        return Cell("missing", kind="missing")
    bad = [s for s in ("failed", "diverged") if counts[s]]
    if bad and not counts["completed"]:
        if len(bad) == 1:
            return Cell(bad[0], kind=bad[0])
        return Cell(", ".join(f"{s} ×{counts[s]}" for s in bad), kind="failed")
    return Cell("not reported", kind="missing")


def _bad_note(counts: Counter) -> str:
    """The seeds of a cell that did not complete, shown next to the mean of those that did."""
    return ", ".join(f"{counts[s]} {s}" for s in ("diverged", "failed") if counts[s])


def status_table(runs: pd.DataFrame, grid: Grid) -> Table:
    """How many runs of each status every cell has."""
    rows = []
    for attention in grid.attentions:
        row: list = [attention]
        for position in grid.positions:
            counts = _status_counts(_cell_runs(runs, grid, attention, position))
            if not counts:
                row.append(Cell("missing", kind="missing"))
                continue
            text = ", ".join(f"{s} ×{counts[s]}" for s in ("completed", "diverged", "failed") if counts[s])
            kind = "" if counts["completed"] else ("failed" if counts["failed"] else "diverged")
            row.append(Cell(text, kind=kind))
        rows.append(row)
    return Table(grid.header(), rows, caption=f"Runs per cell ({grid.task})")


def mean_text(mean: float, half: float, n: int, note: str = "") -> str:
    """``mean ± CI half-width (n=k)``; with one seed the interval is undefined and only n=1 is shown."""
    count = f"(n={n}{'; ' + note if note else ''})"
    if n < 2 or not math.isfinite(half):
        return f"{fmt(mean)} {count}"
    return f"{fmt(mean)} ± {fmt(half)} {count}"


def metric_table(runs: pd.DataFrame, grid: Grid, metric: str, summary: pd.DataFrame) -> Table:
    """Mean ± 95% CI over seeds per cell; the best cell (by the metric's direction) is marked."""
    summary = summary[summary["task"] == grid.task].set_index(["attention", "position"])
    better = stats.direction(metric)
    best = None
    if better is not None and len(summary):
        means = summary["mean"]
        best = means.max() if better == "higher" else means.min()
    rows = []
    for attention in grid.attentions:
        row: list = [attention]
        for position in grid.positions:
            counts = _status_counts(_cell_runs(runs, grid, attention, position))
            if (attention, position) not in summary.index:
                row.append(_gap(counts))
                continue
            s = summary.loc[(attention, position)]
            text = mean_text(s["mean"], s["ci_half"], int(s["n"]), _bad_note(counts))
            row.append(Cell(text, best=best is not None and s["mean"] == best))
        rows.append(row)
    if better is None:
        how = "direction unknown, no best cell marked"
    else:
        how = f"{better} is better, best cell marked ★"
    caption = f"{metric} on {grid.task}: mean ± 95% CI half-width over seeds (t-interval); {how}"
    return Table(grid.header(), rows, caption=caption)


def _signed(x: float) -> str:
    if not math.isfinite(x):
        return "—"
    return ("+" if x > 0 else "") + fmt(x)


def effects_block(runs: pd.DataFrame, grid: Grid, metric: str) -> list:
    """Marginal means (main effects) and the attention × position interaction for one task and metric."""
    task_runs = runs[runs["task"] == grid.task]
    row_means, col_means, interaction, grand = stats.main_effects(task_runs, metric, grid.attentions,
                                                                  grid.positions)
    rows = []
    for attention in grid.attentions:
        cells = [Cell(_signed(interaction.loc[attention, p])) for p in grid.positions]
        rows.append([attention, *cells, Cell(fmt(row_means.get(attention, math.nan)))])
    rows.append(["position mean", *[Cell(fmt(col_means.get(p, math.nan))) for p in grid.positions],
                 Cell(fmt(grand))])
    table = Table([*grid.header(), "attention mean"], rows,
                  caption=f"{metric} on {grid.task}: interaction (cell − row mean − column mean + grand mean), "
                          "marginal means in the last row and column, grand mean in the corner")
    blocks: list = [table]
    missing = int(interaction.isna().to_numpy().sum())
    if missing:
        blocks.append(Paragraph(f"{missing} of {interaction.size} cells have no completed value; the marginal "
                                "means are over the cells present, so they are not balanced.", kind="note"))
    return blocks


def comparisons_block(runs: pd.DataFrame, grid: Grid, metric: str, comparisons: pd.DataFrame,
                      baseline: tuple[str, str]) -> list:
    """Welch tests of every cell against the baseline cell, Holm-corrected, or why there are none."""
    name = variant(*baseline)
    base_counts = _status_counts(_cell_runs(runs, grid, *baseline))
    if baseline not in grid.cells():
        return [Paragraph(f"The baseline {name} is not part of task {grid.task}: no comparisons.", kind="note")]
    rows_here = comparisons[(comparisons["task"] == grid.task) & (comparisons["metric"] == metric)]
    if rows_here.empty:
        if not base_counts.get("completed"):
            return [Paragraph(f"The baseline {name} has no completed run with {metric} on {grid.task} "
                              f"({_gap(base_counts).text}): no comparisons.", kind="note")]
        return [Paragraph(f"No other cell of {grid.task} has a completed {metric} to compare with {name}.",
                          kind="note")]
    untested = rows_here[~np.isfinite(rows_here["p"].to_numpy(float))]
    if len(untested) == len(rows_here):  # one sentence, not a table of empty verdicts
        return [Paragraph(f"No comparison with {name} on {metric} can be tested: every cell, or the baseline, has "
                          f"fewer than two completed seeds, so {ONE_SEED_NOTICE}. Run more seeds to test the "
                          "differences.", kind="note")]
    rows = []
    for r in rows_here[np.isfinite(rows_here["p"].to_numpy(float))].itertuples(index=False):
        diff = f"{_signed(r.diff)} [{fmt(r.diff_low)}, {fmt(r.diff_high)}]" if math.isfinite(r.p) else _signed(r.diff)
        rows.append([variant(r.attention, r.position), Cell(f"{r.n} vs {r.baseline_n}"), Cell(diff),
                     Cell(fmt(r.t)), Cell(fmt_p(r.p)), Cell(fmt_p(r.p_holm)), Cell(fmt(r.d)),
                     Cell(r.verdict, best=r.verdict == "better")])
    header = ["variant", "seeds", "Δ mean [95% CI]", "Welch t", "p", "p (Holm)", "Cohen's d", "verdict"]
    better = stats.direction(metric) or "unknown direction"
    blocks: list = [Table(header, rows, caption=f"{metric} on {grid.task} vs baseline {name} "
                                                f"(Δ = variant − baseline; {better} is better; α = {stats.ALPHA})")]
    if len(untested):
        names = ", ".join(variant(a, p) for a, p in zip(untested["attention"], untested["position"]))
        blocks.append(Paragraph(f"Not tested (fewer than two seeds on a side): {names}; {ONE_SEED_NOTICE}.",
                                kind="note"))
    compared = {(a, p) for a, p in zip(rows_here["attention"], rows_here["position"])} | {baseline}
    left_out = [f"{variant(a, p)} ({_gap(_status_counts(_cell_runs(runs, grid, a, p))).text})"
                for a, p in grid.cells() if (a, p) not in compared]
    if left_out:
        blocks.append(Paragraph("Not compared, no completed value: " + ", ".join(left_out) + "."))
    return blocks


def cost_table(runs: pd.DataFrame, grid: Grid) -> Table | None:
    """Mean cost over the completed seeds of each variant of one task."""
    present = [(col, label) for col, label in COST_COLUMNS if col in runs.columns]
    if not present:
        return None
    rows = []
    for attention, position in grid.cells():
        cell = _cell_runs(runs, grid, attention, position)
        done = cell[cell["status"] == "completed"]
        if done.empty:
            rows.append([variant(attention, position), _gap(_status_counts(cell)), *[Cell("—") for _ in present]])
            continue
        values = [Cell(fmt(float(pd.to_numeric(done[col], errors="coerce").mean()))) for col, _ in present]
        rows.append([variant(attention, position), Cell(str(len(done))), *values])
    return Table(["variant", "seeds", *[label for _, label in present]], rows,
                 caption=f"Cost on {grid.task}: mean over completed seeds")


def failures_table(runs: pd.DataFrame) -> Table | None:
    bad = runs[runs["status"] != "completed"]
    if bad.empty:
        return None
    rows = [[r.run_id, r.task, r.attention, r.position, Cell(str(r.seed)), Cell(r.status, kind=r.status),
             str(r.error or "")] for r in bad.itertuples(index=False)]
    return Table(["run", "task", "attention", "position", "seed", "status", "error"], rows,
                 caption="Runs that did not complete")


def _counted(values: pd.Series) -> str:
    counts = Counter(str(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not counts:
        return "unknown"
    return ", ".join(f"{v} ({n} runs)" if len(counts) > 1 else v for v, n in sorted(counts.items()))


def _column(runs: pd.DataFrame, name: str) -> pd.Series:
    return runs[name] if name in runs.columns else pd.Series([None] * len(runs), dtype=object)


def provenance_section(runs: pd.DataFrame) -> Section:
    """Where the numbers come from: code versions, packages, dates, and the command of every run."""
    section = Section("Provenance")
    started = sorted(str(v) for v in runs["started_at"].dropna())
    finished = sorted(str(v) for v in runs["finished_at"].dropna())
    section.add(Bullets([
        f"sweeps: {_counted(runs['sweep'])}",
        f"runs: {len(runs)} ({', '.join(f'{n} {s}' for s, n in sorted(Counter(runs['status']).items()))})",
        f"started {started[0] if started else 'unknown'} — finished {finished[-1] if finished else 'unknown'}",
        f"git SHA: {_counted(_column(runs, 'env.git_sha'))}",
        f"torch: {_counted(_column(runs, 'env.torch'))}; python: {_counted(_column(runs, 'env.python'))}",
        f"device: {_counted(_column(runs, 'env.device'))}; host: {_counted(_column(runs, 'env.host'))}",
    ]))
    packages: dict[str, Counter] = {}
    for versions in _column(runs, "env.packages"):
        for name, version in (versions if isinstance(versions, dict) else {}).items():
            packages.setdefault(name, Counter())[str(version)] += 1
    if packages:
        rows = [[name, ", ".join(f"{v} ({n})" if len(c) > 1 else v for v, n in sorted(c.items()))]
                for name, c in sorted(packages.items())]
        section.add(Table(["package", "version"], rows, caption="Package versions (run counts where they differ)"))
    rows = []
    for r in runs.to_dict("records"):  # records, not tuples: "env.git_sha" is no attribute name
        sha = str(r.get("env.git_sha") or "")[:10]
        given = r["overrides"]
        overrides = " ".join(map(str, given)) if isinstance(given, list) else str(given or "")
        rows.append([r["run_id"], r["task"], variant(r["attention"], r["position"]), Cell(str(r["seed"])),
                     r["status"], sha, str(r["started_at"] or ""), overrides])
    section.add(Table(["run", "task", "variant", "seed", "status", "git", "started", "overrides"], rows,
                      caption="Every run and the overrides that made it"))
    commands = sorted({str(c) for c in runs["command"].dropna()})
    if commands:
        shown = commands[:MAX_COMMANDS]
        more = f"\n… {len(commands) - MAX_COMMANDS} more" if len(commands) > MAX_COMMANDS else ""
        section.add(Paragraph("Commands:"), Code("\n".join(shown) + more))
    return section


def results_frame_for_csv(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs frame with list and dict cells as JSON, so results.csv round-trips through any CSV reader."""
    out = runs.copy()
    for column in out.columns:
        if out[column].dtype == object:
            out[column] = [json.dumps(v) if isinstance(v, (list, dict)) else v for v in out[column]]
    return out
