"""Report tables built from the runs frame: results grid, effects, comparisons, costs, failures, provenance.

A table is one ``analysis.report.plan.layout.Grid`` of a task: a row per level of one factor
group, a column per level of another, every other factor fixed. Each position
holds one cell (one configuration), shown as a value or as why there is none
(failed, diverged, missing, not reported); nothing is averaged across cells.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pandas as pd

from analysis.report.document.model import Bullets, Cell, Code, Paragraph, Section, Table, fmt, fmt_p
from analysis.report.plan.layout import Grid
from analysis.report.sections.registry import SECTIONS
from analysis.stats import inference

ONE_SEED_NOTICE = "no significance can be claimed with one seed"
# ms/step and tokens/s: the steady training steps after warm-up; fit s: the whole fit, compiling (compile s),
# validation and checkpoints included
COST_COLUMNS = [
    ("cost.params", "params"),
    ("cost.step_ms", "ms/step (steady)"),
    ("cost.train_seconds", "fit s (whole)"),
    ("cost.compile_seconds", "compile s (in fit)"),
    ("cost.tokens_per_second", "tokens/s (steady)"),
    ("cost.peak_memory_mb", "peak MB"),
    ("cost.steps", "steps"),
]
MAX_COMMANDS = 40
CONFOUND_MARK = "⚠"


def variant(attention: str, position: str) -> str:
    return f"{attention}+{position}"


def _in(grid: Grid) -> str:
    """`` on copy`` or `` on copy (optim.lr=0.01)``: where a table's numbers come from."""
    return f" on {grid.task}" + (f" ({grid.title})" if grid.where else "")


def _cell_runs(runs: pd.DataFrame, cell: str | None) -> pd.DataFrame:
    return runs.iloc[0:0] if cell is None else runs[runs["cell"] == cell]


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


def _note(grid: Grid, cell: str | None) -> str:
    """`` ⚠ optim.lr=0.01``: a confound this cell differs in from the rest of its table, or nothing."""
    if cell is None:
        return ""
    note = grid.cells.loc[grid.cells["cell"] == cell, "note"]
    return f" {CONFOUND_MARK} {note.iloc[0]}" if len(note) and note.iloc[0] else ""


def _positions(grid: Grid) -> list[tuple[str, list[tuple[str | None, str | None]]]]:
    """(row label, [(column level, cell id or None)]) in table order."""
    columns = grid.column_levels or [None]
    out = []
    for row in grid.row_levels:
        found = []
        for column in columns:
            hit = grid.cell_at(row, column)
            found.append((column, None if hit is None else hit["cell"]))
        out.append((row, found))
    return out


def _value_header(grid: Grid, name: str) -> list[str]:
    return grid.header() if grid.columns is not None else [*grid.header(), name]


def status_table(runs: pd.DataFrame, grid: Grid) -> Table:
    """How many runs of each status every cell has."""
    rows = []
    for label, found in _positions(grid):
        row: list = [label]
        for _, cell in found:
            counts = _status_counts(_cell_runs(runs, cell))
            if not counts:
                row.append(Cell("missing", kind="missing"))
                continue
            text = ", ".join(f"{s} ×{counts[s]}" for s in ("completed", "diverged", "failed") if counts[s])
            kind = "" if counts["completed"] else ("failed" if counts["failed"] else "diverged")
            row.append(Cell(text + _note(grid, cell), kind=kind))
        rows.append(row)
    return Table(
        _value_header(grid, "runs"),
        rows,
        caption=f"Runs per cell ({grid.task}{'; ' + grid.title if grid.where else ''})",
    )


def mean_text(mean: float, half: float, n: int, note: str = "") -> str:
    """``mean ± CI half-width (n=k)``; with one seed the interval is undefined and only n=1 is shown."""
    count = f"(n={n}{'; ' + note if note else ''})"
    if n < 2 or not math.isfinite(half):
        return f"{fmt(mean)} {count}"
    return f"{fmt(mean)} ± {fmt(half)} {count}"


