"""Optuna's own plots of a study, as static images for the HTML report, and the optuna-dashboard command that
opens the study live.

Drawn with ``optuna.visualization.matplotlib`` (plotly is not a dependency): the optimization history, the
hyperparameter importances and the parallel coordinates of each study. Importances are PED-ANOVA's
(``optuna.importance.PedAnovaImportanceEvaluator``): Optuna's default evaluator, fANOVA, needs scikit-learn,
which attnlab does not install; PED-ANOVA needs nothing beyond Optuna.

A study is read from its storage without writing to it: the sweep's journal file (``optuna.journal``, what
the sweepers write by default) or a database URL. A plot Optuna cannot draw (no completed trial, one
parameter value) is left out with the reason, never drawn empty.
"""

from __future__ import annotations

import shlex
import warnings
from pathlib import Path
from typing import Any

from analysis.report.figures.figure_canvas import save

JOURNAL = "optuna.journal"  # the sweepers' study file when no storage is given (experiments/sweep/optuna_study.py)
PLOTS = (
    ("history", "optimization history: each trial's objective and the best so far"),
    ("importance", "hyperparameter importance (PED-ANOVA)"),
    ("parallel", "parallel coordinates: each trial's parameters, coloured by its objective"),
)


def storage_of(sweep_dir: Path, recorded: str | None) -> str:
    """The study storage a sweep recorded, else the sweep folder's journal file."""
    return str(recorded) if recorded else str(Path(sweep_dir).resolve() / JOURNAL)


def dashboard_command(storage: str) -> str:
    """The command that opens the storage's studies in optuna-dashboard (``pip install optuna-dashboard``):
    it takes a database URL or a journal file's path as its one argument."""
    return f"optuna-dashboard {shlex.quote(storage)}"


def load_study(storage: str, name: str) -> Any:
    """The study ``name`` in ``storage`` (a URL, or a journal file that must exist: opening one creates it)."""
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    if "://" in storage:
        return optuna.load_study(study_name=name, storage=storage)
    if not Path(storage).is_file():
        raise FileNotFoundError(f"{storage}: no study journal")
    return optuna.load_study(study_name=name, storage=JournalStorage(JournalFileBackend(storage)))


def _draw(kind: str, study: Any) -> Any:
    """One of Optuna's matplotlib plots of ``study``; its Axes."""
    import optuna.visualization.matplotlib as plots
    from optuna.importance import PedAnovaImportanceEvaluator

    if kind == "history":
        return plots.plot_optimization_history(study)
    if kind == "importance":
        return plots.plot_param_importances(study, evaluator=PedAnovaImportanceEvaluator())
    return plots.plot_parallel_coordinate(study)


def study_plots(study: Any, out: Path, stem: str) -> list[tuple[Path, str]]:
    """(PNG path, what it shows) of each plot Optuna draws for ``study``, written as ``out/<stem>-<kind>.png``
    (with PDF and SVG beside it, as every report figure). None before two trials completed: there is nothing to
    compare yet; a plot Optuna refuses is skipped with a warning naming it."""
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: Optuna draws with it
    import matplotlib.pyplot as plt
    import optuna
    from optuna.trial import TrialState

    if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) < 2:
        return []
    drawn = []
    for kind, what in PLOTS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # the matplotlib backend's
            try:
                ax = _draw(kind, study)
            except (ValueError, RuntimeError) as err:
                warnings.warn(f"study {study.study_name}: no {kind} plot ({err})", stacklevel=2)
                continue
        fig = ax.figure
        fig.tight_layout()  # Optuna's figures clip long parameter names at their edges
        try:
            drawn.append((save(fig, out / f"{stem}-{kind}.png"), what))
        finally:
            plt.close(fig)
    return drawn
