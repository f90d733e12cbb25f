"""The metrics a run of a config logs, known before it runs: what a sweeper may optimise or prune on.

A minimal answer from the task's kind and its adapter's own epoch metrics (experiments/training/task_adapters.py),
so a name the task never logs is refused before the first trial instead of scoring every trial as failed.
"""

from __future__ import annotations

from typing import Any


def logged_metrics(cfg: Any) -> tuple[set[str], set[str]]:
    """(the metrics of result.json's ``metrics``, the metrics logged at each validation) for ``cfg``."""
    import torch

    from experiments.tasks import TASKS
    from experiments.training.task_adapters import adapter_for

    task: Any = TASKS.get(str(cfg.task.name))  # the datamodule's class; its kind is a class attribute
    kind = task.kind
    adapter = adapter_for(kind, str(cfg.model.arch), pad_id=0, bos_id=1, sep_id=3)
    one = torch.tensor(1.0)
    # the adapter names its metrics from any values; the values here are placeholders
    validation = {"val/loss", *adapter.epoch_metrics("val", one, one)}
    test = {"test/loss", *adapter.epoch_metrics("test", one, one, one)}
    if str(cfg.task.name) == "translation":
        test |= {"test/bleu", "test/chrf"}  # sacrebleu's scores of the greedy translations
    # train/loss is logged at every step, so a validation step sees it too
    return validation | test, validation | {"train/loss"}
