"""The baseline of the comparisons, given as factor values.

``--baseline multihead+sinusoidal`` is ``attention=multihead, position=sinusoidal``;
``--baseline position.max_distance=16`` or ``attention=local,attention.window=4``
names any factor. In each table the baseline is the one cell whose values match;
a baseline that matches several cells of one table is ambiguous and says which
factor values to add, rather than picking one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analysis.command.errors import ReportError
from analysis.report.plan.layout import Grid, match, parse_assignments

DEFAULT_BASELINE = "multihead+sinusoidal"
FORMS = "ATTENTION+POSITION (e.g. multihead+sinusoidal) or KEY=VALUE[,KEY=VALUE] (e.g. attention.window=8)"


@dataclass(frozen=True)
class Baseline:
    values: dict[str, str] = field(hash=False)
    name: str


def parse_baseline(text: str) -> dict[str, str]:
    """``A+P`` or ``key=value,key=value`` -> {key: value}; anything else is a one-line ReportError."""
    if "=" in text:
        return parse_assignments([t for t in text.split(",") if t.strip()], f"--baseline={text!r}:")
    parts = text.split("+")
    if len(parts) != 2 or not all(parts):
        raise ReportError(f"--baseline={text!r} must be {FORMS}")
    return {"attention": parts[0], "position": parts[1]}


def _variants_found(runs: pd.DataFrame) -> str:
    return ", ".join(sorted({f"{a}+{p}" for a, p in zip(runs["attention"], runs["position"])}))


def resolve_baseline(runs: pd.DataFrame, text: str | None) -> tuple[Baseline, bool]:
    """The baseline and whether any run matches it; one asked for by name must exist."""
    spec = text or DEFAULT_BASELINE
    values = parse_baseline(spec)
    baseline = Baseline(values, spec if "=" not in spec else ", ".join(f"{k}={v}" for k, v in values.items()))
    present = bool(match(runs, values, "--baseline").any())
    if text is not None and not present:
        wanted = ", ".join(f"{k}={v!r}" for k, v in values.items())
        raise ReportError(
            f"--baseline={text!r}: no run has {wanted}; cells found: {_variants_found(runs)}; "
            f"factor values: {', '.join(sorted(set(runs['cell_label'])))}"
        )
    return baseline, present


def baseline_cell(runs: pd.DataFrame, grid: Grid, baseline: Baseline) -> tuple[str | None, str | None]:
    """(cell id, None) of the baseline in one table, or (None, why there is none)."""
    here = runs[runs["cell"].isin(set(grid.cells["cell"]))]
    hits = sorted(set(here.loc[match(here, baseline.values, "--baseline"), "cell"]))
    if len(hits) == 1:
        return hits[0], None
    where = f" on {grid.task}" + (f" ({grid.title})" if grid.where else "")
    if not hits:
        return None, f"The baseline {baseline.name} is not in this table{where}: no comparisons."
    labels = sorted(set(here.loc[here["cell"].isin(hits), "cell_label"]))
    return None, (
        f"The baseline {baseline.name} matches {len(hits)} cells{where} ({'; '.join(labels)}); "
        "name the other factor values too, e.g. --baseline KEY=VALUE,KEY=VALUE: no comparisons."
    )
