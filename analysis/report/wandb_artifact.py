"""The built report as a W&B artifact: ``python -m analysis.report SWEEP --out DIR --wandb``.

After the report is written, its folder (report.md, report.html, figures/, the CSV files, latex/ ...)
is logged as one artifact of type ``report`` from a run with ``job_type="report"``, in the group of
the sweep (the runs' ``sweep`` field, as the training runs' group) and the project the runs logged to
(``logger.wandb.project``, else ``WANDB_PROJECT``, else ``attnlab``). The mode is ``WANDB_MODE``, offline when
unset, so no account is needed; the offline run sits in ``DIR/wandb/`` (or ``WANDB_DIR``) for ``wandb sync``.

Lineage: the report run declares the ``result-<run_id>`` artifact of each run it read as its input
(``run.use_artifact``), so W&B's lineage graph goes runs -> result artifacts -> report. W&B declares inputs
online only ("Cannot use artifact when in offline mode"): offline, the names go into the report artifact's
metadata (``inputs``), and logging the report online once the runs are synced draws the graph.

Everything is read from the report's own results.csv, so this runs after, and apart from, the build:
a failure here (wandb missing, a bad ``WANDB_MODE``) is a ``ReportError`` and leaves the report as written.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pandas as pd

from analysis.command.errors import ReportError

DEFAULT_PROJECT = "attnlab"  # the runs' default (experiments/config/wandb_settings.py), for runs that name none
PROJECT_COLUMN = "config.logger.wandb.project"
ENTITY_COLUMN = "config.logger.wandb.entity"
MODE_COLUMN = "config.logger.wandb.mode"
WANDB_COLUMNS = "config.logger.wandb."  # a run with any of these set had a W&B logger
RESULT_ARTIFACT = "result-{run_id}"  # the name each run logs its result.json under (experiments/record/wandb_run.py)
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
    return ",".join(sweeps) or "report", projects[0] if projects else os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT


def input_artifacts(out: Path) -> list[str]:
    """``result-<run_id>:latest`` of each run in the report in ``out`` that logged to W&B, in the table's order."""
    runs = pd.read_csv(out / "results.csv", low_memory=False)
    if "run_id" not in runs:
        return []
    logged = runs[[c for c in runs if c.startswith(WANDB_COLUMNS)]].notna().any(axis=1)
    if MODE_COLUMN in runs:  # a disabled W&B logged no artifact
        logged &= runs[MODE_COLUMN].ne("disabled")
    ids = runs.loc[logged, "run_id"].dropna().astype(str)
    return [RESULT_ARTIFACT.format(run_id=run_id) + ":latest" for run_id in dict.fromkeys(ids)]


def use_inputs(run, names: list[str]) -> list[str]:
    """Declare each artifact of ``names`` an input of ``run`` (online); returns those W&B could not find (a run
    still offline, never synced), which the lineage leaves out."""
    missing = []
    for name in names:
        try:
            run.use_artifact(name, type="result")
        except Exception:  # noqa: BLE001 - W&B raises several kinds for an artifact it does not have
            missing.append(name)
    return missing


def report_entity(out: Path) -> str | None:
    """The W&B entity the runs named (``logger.wandb.entity``), else ``WANDB_ENTITY``, else W&B's default."""
    runs = pd.read_csv(out / "results.csv", usecols=lambda c: c == ENTITY_COLUMN)
    named = sorted(str(e) for e in runs[ENTITY_COLUMN].dropna().unique()) if ENTITY_COLUMN in runs else []
    return named[0] if named else os.environ.get("WANDB_ENTITY") or None


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
    inputs = input_artifacts(out)
    artifact = wandb.Artifact(
        f"report-{re.sub(r'[^A-Za-z0-9_.-]+', '-', group)}",
        type="report",
        metadata={"sweeps": group.split(","), "runs": int(len(pd.read_csv(out / "results.csv"))), "inputs": inputs},
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
            entity=report_entity(out),
            group=group,
            job_type="report",
            name=os.environ.get("WANDB_NAME") or f"report {group}",
            mode=mode,  # type: ignore[arg-type]  # one of MODES, checked above
            dir=str(log_dir),
            reinit="finish_previous",
            settings=wandb.Settings(console="off", x_disable_stats=True, x_disable_machine_info=True),
        )
        if mode == "online":
            missing = use_inputs(run, inputs)
            if missing:
                print(
                    f"W&B lineage: {len(missing)} of {len(inputs)} runs' result artifacts not found "
                    f"(offline runs not synced yet: wandb sync <run>/wandb/offline-run-*), e.g. {missing[0]}",
                    file=sys.stderr,
                )
        run.log_artifact(artifact)
        where = run.url if mode == "online" else str(Path(run.dir).parent)
        run.finish()
    except Exception as err:  # noqa: BLE001 - W&B raises many kinds (network, quota, disk): one line for all
        raise ReportError(f"W&B could not log the report ({type(err).__name__}: {err})") from err
    return where or ""