def metric_table(runs: pd.DataFrame, grid: Grid, metric: str, summary: pd.DataFrame) -> Table:
    """Mean ± 95% CI over seeds per cell; the best cell of the table (by the metric's direction) is marked."""
    summary = summary[summary["task"] == grid.task].set_index("cell")
    summary = summary[summary.index.isin(set(grid.cells["cell"]))]
    better = inference.direction(metric)
    best = None
    if better is not None and len(summary):
        means = summary["mean"]
        best = means.max() if better == "higher" else means.min()
    rows = []
    for label, found in _positions(grid):
        row: list = [label]
        for _, cell in found:
            counts = _status_counts(_cell_runs(runs, cell))
            if cell not in summary.index:
                row.append(_gap(counts))
                continue
            s = summary.loc[cell]
            text = mean_text(s["mean"], s["ci_half"], int(s["n"]), _bad_note(counts)) + _note(grid, cell)
            row.append(Cell(text, best=best is not None and s["mean"] == best))
        rows.append(row)
    if better is None:
        how = "direction unknown, no best cell marked"
    else:
        how = f"{better} is better, best cell marked ★"
    caption = f"{metric}{_in(grid)}: mean ± 95% CI half-width over seeds (t-interval); {how}"
    return Table(_value_header(grid, metric), rows, caption=caption)


def _signed(x: float) -> str:
    if not math.isfinite(x):
        return "—"
    return ("+" if x > 0 else "") + fmt(x)


def _means(grid: Grid, summary: pd.DataFrame) -> pd.DataFrame:
    """Cell means as a rows × columns frame of the grid (NaN where a cell has no completed value)."""
    mean = summary[summary["task"] == grid.task].set_index("cell")["mean"]
    columns = grid.column_levels or [""]
    table = pd.DataFrame(np.nan, index=grid.row_levels, columns=columns)
    for r in grid.cells.itertuples(index=False):
        if r.cell in mean.index:
            table.loc[r.row, r.column or ""] = float(mean[r.cell])
    return table


def effects_block(runs: pd.DataFrame, grid: Grid, metric: str, summary: pd.DataFrame) -> list:
    """Main effects (marginal means) and, with two factors, their interaction, within one table."""
    if grid.rows is None:
        return []
    means = _means(grid, summary)
    row_means, col_means, interaction, grand = inference.effects(means)
    if grid.columns is None:
        rows = [
            [label, Cell(fmt(row_means[label])), Cell(_signed(row_means[label] - grand))] for label in grid.row_levels
        ]
        rows.append(["grand mean", Cell(fmt(grand)), Cell("")])
        return [
            Table(
                [grid.rows.name, "mean", "main effect (mean − grand mean)"],
                rows,
                caption=f"{metric}{_in(grid)}: main effect of {grid.rows.name}, one cell per level",
            )
        ]
    rows = []
    for label in grid.row_levels:
        cells = [Cell(_signed(interaction.loc[label, c])) for c in grid.column_levels]
        rows.append([label, *cells, Cell(fmt(row_means.get(label, math.nan)))])
    rows.append(
        [
            f"{grid.columns.name} mean",
            *[Cell(fmt(col_means.get(c, math.nan))) for c in grid.column_levels],
            Cell(fmt(grand)),
        ]
    )
    table = Table(
        [*grid.header(), f"{grid.rows.name} mean"],
        rows,
        caption=f"{metric}{_in(grid)}: interaction (cell − row mean − column mean + grand mean), "
        "marginal means in the last row and column, grand mean in the corner",
    )
    blocks: list = [table]
    missing = int(interaction.isna().to_numpy().sum())
    if missing:
        blocks.append(
            Paragraph(
                f"{missing} of {interaction.size} cells have no completed value; the marginal "
                "means are over the cells present, so they are not balanced.",
                kind="note",
            )
        )
    return blocks


