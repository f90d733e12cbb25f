"""The config an evaluation runs with: the checkpoint's own, changed only in what is evaluated.

An override may change the test data (new evaluation lengths, more test examples, another test file), what the
test measures (``eval.*``) and where it runs (``trainer.accelerator``, ``devices``, ``precision``, the batch
limits). Anything else (the model, the optimiser, the training data, the seed) is what the checkpoint *is*, and
an override of it is refused in one line naming the key: evaluating other settings is training another run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnlab.flatten import unflatten
from experiments.training.run_checkpoint import CheckpointError, RunCheckpoint

# task settings that choose the test (and validation) data, not what the model learnt from
TASK_EVAL_KEYS = (
    "eval_lengths",  # generated tasks: the problem sizes tested
    "eval_contexts",  # charlm: the contexts tested
    "test_size",
    "val_size",
    "val_windows",
    "test_src",  # translation: another test set
    "test_tgt",
    "batch_size",
    "num_workers",
)
OTHER_EVAL_KEYS = (
    "eval.generate",
    "eval.attention_stats",
    "eval.attention_stats_examples",
    "eval.attention_maps",
    "trainer.accelerator",
    "trainer.devices",
    "trainer.precision",
    "trainer.limit_test_batches",
    "trainer.limit_val_batches",
    "num_threads",
)


def allowed_keys(task: str, files: dict[str, str]) -> list[str]:
    """The keys an evaluation of a ``task`` run may override: those of ``TASK_EVAL_KEYS`` the task takes, and a
    task file the run read, which may be given anew when it has moved."""
    from experiments.tasks import TASKS

    accepted = TASKS.accepted_params(task) if task in TASKS else []
    return [*(f"task.{k}" for k in TASK_EVAL_KEYS if k in accepted), *(f"task.{k}" for k in files), *OTHER_EVAL_KEYS]


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """``key=value`` strings -> {key: value}, values read as Hydra reads them (``[8,16]`` is a list)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = {}
    for line in overrides:
        try:
            (override,) = OverridesParser.create().parse_overrides([line])
        except Exception as err:  # noqa: BLE001 - Hydra's grammar error spans lines; the user gets one
            raise CheckpointError(f"{line}: not a key=value override ({str(err).splitlines()[0]})") from None
        if override.is_sweep_override():
            raise CheckpointError(f"{line}: evaluate takes plain key=value overrides, one value each")
        parsed[override.get_key_element().lstrip("+~")] = override.value()
    return parsed


def evaluation_config(checkpoint: RunCheckpoint, overrides: dict[str, Any]) -> DictConfig:
    """The checkpoint's composed config with ``overrides`` applied; a key outside ``allowed_keys`` is refused.

    A task file the run read is taken from where the checkpoint recorded it (absolute), unless overridden."""
    from variants.discovery import import_plugins

    # the modules that registered the run's own variants and tasks (``plugins``), before any name is looked up
    import_plugins(list(checkpoint.config.get("plugins") or []))
    allowed = allowed_keys(str(checkpoint.config.get("task.name")), checkpoint.files)
    for key in overrides:
        if key not in allowed:
            leaf = key.removeprefix("task.")
            why = (
                f"task={checkpoint.config.get('task.name')} takes no {leaf}"
                if leaf in TASK_EVAL_KEYS
                else f"it would change what the checkpoint is (its model, training or data), not what is evaluated "
                f"(train another run to change {key})"
            )
            raise CheckpointError(f"{key}={overrides[key]}: {why}; evaluate takes {allowed}")
    try:
        cfg = OmegaConf.create(unflatten(checkpoint.config))
    except ValueError as err:
        raise CheckpointError(f"ckpt_path={checkpoint.path}: its recorded config cannot be read back ({err})") from None
    for key, path in checkpoint.files.items():
        if f"task.{key}" in overrides:
            continue
        if not Path(path).is_file():
            raise CheckpointError(
                f"task.{key}={path}: the file this checkpoint's run read is gone; give where it is now with "
                f"task.{key}=PATH"
            )
        cfg.task[key] = path
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value, merge=False, force_add=True)
    return cfg
