"""Learning curves: each run's CSV log (Lightning's CSVLogger, under the run folder) as one long frame."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from analysis.data.dtypes import categories
from analysis.data.runs import Runs

CURVE_COLUMNS = ["run_id", "task", "attention", "position", "seed", "step", "metric", "value"]


def _metrics_csv(run_dir: Path) -> Path | None:
    """Lightning's CSVLogger writes csv/metrics.csv, or csv/version_N/metrics.csv when versioned."""
    direct = run_dir / "csv" / "metrics.csv"
    if direct.is_file():
        return direct
    versioned = sorted((run_dir / "csv").glob("*/metrics.csv"))
    return versioned[-1] if versioned else None


def learning_curves(runs: Runs | pd.DataFrame) -> pd.DataFrame:
    """Long frame (run_id, task, attention, position, seed, step, metric, value, cell) from each run's CSV log."""
    frame = runs.runs if isinstance(runs, Runs) else runs
    parts = []
    for run in frame.itertuples(index=False):
        if not isinstance(run.run_dir, str) or not run.run_dir:
            continue
        csv = _metrics_csv(Path(run.run_dir))
        if csv is None:  # deleted, or never logged (logger=none): the report notes it (``without_curves``)
            continue
        try:
            log = pd.read_csv(csv)
        except (OSError, ValueError) as err:
            warnings.warn(f"{csv}: skipped, not a readable CSV log ({err})", stacklevel=2)
            continue
        if "step" not in log.columns:
            warnings.warn(f"{csv}: skipped, no 'step' column (columns: {list(log.columns)})", stacklevel=2)
            continue
        metric_columns = [c for c in log.columns if c not in ("step", "epoch")]
        # Lightning rows are sparse (each logs a few metrics): melt, then drop the empty cells.
        long = log.melt(id_vars=["step"], value_vars=metric_columns, var_name="metric", value_name="value")
        long["value"] = pd.to_numeric(long["value"], errors="coerce")
        long = long.dropna(subset=["value"])
        for key in ("run_id", "task", "attention", "position", "seed"):
            long[key] = getattr(run, key)
        long["cell"] = getattr(run, "cell", None)
        parts.append(long)
    if not parts:
        return pd.DataFrame(
            {c: pd.Series(dtype="float64" if c == "value" else "object") for c in [*CURVE_COLUMNS, "cell"]}
        )
    curves = pd.concat(parts, ignore_index=True)[[*CURVE_COLUMNS, "cell"]]
    # the variant names as categories, as in the runs frame (analysis.data.dtypes)
    return categories(curves.astype({"step": "int64", "seed": "int64", "value": "float64"}))


def without_curves(curves: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """The folders of the completed ``runs`` that have no learning curve in ``curves`` (no csv/metrics.csv)."""
    done = runs[runs["status"] == "completed"]
    drawn = set(curves["run_id"])
    return sorted(str(r.run_dir) for r in done.itertuples(index=False) if r.run_id not in drawn)
