"""Where a trial finds its Optuna study: the storage, and the study's attributes the sweeper leaves for the
trial's pruning callback (experiments/training/pruning.py) to read. The sweeper's side is
experiments/sweep/optuna_study.py; neither imports Lightning here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# a study's attributes that tell a trial's pruning callback what to report and how to decide
PRUNER_ATTR = "attnlab_pruner"
METRIC_ATTR = "attnlab_pruning_metric"


def open_storage(spec: str) -> Any:
    """An Optuna storage from ``storage_spec``: a database URL (``sqlite:///x.db``), else a journal file."""
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    if "://" in spec:
        # RDB storages retry on a locked SQLite file; heartbeat-free: a killed trial is found as RUNNING
        return optuna.storages.RDBStorage(spec, engine_kwargs={"connect_args": {"timeout": 60}})
    Path(spec).parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(spec))