def comparisons_block(
    runs: pd.DataFrame,
    grid: Grid,
    metric: str,
    comparisons: pd.DataFrame,
    baseline: str | None,
    name: str,
    note: str | None = None,
) -> list:
    """Welch tests of every cell of one table against its baseline cell, Holm-corrected, or why there are none.

    ``baseline`` is the baseline's cell id in this table (None with ``note`` saying why
    there is none); a row whose cells differ in a confound carries ⚠ and the keys.
    """
    if baseline is None:
        return [Paragraph(note or f"The baseline {name} is not in this table: no comparisons.", kind="note")]
    rows_here = comparisons[
        (comparisons["task"] == grid.task)
        & (comparisons["metric"] == metric)
        & (comparisons["baseline_cell"] == baseline)
    ]
    if rows_here.empty:
        return [_nothing_to_compare(runs, grid, metric, baseline, name)]
    tested = np.isfinite(rows_here["p"].to_numpy(float))
    untested = rows_here[~tested]
    if len(untested) == len(rows_here):  # one sentence, not a table of empty verdicts
        return [
            Paragraph(
                f"No comparison with {name} on {metric} can be tested: every cell, or the baseline, has "
                f"fewer than two completed seeds, so {ONE_SEED_NOTICE}. Run more seeds to test the "
                "differences.",
                kind="note",
            )
        ]
    table, flagged = _comparisons_table(rows_here[tested], grid, metric, name)
    blocks: list = [table]
    if flagged:
        blocks.append(
            Paragraph(
                f"{CONFOUND_MARK}: the two cells also differ in keys that are not factors asked "
                "for (see Confounds); the difference is not the named factors' alone.",
                kind="note",
            )
        )
    if len(untested):
        names = ", ".join(untested["cell_label"])
        blocks.append(
            Paragraph(f"Not tested (fewer than two seeds on a side): {names}; {ONE_SEED_NOTICE}.", kind="note")
        )
    compared = set(rows_here["cell"]) | {baseline}
    left_out = [
        f"{r.cell_label} ({_gap(_status_counts(_cell_runs(runs, r.cell))).text})"
        for r in grid.cells.itertuples(index=False)
        if r.cell not in compared
    ]
    if left_out:
        blocks.append(Paragraph("Not compared, no completed value: " + ", ".join(left_out) + "."))
    return blocks


def _nothing_to_compare(runs: pd.DataFrame, grid: Grid, metric: str, baseline: str, name: str) -> Paragraph:
    """Why a table has no comparison rows: the baseline has no completed run, or no other cell has a value."""
    base_counts = _status_counts(_cell_runs(runs, baseline))
    if not base_counts.get("completed"):
        return Paragraph(
            f"The baseline {name} has no completed run with {metric}{_in(grid)} "
            f"({_gap(base_counts).text}): no comparisons.",
            kind="note",
        )
    return Paragraph(f"No other cell{_in(grid)} has a completed {metric} to compare with {name}.", kind="note")


def _comparisons_table(tested: pd.DataFrame, grid: Grid, metric: str, name: str) -> tuple[Table, bool]:
    """The tested comparisons of one table as rows (Δ with its CI, t, p, Holm's p, d, verdict, confounds), and
    whether any row's cells differ in a confound."""
    rows = []
    flagged = False
    for r in tested.to_dict("records"):
        diff = (
            f"{_signed(r['diff'])} [{fmt(r['diff_low'])}, {fmt(r['diff_high'])}]"
            if math.isfinite(r["p"])
            else _signed(r["diff"])
        )
        flags = r.get("confounds") or ""
        flagged = flagged or bool(flags)
        rows.append(
            [
                r["cell_label"],
                Cell(f"{r['n']} vs {r['baseline_n']}"),
                Cell(diff),
                Cell(fmt(r["t"])),
                Cell(fmt_p(r["p"])),
                Cell(fmt_p(r["p_holm"])),
                Cell(fmt(r["d"])),
                Cell(r["verdict"], best=r["verdict"] == "better"),
                Cell(f"{CONFOUND_MARK} {flags}" if flags else "", kind="diverged" if flags else ""),
            ]
        )
    header = ["cell", "seeds", "Δ mean [95% CI]", "Welch t", "p", "p (Holm)", "Cohen's d", "verdict", "confounds"]
    better = inference.direction(metric) or "unknown direction"
    caption = f"{metric}{_in(grid)} vs baseline {name} (Δ = cell − baseline; {better} is better; α = {inference.ALPHA})"
    return Table(header, rows, caption=caption), flagged


def cost_table(runs: pd.DataFrame, grid: Grid) -> Table | None:
    """Mean cost over the completed seeds of each cell of one table."""
    present = [(col, label) for col, label in COST_COLUMNS if col in runs.columns]
    if not present:
        return None
    # the kernels each cell's layers trained on (result.json's ``kernels``), where runs recorded them
    kernels = "kernels" in runs.columns and bool(runs["kernels"].notna().any())
    rows = []
    for r in grid.cells.sort_values("cell_label").itertuples(index=False):
        cell = _cell_runs(runs, r.cell)
        done = cell[cell["status"] == "completed"]
        if done.empty:
            width = len(present) + kernels
            rows.append([r.cell_label, _gap(_status_counts(cell)), *[Cell("—") for _ in range(width)]])
            continue
        values = [Cell(fmt(float(pd.to_numeric(done[col], errors="coerce").mean()))) for col, _ in present]
        if kernels:
            values.append(Cell(_counted(done["kernels"]) if done["kernels"].notna().any() else "—"))
        rows.append([r.cell_label, Cell(str(len(done))), *values])
    return Table(
        ["cell", "seeds", *[label for _, label in present], *(["kernels"] if kernels else [])],
        rows,
        caption=f"Cost{_in(grid)}: mean over completed seeds; steady: the training steps after "
        "warm-up; whole: the fit, with compiling, validation and checkpoints",
    )


