"""The built report as a W&B artifact: ``python -m analysis.report SWEEP --out DIR --wandb``.

After the report is written, its folder (report.md, report.html, figures/, the CSV files, latex/ ...)
is logged as one artifact of type ``report`` from a run with ``job_type="report"``, in the group of
the sweep (the runs' ``sweep`` field, as the training runs' group) and the project the runs logged to
(``logger.wandb.project``, default ``attnlab``). The mode is ``WANDB_MODE``, offline when unset, so no
account is needed; the offline run sits in ``DIR/wandb/`` (or ``WANDB_DIR``) for ``wandb sync``.

Everything is read from the report's own results.csv, so this runs after, and apart from, the build:
a failure here (wandb missing, a bad ``WANDB_MODE``) is a ``ReportError`` and leaves the report as written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from analysis.command.errors import ReportError

DEFAULT_PROJECT = "attnlab"  # conf/logger/wandb.yaml's default, for runs whose config does not name one
PROJECT_COLUMN = "config.logger.wandb.project"
MODES = ("offline", "online", "disabled")
LOG_DIR = "wandb"  # the folder W&B makes in the report folder for the offline run, never part of the artifact


def report_run_fields(out: Path) -> tuple[str, str]:
    """(group, project) of the report in ``out``: the sweeps of its runs and the one project they logged to."""
    table = out / "results.csv"
    if not table.is_file():
        raise ReportError(f"{table} not found; --wandb logs a report that analysis.report has written")
    runs = pd.read_csv(table, usecols=lambda c: c in ("sweep", PROJECT_COLUMN))
    sweeps = sorted(str(s) for s in runs["sweep"].dropna().unique()) if "sweep" in runs else []
    projects = sorted(str(p) for p in runs[PROJECT_COLUMN].dropna().unique()) if PROJECT_COLUMN in runs else []
    if len(projects) > 1:
        raise ReportError(
            f"the runs logged to several W&B projects ({', '.join(projects)}); "
            f"report them one project at a time (--where logger.wandb.project=NAME)"
        )
    return ",".join(sweeps) or "report", projects[0] if projects else DEFAULT_PROJECT


def log_report(out: str | Path) -> str:
    """Log the report folder ``out`` as a W&B artifact; returns the run's folder (offline) or URL (online)."""
    out = Path(out)
    mode = os.environ.get("WANDB_MODE") or "offline"
    if mode not in MODES:
        raise ReportError(f"WANDB_MODE={mode!r} is not a W&B mode; use one of {', '.join(MODES)}")
    group, project = report_run_fields(out)
    try:
        import wandb  # only here: the report itself never needs W&B
    except ImportError as err:
        raise ReportError(f"--wandb needs the wandb package ({err}); pip install wandb") from err

    # Artifact names take letters, digits, '-', '_' and '.': a sweep name like 'a/b' becomes 'a-b'.
    artifact = wandb.Artifact(
        f"report-{re.sub(r'[^A-Za-z0-9_.-]+', '-', group)}",
        type="report",
        metadata={"sweeps": group.split(","), "runs": int(len(pd.read_csv(out / "results.csv")))},
    )
    for path in sorted(out.rglob("*")):
        relative = path.relative_to(out)
        if path.is_file() and relative.parts[0] != LOG_DIR:
            artifact.add_file(str(path), name=relative.as_posix())
    log_dir = Path(os.environ.get("WANDB_DIR") or out)  # W&B writes into its wandb/ below: out/wandb/offline-run-*
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        run = wandb.init(
            project=project,
            group=group,
            job_type="report",
            mode=mode,
            dir=str(log_dir),
            reinit="finish_previous",
            settings=wandb.Settings(console="off", x_disable_stats=True, x_disable_machine_info=True),
        )
        run.log_artifact(artifact)
        where = run.url if mode == "online" else str(Path(run.dir).parent)
        run.finish()
    except Exception as err:  # noqa: BLE001 - W&B raises many kinds (network, quota, disk): one line for all
        raise ReportError(f"W&B could not log the report ({type(err).__name__}: {err})") from err
    return where or ""
