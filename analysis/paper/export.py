"""From report to paper: the files a report writes for a manuscript, beside report.md.

- ``latex/``: one ``.tex`` per table (each task's summary, every table of every metric,
  the claims), ``tables.tex`` that inputs them all and ``preview.tex`` around it
  (``analysis.paper.latex``);
- ``references.bib``: the papers of the variants, tasks, metrics and statistics the
  report shows (``analysis.paper.bibliography``);
- ``methods.md`` / ``methods.tex``: a Methods paragraph drafted from the runs
  (``analysis.paper.methods``);
- ``claims.csv``: the numbers behind the claims table, when there are claims.

The figures' PDF and SVG copies are written with the figures (``analysis.report.figures.figure_canvas.save``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from analysis.paper import latex
from analysis.paper.bibliography import report_bibliography, statistics_used
from analysis.paper.methods import write_methods

LATEX_DIR = "latex"


@dataclass
class PaperFiles:
    tables: list[Path] = field(default_factory=list)
    bib: Path | None = None
    methods: tuple[Path, ...] = ()
    notes: list[str] = field(default_factory=list)


def _unique(name: str, taken: set[str]) -> str:
    stem, k = name[:-4], 2
    while name in taken:
        name, k = f"{stem}-{k}.tex", k + 1
    taken.add(name)
    return name


def export(
    out: Path,
    frame: pd.DataFrame,
    plans: Sequence,
    metrics: Sequence[str],
    cell_summaries: Mapping[str, pd.DataFrame],
    task_summaries: Mapping[str, object],
    claims: pd.DataFrame | None,
) -> PaperFiles:
    """Write the paper files of a report into ``out``.

    ``plans``: the report's ``TaskPlan`` per task (grids, baselines, comparisons); ``cell_summaries``:
    per metric, ``analysis.stats.cell_summary``; ``task_summaries``: per task, its ranked summary;
    ``claims``: the claims' results (``analysis.claims.evaluate``) or None.
    """
    files = PaperFiles()
    tables: list[tuple[str, str]] = []
    taken: set[str] = set()
    for task, ranked in task_summaries.items():
        tex, _ = latex.summary_table(ranked)
        tables.append((_unique(latex.file_name("summary", task), taken), tex))
    for plan in plans:
        for metric in metrics:
            for grid, (base, _) in zip(plan.grids, plan.baselines):
                cells = cell_summaries[metric]
                if not (cells["task"] == plan.task).any():
                    continue
                tex, _ = latex.metric_table(grid, metric, cells, plan.comparisons[metric], base)
                tables.append((_unique(latex.file_name(plan.task, metric, grid.title), taken), tex))
    if claims is not None and len(claims):
        tex, _ = latex.claims_table(claims)
        tables.append((_unique("claims.tex", taken), tex))
        claims.drop(columns=[c for c in claims.columns if c.startswith("_")]).to_csv(out / "claims.csv", index=False)
    else:
        (out / "claims.csv").unlink(missing_ok=True)  # an earlier report's claims are not this one's
    files.tables = latex.write_tables(out / LATEX_DIR, tables)

    comparisons = [frame for plan in plans for frame in plan.comparisons.values()]
    cells = (
        pd.concat(list(cell_summaries.values()), ignore_index=True) if cell_summaries else pd.DataFrame(columns=["n"])
    )
    used = statistics_used(task_summaries.values(), comparisons, claims, cells)
    bib = report_bibliography(frame, metrics, used)
    files.bib = bib.write(out / "references.bib")
    files.notes = bib.notes
    files.methods = write_methods(out, frame, bib, used, metrics)
    return files
