"""The identity of a run's cell: its resolved config minus the seed and the keys that do not change what it
computes. The report groups runs by it, and a training run names its W&B cell with it, so both read one definition."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Mapping

CONFIG_PREFIX = "config."
SEED_KEY = "seed"
# Keys (whole dotted components: "name" is not "name_of_x") that never change what a run computes.
NOISE_PREFIXES = (
    "logger",
    "trainer.progress_bar",  # the spelling of results written before progress_bar moved beside the Trainer's
    "trainer.log_every_n_steps",
    "trainer.checkpoint_every_n_steps",  # ditto checkpoint_every_n_steps
    "progress_bar",
    "checkpoint_every_n_steps",
    "wandb_uploads",  # what went to W&B beside the metrics
    "resume",
    "ckpt_path",
    "name",
    "fail_at_step",
    "num_threads",
    "objective",
    "eval.attention_maps",
    "hydra",
    "claims",  # what the analysis tests (analysis/claims/), not what a run computes
    "ensemble",  # how the seeds were trained (alone or batched): a member is its seed's run
    "jobs_per_gpu",  # how many cells shared a GPU: where, not what, a run computed
    "trial",  # which study trial the run reports to: where its metrics go, not what it computes
)
# Noise for the computation, yet a cell of its own: a tuned comparison's tuning trial, its best
# configuration on fresh seeds and the defaults (hparams_search=tuned) can share every setting, and the
# trial chosen for its validation score would bias the fresh seeds' mean if it were pooled with them.
ROLE_KEY = "trial.role"
# The result's own columns for the registry groups; config.<group>.name is the same value.
GROUP_COLUMNS = ("task", "attention", "position")
ID_LENGTH = 12


def is_noise(key: str) -> bool:
    """True for a flattened config key (without ``config.``) that does not change the computation."""
    return any(key == p or key.startswith(p + ".") for p in NOISE_PREFIXES)


# pandas' missing markers in typed columns (<NA> in an Int64 setting, NaT in a time), named without importing pandas
PANDAS_MISSING = ("NAType", "NaTType")


def is_missing(value: Any) -> bool:
    if value is None or type(value).__name__ in PANDAS_MISSING:
        return True
    try:
        return bool(isinstance(value, float) and math.isnan(value))
    except TypeError:
        return False


def normalise(value: Any) -> Any:
    """A hashable, JSON-stable value: lists as JSON text, integral floats as ints (4.0 from a NaN column is 4)."""
    if is_missing(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        value = value.item()  # numpy scalars
    if isinstance(value, bool) or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def factor_name(config_key: str) -> str:
    """``attention.name`` -> ``attention``; any other key keeps its dotted path."""
    if config_key.endswith(".name") and len(config_key) > len(".name"):
        return config_key[: -len(".name")]
    return config_key


def identity(row: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration of one run that defines its cell: config minus seed and noise, registry groups by name.

    ``row`` is a runs-frame row (``config.<key>`` columns and the result's task,
    attention and position). Missing values are left out, so a key that is absent
    and one that is null are the same configuration.
    """
    config: dict[str, Any] = {}
    for column, value in row.items():
        if not isinstance(column, str) or not column.startswith(CONFIG_PREFIX):
            continue
        key = column[len(CONFIG_PREFIX) :]
        if key == SEED_KEY or (is_noise(key) and key != ROLE_KEY):
            continue
        value = normalise(value)
        if value is not None:
            config[factor_name(key)] = value
    for group in GROUP_COLUMNS:  # always known, also for results whose config lacks the group's name
        if not is_missing(row.get(group)):
            config[group] = str(row[group])
    return config


def cell_id(config: Mapping[str, Any]) -> str:
    blob = json.dumps(dict(config), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:ID_LENGTH]
