"""The report's "Failed and diverged runs" section: every run that did not complete, with its error."""

from __future__ import annotations

import pandas as pd

from analysis.report.document.model import Cell, Section, Table
from analysis.report.sections.registry import SECTIONS


@SECTIONS.register("failures", order=50, inputs=("frame",))
def failures_section(frame: pd.DataFrame) -> Section | None:
    """The runs that failed or diverged, with their errors (none when every run completed)."""
    failures = failures_table(frame)
    return None if failures is None else Section("Failed and diverged runs", [failures])


def failures_table(runs: pd.DataFrame) -> Table | None:
    bad = runs[runs["status"] != "completed"]
    if bad.empty:
        return None
    rows = [
        [r.run_id, r.task, r.cell_label, Cell(str(r.seed)), Cell(r.status, kind=r.status), str(r.error or "")]
        for r in bad.itertuples(index=False)
    ]
    return Table(["run", "task", "cell", "seed", "status", "error"], rows, caption="Runs that did not complete")