def _counted(values: pd.Series) -> str:
    counts = Counter(str(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not counts:
        return "unknown"
    return ", ".join(f"{v} ({n} runs)" if len(counts) > 1 else v for v, n in sorted(counts.items()))


def _column(runs: pd.DataFrame, name: str) -> pd.Series:
    return runs[name] if name in runs.columns else pd.Series([None] * len(runs), dtype=object)


def _when(value: object) -> str:
    """A run's time as recorded (ISO 8601), from the runs frame's datetimes; "" when missing."""
    if value is None or value is pd.NaT:
        return ""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


@SECTIONS.register("provenance", order=90, inputs=("frame",))
def provenance_section(frame: pd.DataFrame) -> Section:
    """Where the numbers come from: code versions, packages, dates, and the command of every run."""
    section = Section("Provenance")
    started = sorted(_when(v) for v in frame["started_at"].dropna())
    finished = sorted(_when(v) for v in frame["finished_at"].dropna())
    section.add(
        Bullets(
            [
                f"sweeps: {_counted(frame['sweep'])}",
                f"runs: {len(frame)} ({', '.join(f'{n} {s}' for s, n in sorted(Counter(frame['status']).items()))})",
                f"started {started[0] if started else 'unknown'} — finished {finished[-1] if finished else 'unknown'}",
                f"git SHA: {_counted(_column(frame, 'env.git_sha'))}",
                f"torch: {_counted(_column(frame, 'env.torch'))}; python: {_counted(_column(frame, 'env.python'))}",
                f"device: {_counted(_column(frame, 'env.device'))}; host: {_counted(_column(frame, 'env.host'))}",
            ]
        )
    )
    packages: dict[str, Counter] = {}
    for versions in _column(frame, "env.packages"):
        for name, version in (versions if isinstance(versions, dict) else {}).items():
            packages.setdefault(name, Counter())[str(version)] += 1
    if packages:
        rows = [
            [name, ", ".join(f"{v} ({n})" if len(c) > 1 else v for v, n in sorted(c.items()))]
            for name, c in sorted(packages.items())
        ]
        section.add(Table(["package", "version"], rows, caption="Package versions (run counts where they differ)"))
    rows = []
    for r in frame.to_dict("records"):  # records, not tuples: "env.git_sha" is no attribute name
        sha = str(r.get("env.git_sha") or "")[:10]
        given = r["overrides"]
        overrides = " ".join(map(str, given)) if isinstance(given, list) else str(given or "")
        rows.append(
            [
                r["run_id"],
                r["task"],
                r["cell_label"],
                Cell(str(r["seed"])),
                r["status"],
                sha,
                _when(r["started_at"]),
                overrides,
            ]
        )
    section.add(
        Table(
            ["run", "task", "cell", "seed", "status", "git", "started", "overrides"],
            rows,
            caption="Every run and the overrides that made it",
        )
    )
    commands = sorted({str(c) for c in frame["command"].dropna()})
    if commands:
        shown = commands[:MAX_COMMANDS]
        more = f"\n… {len(commands) - MAX_COMMANDS} more" if len(commands) > MAX_COMMANDS else ""
        section.add(Paragraph("Commands:"), Code("\n".join(shown) + more))
    return section


def results_frame_for_csv(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs frame with list and dict cells as JSON and times as ISO 8601 text, so results.csv round-trips
    through any CSV reader."""
    out = runs.drop(columns=["references"], errors="ignore")  # BibTeX text: references.bib holds it
    for column in out.columns:
        if out[column].dtype == object:
            out[column] = [json.dumps(v) if isinstance(v, (list, dict)) else v for v in out[column]]
        elif pd.api.types.is_datetime64_any_dtype(out[column]):
            out[column] = [_when(v) for v in out[column]]  # ISO 8601, as the runs wrote their times
    return out
