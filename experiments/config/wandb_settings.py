"""The settings a run's W&B run starts with: the user's ``logger.wandb`` keys, else W&B's environment variables,
else attnlab's own choice.

``wandb.init`` reads ``WANDB_PROJECT``, ``WANDB_MODE`` and the rest only for the arguments it is not given, and
attnlab gives it every one (W&B's docs: a wrapper that passes init arguments reads the variables itself). So the
order is decided here, once, key by key:

1. a value the user set in ``logger.wandb`` (command line or yaml): conf/logger/wandb.yaml leaves them null;
2. the environment variable W&B documents for it (``ENV``);
3. attnlab's: the run's display name, the sweep as group, the job type, the run's folder, offline, ``attnlab``.

The run id is never read from ``WANDB_RUN_ID``: it is the run folder's (one W&B run per folder, continued).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from experiments.config.errors import choice

# WandbLogger keyword -> the environment variable W&B reads for the wandb.init argument behind it
ENV = {
    "mode": "WANDB_MODE",
    "project": "WANDB_PROJECT",
    "entity": "WANDB_ENTITY",
    "save_dir": "WANDB_DIR",
    "name": "WANDB_NAME",
    "group": "WANDB_RUN_GROUP",
    "job_type": "WANDB_JOB_TYPE",
    "tags": "WANDB_TAGS",
    "notes": "WANDB_NOTES",
}
MODES = ("online", "offline", "disabled")
# offline: no account is needed, and `wandb sync` uploads later
DEFAULTS = {"mode": "offline", "project": "attnlab"}


def environment_value(key: str, environ: Mapping[str, str]) -> Any:
    """The value of ``key``'s variable in ``environ`` (None when unset or empty); WANDB_TAGS is comma-separated."""
    raw = (environ.get(ENV[key]) or "").strip()
    if not raw:
        return None
    if key == "tags":
        return [tag.strip() for tag in raw.split(",") if tag.strip()]
    return raw


def check_mode(chosen: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> None:
    """One line for a mode W&B would only warn about and then not log: ``logger.wandb.mode``, else WANDB_MODE."""
    environ = os.environ if environ is None else environ
    if chosen.get("mode") is not None:
        choice("logger.wandb.mode", chosen["mode"], MODES)
    elif environment_value("mode", environ) is not None:
        choice("WANDB_MODE", environment_value("mode", environ), MODES)


def resolve(
    chosen: Mapping[str, Any],
    own: Mapping[str, Any],
    own_tags: list[str],
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """WandbLogger's keywords for this run.

    ``chosen``: the ``logger.wandb`` node without ``_target_`` (null: not set); ``own``: attnlab's values for
    the keys of ``ENV`` (name, group, job_type, save_dir); ``own_tags``: the tags every run carries (task,
    attention, position), to which the user's tags (``logger.wandb.tags``, else WANDB_TAGS) are added.
    """
    environ = os.environ if environ is None else environ
    check_mode(chosen, environ)
    settings: dict[str, Any] = {**DEFAULTS, **{k: v for k, v in own.items() if v is not None}}
    for key in ENV:
        value = environment_value(key, environ)
        if value is not None:
            settings[key] = value
    settings.update({k: v for k, v in chosen.items() if v is not None})
    user_tags = chosen.get("tags") if chosen.get("tags") is not None else environment_value("tags", environ)
    settings["tags"] = list(dict.fromkeys([*own_tags, *(user_tags or [])]))  # W&B keeps a tag once
    if "dir" in settings:  # wandb.init's name for WandbLogger's save_dir
        settings["save_dir"] = settings.pop("dir")
    return settings
