"""Lightning's Trainer, callbacks and loggers of a run, built from config with ``hydra.utils.instantiate``.

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

import difflib
import importlib.util
import inspect
import sys
import typing
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from experiments.config.errors import ConfigError

# Trainer keywords the run sets itself, and where the user says what they want instead
SET_BY_RUN = {
    "logger": "the logger group: logger=csv, logger=[csv,tensorboard], logger=none",
    "callbacks": "the callbacks group: callbacks=early_stopping, callbacks=[lr_monitor,best_checkpoint]",
    "plugins": "attnlab's checkpoint and cluster plugins",
    "default_root_dir": "the run's folder: hydra.run.dir=...",
    "enable_progress_bar": "progress_bar",
    "enable_checkpointing": "the callbacks group (callbacks=none: no checkpoints)",
}
TENSORBOARD = "lightning.pytorch.loggers.TensorBoardLogger"
CSV = "lightning.pytorch.loggers.CSVLogger"
WANDB = "lightning.pytorch.loggers.WandbLogger"


def trainer_keywords() -> dict[str, Any]:
    """lightning.Trainer's keyword parameters: name -> annotation, read from Lightning's source, so that
    checking a ``trainer.`` key does not import Lightning (experiments/training/trainer_signature.py)."""
    from experiments.training.trainer_signature import trainer_parameters

    return trainer_parameters()


def check_trainer_key(key: str, value: Any = None, *, check_value: bool = True) -> None:
    """One line when ``trainer.<key>`` is not a keyword the Trainer takes here, or ``value`` not of its type."""
    if key == "_target_":
        return
    if key in SET_BY_RUN:
        raise ConfigError(f"trainer.{key} is set by the run; use {SET_BY_RUN[key]}")
    keywords = trainer_keywords()
    if key not in keywords:
        choices = sorted(set(keywords) - set(SET_BY_RUN))
        near = difflib.get_close_matches(key, choices, n=1)
        hint = f"did you mean 'trainer.{near[0]}'?" if near else f"the keywords: {choices}"
        raise ConfigError(f"trainer.{key} is not a keyword of lightning.Trainer; {hint}")
    annotation = keywords[key]
    if check_value and annotation is not inspect.Parameter.empty and not _accepts(annotation, value):
        raise ConfigError(f"trainer.{key}={value!r} is not allowed; lightning.Trainer takes {_type_name(annotation)}")


def check_trainer(trainer: DictConfig) -> None:
    """Every key of the composed ``trainer`` node (a preset's typo included) and the type of its value."""
    node = OmegaConf.to_container(trainer, resolve=True)
    for key, value in node.items():
        check_trainer_key(key, value)


def _accepts(annotation: Any, value: Any) -> bool:
    """Whether ``value`` fits ``annotation``; a type this check cannot judge (a class of Lightning's) accepts."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        return any(_accepts(a, value) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin in (list, dict):
        return isinstance(value, origin)
    if isinstance(value, dict) and "_target_" in value:
        return True  # an object built from its class (+trainer.profiler={_target_:...}); instantiate checks it
    return value is not None and not isinstance(value, (bool, int, float, str, list, dict))


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("NoneType", "None")


# -- callbacks ------------------------------------------------------------------------------------
def _progress(cfg: DictConfig) -> Any:
    from experiments.training.callbacks import PlainProgress
    from experiments.training.progress import StepProgressBar

    every = max(int(cfg.trainer.log_every_n_steps or 1), 1)
    return StepProgressBar(every=every) if progress_bar(cfg) else PlainProgress(every=every)


def _last_validation(cfg: DictConfig) -> Any:
    from experiments.training.callbacks import LastValidation

    return LastValidation()


def _step_timer(cfg: DictConfig) -> Any:
    from experiments.training.callbacks import StepTimer

    return StepTimer()


# attnlab's callbacks, by the name ``own_callbacks`` lists them with
OWN_CALLBACKS: dict[str, Callable[[DictConfig], Any]] = {
    # a rich bar in a terminal, plain log lines otherwise (progress_bar)
    "progress": _progress,
    # the metrics of the last validation: the final ones when it ran at the last step
    "last_validation": _last_validation,
    # the median time of a training step (result.json cost.step_ms)
    "step_timer": _step_timer,
}


def progress_bar(cfg: DictConfig) -> bool:
    chosen = cfg.get("progress_bar")
    return bool(chosen) if chosen is not None else sys.stdout.isatty()


def check_callbacks(cfg: DictConfig) -> None:
    for name in cfg.get("own_callbacks") or []:
        if name not in OWN_CALLBACKS:
            near = difflib.get_close_matches(str(name), list(OWN_CALLBACKS), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigError(
                f"own_callbacks: {name!r} is not one of attnlab's callbacks {sorted(OWN_CALLBACKS)}{hint}"
            )
    for name, node in (cfg.get("callbacks") or {}).items():
        if node is not None and "_target_" not in node:
            raise ConfigError(
                f"callbacks.{name} has no _target_; a callback is built from its class, e.g. "
                f"callbacks.{name}._target_=lightning.pytorch.callbacks.EarlyStopping"
            )
    if cfg.eval.get("checkpoint", "last") == "best" and not monitored_checkpoints(cfg):
        raise ConfigError(
            "eval.checkpoint=best needs a checkpoint that monitors a metric; "
            "add callbacks=best_checkpoint (callbacks.best_checkpoint.monitor=val/loss)"
        )


def monitored_checkpoints(cfg: DictConfig) -> list[str]:
    """The callbacks that keep the best weights by a metric (ModelCheckpoint with ``monitor``)."""
    return [
        name
        for name, node in (cfg.get("callbacks") or {}).items()
        if node is not None and str(node.get("_target_", "")).endswith("ModelCheckpoint") and node.get("monitor")
    ]


def build_callbacks(cfg: DictConfig, run_dir: Path) -> list[Any]:
    from hydra.utils import instantiate

    callbacks = []
    for node in (cfg.get("callbacks") or {}).values():
        if node is None:
            continue
        extra = {}
        if str(node.get("_target_", "")).endswith("ModelCheckpoint") and node.get("dirpath") is None:
            extra["dirpath"] = str(run_dir / "checkpoints")
        callbacks.append(instantiate(node, **extra))
    callbacks.extend(OWN_CALLBACKS[name](cfg) for name in cfg.get("own_callbacks") or [])
    from experiments.sweep.pruning import pruning_callback

    pruning = pruning_callback(cfg)  # a trial of an Optuna study: reports to it, stops when pruned
    if pruning is not None:
        callbacks.append(pruning)
    return callbacks


# -- loggers --------------------------------------------------------------------------------------
def logger_nodes(cfg: DictConfig) -> dict[str, DictConfig]:
    return {name: node for name, node in (cfg.get("logger") or {}).items() if node is not None}


def _now_beside(old: str, new: str) -> str:
    beside = "Trainer" if old.startswith("trainer.") else "logger"
    return f"{old} is now {new} (attnlab's own key, beside the {beside}'s)"


# keys that have moved, and where to
MOVED = {
    "trainer.checkpoint_every_n_steps": _now_beside("trainer.checkpoint_every_n_steps", "checkpoint_every_n_steps"),
    "trainer.progress_bar": _now_beside("trainer.progress_bar", "progress_bar"),
    "logger.wandb.log_attention_maps": _now_beside("logger.wandb.log_attention_maps", "wandb_uploads.attention_maps"),
    "logger.wandb.log_checkpoint": _now_beside("logger.wandb.log_checkpoint", "wandb_uploads.checkpoint"),
    "logger.log_attention_maps": "logger.log_attention_maps has moved to wandb_uploads.attention_maps "
    "(the maps are always saved to attention_maps.npz)",
    "logger.wandb.enabled": "logger.wandb.enabled has gone: choose the loggers with the logger group, "
    "e.g. logger=csv (no W&B) or logger=none",
}


def check_loggers(cfg: DictConfig) -> None:
    for key, message in MOVED.items():
        if OmegaConf.select(cfg, key) is not None:
            raise ConfigError(message)
    for name, entry in logger_nodes(cfg).items():
        if "_target_" not in entry:
            raise ConfigError(
                f"logger.{name} has no _target_; a logger is built from its class, e.g. "
                f"logger.{name}._target_=lightning.pytorch.loggers.CSVLogger"
            )
        if entry._target_ == TENSORBOARD and not any(
            importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")
        ):
            from experiments.config.extras import missing_extra

            raise missing_extra("tensorboard", f"logger.{name} (TensorBoard)")


def build_loggers(cfg: DictConfig, run_dir: Path, wandb_run: Callable[[dict[str, Any]], Any]) -> tuple[list[Any], Any]:
    """(every logger, the W&B one or None). ``wandb_run(params)`` starts W&B with attnlab's run identity."""
    from hydra.utils import instantiate

    loggers, wandb = [], None
    for node in logger_nodes(cfg).values():
        if node._target_ == WANDB:
            if cfg.trainer.get("fast_dev_run"):
                continue  # a smoke test leaves no W&B run behind
            params = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if k != "_target_"}
            wandb = wandb_run(params)
            if wandb is not None:
                loggers.append(wandb)
            continue
        extra = {"save_dir": str(run_dir)} if "save_dir" in node and node.save_dir is None else {}
        if node._target_ == CSV:
            # the same keywords; a resumed run keeps its rows before the checkpoint (experiments/record/loggers.py)
            extra["_target_"] = "experiments.record.loggers.HistoryCSVLogger"
        if node._target_ == TENSORBOARD:
            # the same keywords; one event file, hp_metric the objective (experiments/record/tensorboard_logger.py)
            extra["_target_"] = "experiments.record.tensorboard_logger.RunTensorBoardLogger"
        loggers.append(instantiate(node, **extra))
    return loggers, wandb


