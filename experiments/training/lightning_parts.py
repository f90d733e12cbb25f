"""Lightning's Trainer, callbacks and loggers of a run, built from the run spec (``TrainerSpec``)
with ``hydra.utils.instantiate``; the names a config may give them are checked in experiments/config/lightning_keys.py.

``trainer`` holds the Trainer's own keywords and nothing else (any of them: ``trainer.accumulate_grad_batches=2``,
``+trainer.profiler=simple``), so each ``_target_`` node instantiates as it is; attnlab's own settings
(``checkpoint_every_n_steps``, ``progress_bar``, ``wandb_uploads``) are top-level keys beside them.
``callbacks`` and ``logger`` map a name to a ``_target_`` node, one file per option under
``conf/callbacks/`` and ``conf/logger/``. attnlab's own callbacks are named in ``own_callbacks``
(``OWN_CALLBACKS``): registry names, not ``_target_`` strings, so a rename cannot break a config.
What the run decides (its folder, the loggers and callbacks built here) is refused as a
``trainer.`` key, with the key to use instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from experiments.config.lightning_keys import (  # noqa: F401  (named here by tests and the preflight)
    CSV,
    MOVED,
    OWN_CALLBACK_NAMES,
    SET_BY_RUN,
    TENSORBOARD,
    WANDB,
    check_trainer_key,
    logger_nodes,
    trainer_keywords,
)
from experiments.config.spec import EvalSpec, TrainerSpec, thaw


# -- callbacks ------------------------------------------------------------------------------------
def _progress(trainer: TrainerSpec) -> Any:
    from experiments.training.callbacks import PlainProgress
    from experiments.training.progress import StepProgressBar

    every = max(trainer.log_every_n_steps, 1)
    return StepProgressBar(every=every) if progress_bar(trainer) else PlainProgress(every=every)


def _last_validation(trainer: TrainerSpec) -> Any:
    from experiments.training.callbacks import LastValidation

    return LastValidation()


def _step_timer(trainer: TrainerSpec) -> Any:
    from experiments.training.callbacks import StepTimer

    return StepTimer()


# attnlab's callbacks, by the name ``own_callbacks`` lists them with
OWN_CALLBACKS: dict[str, Callable[[TrainerSpec], Any]] = {
    # a rich bar in a terminal, plain log lines otherwise (progress_bar)
    "progress": _progress,
    # the metrics of the last validation: the final ones when it ran at the last step
    "last_validation": _last_validation,
    # the median time of a training step (result.json cost.step_ms)
    "step_timer": _step_timer,
}
if tuple(OWN_CALLBACKS) != OWN_CALLBACK_NAMES:  # the names the config checks accept are those built here
    raise RuntimeError(f"OWN_CALLBACKS {list(OWN_CALLBACKS)} differ from OWN_CALLBACK_NAMES {OWN_CALLBACK_NAMES}")


def progress_bar(trainer: TrainerSpec) -> bool:
    chosen = trainer.progress_bar
    return bool(chosen) if chosen is not None else sys.stdout.isatty()


def build_callbacks(trainer: TrainerSpec, run_dir: Path, trial: Mapping[str, Any]) -> list[Any]:
    """The Lightning callbacks by name, attnlab's own, and an Optuna ``trial``'s pruning callback."""
    from hydra.utils import instantiate

    callbacks = []
    for node in trainer.callbacks.values():
        if node is None:
            continue
        extra = {}
        if str(node.get("_target_", "")).endswith("ModelCheckpoint") and node.get("dirpath") is None:
            extra["dirpath"] = str(run_dir / "checkpoints")
        callbacks.append(instantiate(thaw(node), **extra))
    callbacks.extend(OWN_CALLBACKS[name](trainer) for name in trainer.own_callbacks)
    from experiments.training.pruning import pruning_callback

    pruning = pruning_callback(trial)  # a trial of an Optuna study: reports to it, stops when pruned
    if pruning is not None:
        callbacks.append(pruning)
    return callbacks


# -- loggers ---------------------------------------------------------------------------------------
def build_loggers(
    trainer: TrainerSpec, run_dir: Path, wandb_run: Callable[[dict[str, Any]], Any]
) -> tuple[list[Any], Any]:
    """(every logger, the W&B one or None). ``wandb_run(params)`` starts W&B with attnlab's run identity."""
    from hydra.utils import instantiate

    loggers, wandb = [], None
    for frozen in logger_nodes(trainer.loggers).values():
        node = thaw(frozen)
        if node["_target_"] == WANDB:
            if trainer.get("fast_dev_run"):
                continue  # a smoke test leaves no W&B run behind
            wandb = wandb_run({k: v for k, v in node.items() if k != "_target_"})
            if wandb is not None:
                loggers.append(wandb)
            continue
        extra = {"save_dir": str(run_dir)} if "save_dir" in node and node["save_dir"] is None else {}
        if node["_target_"] == CSV:
            # the same keywords; a resumed run keeps its rows before the checkpoint (experiments/record/loggers.py)
            extra["_target_"] = "experiments.record.loggers.HistoryCSVLogger"
        if node["_target_"] == TENSORBOARD:
            # the same keywords; one event file, hp_metric the objective (experiments/record/tensorboard_logger.py)
            extra["_target_"] = "experiments.record.tensorboard_logger.RunTensorBoardLogger"
        loggers.append(instantiate(node, **extra))
    return loggers, wandb


def wandb_upload(trainer: TrainerSpec, what: str) -> bool:
    """Whether the run uploads ``what`` (``wandb_uploads.<what>``) to W&B: never without a W&B logger."""
    if trainer.loggers.get("wandb") is None:
        return False
    return bool(trainer.wandb_uploads[what])


# -- the Trainer ----------------------------------------------------------------------------------
def build_trainer(
    trainer: TrainerSpec, run_dir: Path, *, loggers: list[Any], callbacks: list[Any], plugins: list[Any]
) -> Any:
    from hydra.utils import instantiate
    from lightning.pytorch.callbacks import ModelCheckpoint

    # the node as it is, with what only the run knows added as keywords
    node = thaw(trainer.node)
    runtime: dict[str, Any] = {}
    interval, max_steps = node.get("val_check_interval"), node.get("max_steps", -1)
    if isinstance(interval, int) and isinstance(max_steps, int) and max_steps > 0:
        runtime["val_check_interval"] = max(1, min(interval, max_steps))  # a short run still validates
    return instantiate(
        node,
        # plain dicts and lists, as the Trainer's keywords take them (+trainer.max_time={hours:1})
        _convert_="all",
        **runtime,
        logger=loggers or False,
        callbacks=callbacks,
        plugins=plugins,
        default_root_dir=str(run_dir),
        enable_progress_bar=progress_bar(trainer) and "progress" in trainer.own_callbacks,
        enable_checkpointing=any(isinstance(c, ModelCheckpoint) for c in callbacks),
    )


def tested_checkpoint(evaluation: EvalSpec, trainer: Any) -> str | None:
    """The checkpoint whose weights are tested: None for the final weights (eval.checkpoint=last)."""
    if evaluation.checkpoint != "best":
        return None
    from lightning.pytorch.callbacks import ModelCheckpoint

    for callback in trainer.callbacks:
        if isinstance(callback, ModelCheckpoint) and callback.monitor and callback.best_model_path:
            return callback.best_model_path
    return None  # no validation ran: the final weights are all there is
