"""Lightning's Trainer keywords, callbacks and loggers as a composed config names them: checked before a run.

The run builds them from its spec (experiments/training/lightning_parts.py); checking a command line needs only
the names, read here without importing Lightning (``trainer_signature`` reads the Trainer's source).
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import typing
from typing import Any

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
    from experiments.config.trainer_signature import trainer_parameters

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


# attnlab's own callbacks, by the name ``own_callbacks`` lists them with (built by
# experiments.training.lightning_parts.OWN_CALLBACKS)
OWN_CALLBACK_NAMES = ("progress", "last_validation", "step_timer")


def check_callbacks(cfg: DictConfig) -> None:
    for name in cfg.get("own_callbacks") or []:
        if name not in OWN_CALLBACK_NAMES:
            near = difflib.get_close_matches(str(name), OWN_CALLBACK_NAMES, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigError(
                f"own_callbacks: {name!r} is not one of attnlab's callbacks {sorted(OWN_CALLBACK_NAMES)}{hint}"
            )
    for name, node in (cfg.get("callbacks") or {}).items():
        if node is not None and "_target_" not in node:
            raise ConfigError(
                f"callbacks.{name} has no _target_; a callback is built from its class, e.g. "
                f"callbacks.{name}._target_=lightning.pytorch.callbacks.EarlyStopping"
            )
    if cfg.eval.get("checkpoint", "last") == "best" and not monitored_checkpoints(cfg.get("callbacks")):
        raise ConfigError(
            "eval.checkpoint=best needs a checkpoint that monitors a metric; "
            "add callbacks=best_checkpoint (callbacks.best_checkpoint.monitor=val/loss)"
        )


def monitored_checkpoints(callbacks: Any) -> list[str]:
    """The callbacks (name -> node) that keep the best weights by a metric (ModelCheckpoint with ``monitor``)."""
    return [
        name
        for name, node in (callbacks or {}).items()
        if node is not None and str(node.get("_target_", "")).endswith("ModelCheckpoint") and node.get("monitor")
    ]


def logger_nodes(loggers: Any) -> dict[str, Any]:
    """The loggers switched on (name -> node) of the logger group's nodes."""
    return {name: node for name, node in (loggers or {}).items() if node is not None}


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
    for name, entry in logger_nodes(cfg.get("logger")).items():
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
