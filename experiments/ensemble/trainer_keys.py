"""What each ``trainer.*`` key does in an ensemble (``ensemble.seeds > 1``): one declared table.

The ensemble builds its own ``lightning.Trainer`` (experiments/ensemble/run.py ``_fit``), so a key of the
trainer config reaches it only through this table: ``PASSED`` keys go to that Trainer as they are,
``HANDLED`` keys are honoured by the ensemble itself with the meaning they have in a single run, and
``REFUSED`` keys stop the command before any work unless they hold a value that changes nothing. A key in
none of the three (a new ``+trainer.<key>``) is refused too: never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf

from experiments.config.errors import ConfigError

# to the ensemble's Trainer as they are (None: left at Lightning's default)
PASSED: tuple[str, ...] = (
    "accelerator",
    "precision",
    "max_steps",
    "max_epochs",
    "min_epochs",
    "min_steps",
    "max_time",
    "fast_dev_run",
    "limit_train_batches",
    "deterministic",
    "benchmark",
    "log_every_n_steps",
    "accumulate_grad_batches",
    "detect_anomaly",
    "profiler",
    "enable_model_summary",
)

# honoured by the ensemble itself, with the single run's meaning: where
HANDLED: dict[str, str] = {
    "_target_": "the ensemble builds its own lightning.Trainer",
    "val_check_interval": "each member validated at this interval (ensemble/validation.py MemberValidation)",
    "check_val_every_n_epoch": "read with val_check_interval by MemberValidation",
    "limit_val_batches": "each member's validation batches (MemberValidation)",
    "num_sanity_val_steps": "members validate only at the interval, as a single run with 0 sanity steps",
    "limit_test_batches": "each member's test runs on its own evaluation Trainer, built from its config",
    "gradient_clip_val": "each member clipped by its own gradient norm (ensemble/module.py)",
    "use_distributed_sampler": "each member's datamodule shards by rank itself, on the one device",
}

# refused unless at one of the values that change nothing: (those values, why)
REFUSED: dict[str, tuple[tuple[Any, ...], str]] = {
    "devices": ((1, "1", "auto"), "the batched members train on one device"),
    "num_nodes": ((1,), "the batched members train on one device"),
    "strategy": (("auto", "single_device"), "the batched members train on one device"),
    "gradient_clip_algorithm": (("norm",), "the batched step clips each member by its own norm only"),
    "overfit_batches": ((0, 0.0), "it would validate on the training batches, which the members do not"),
}

ADVICE = "not supported with ensemble.seeds > 1: train the seeds separately (ensemble.seeds=1, -m seed=...)"


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def check_trainer_keys(trainer: Mapping[str, Any]) -> None:
    """Raise ConfigError (one line naming the key and its value) for a key of the trainer's keywords
    (``trainer``) an ensemble cannot honour."""
    for key in trainer:
        key = str(key)
        value = _plain(trainer.get(key))
        if key in PASSED or key in HANDLED:
            continue
        neutral, why = REFUSED.get(key, ((None,), "the ensemble does not pass it to its Trainer"))
        if value is None or value in neutral:
            continue
        raise ConfigError(f"trainer.{key}={value} is {ADVICE} ({why})")


def passed_keywords(trainer: Mapping[str, Any]) -> dict[str, Any]:
    """The ``PASSED`` keys the trainer's keywords (``trainer``) set, as the Trainer takes them
    (``+trainer.max_time={hours: 1}``: a dict)."""
    out = {}
    for key in PASSED:
        value = trainer.get(key)
        if value is not None:
            out[key] = _plain(value)
    return out
