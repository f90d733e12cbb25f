"""The metric names a run logs, read off its task adapter: what a callback may monitor and a sweeper optimise.

Its own module, apart from config/checks.py, so that the sweepers (sweep/optuna_study.py,
hydra_plugins/attnlab_sweeper) ask it without importing the checks and, through them, Lightning's parts.
"""

from __future__ import annotations

from omegaconf import DictConfig

from experiments.config.errors import ConfigError


def logged_metrics(cfg: DictConfig, stage: str = "val") -> set[str]:
    """The metric names a run of ``cfg`` logs: during training and validation (``stage="val"``: what a
    callback can monitor) or into ``result.json``'s ``metrics`` (``stage="result"``: what a sweeper can
    optimise). Read off the task adapter the run would use, not a list kept by hand."""
    import torch

    from experiments.tasks import TASKS
    from experiments.training.task_adapters import adapter_for

    task = TASKS.get(cfg.task.name)  # the task's class: what it declares, without building its data
    adapter = adapter_for(task.kind, cfg.model.arch, pad_id=0, bos_id=1, sep_id=2)
    zero = torch.zeros(())
    val = {"val/loss", *adapter.epoch_metrics("val", zero, zero)}
    if stage == "val":
        return {"train/loss", *val}
    if stage != "result":
        raise ConfigError(f"stage={stage!r}: allowed values are val, result")
    test = {"test/loss", *adapter.epoch_metrics("test", zero, zero, zero)}
    bleu = {"test/bleu", "test/chrf"} if task.bleu_at_test else set()
    return val | test | bleu