def wandb_upload(cfg: DictConfig, what: str) -> bool:
    """Whether the run uploads ``what`` (``wandb_uploads.<what>``) to W&B: never without a W&B logger."""
    if (cfg.get("logger") or {}).get("wandb") is None:
        return False
    return bool(cfg.wandb_uploads[what])


# -- the Trainer ----------------------------------------------------------------------------------
def build_trainer(
    cfg: DictConfig, run_dir: Path, *, loggers: list[Any], callbacks: list[Any], plugins: list[Any]
) -> Any:
    from hydra.utils import instantiate
    from lightning.pytorch.callbacks import ModelCheckpoint

    from experiments.sweep import gpu_share

    # the node as it is, with what only the run knows added as keywords
    node = cfg.trainer
    runtime: dict[str, Any] = {}
    if gpu_share.trainer_devices(None) is not None:
        runtime["devices"] = gpu_share.trainer_devices(None)  # jobs_per_gpu: the GPU this job holds
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
        enable_progress_bar=progress_bar(cfg) and "progress" in (cfg.get("own_callbacks") or []),
        enable_checkpointing=any(isinstance(c, ModelCheckpoint) for c in callbacks),
    )


def tested_checkpoint(cfg: DictConfig, trainer: Any) -> str | None:
    """The checkpoint whose weights are tested: None for the final weights (eval.checkpoint=last)."""
    if cfg.eval.get("checkpoint", "last") != "best":
        return None
    from lightning.pytorch.callbacks import ModelCheckpoint

    for callback in trainer.callbacks:
        if isinstance(callback, ModelCheckpoint) and callback.monitor and callback.best_model_path:
            return callback.best_model_path
    return None  # no validation ran: the final weights are all there is
