"""How a run shows in W&B: its name, job type, cell and factors in the config, its files as artifacts.

- display name: the cell's factors, ``local+alibi seed=0`` (``display_name``); the id stays the run folder's.
- ``job_type``: ``train`` for a single run, ``sweep_cell`` for a cell of a ``-m`` grid (Optuna
  trials included), ``study`` for a cell of a sweep that states claims (conf/experiment/study/);
  ``logger.wandb.job_type`` or ``WANDB_JOB_TYPE`` overrides it (experiments/config/wandb_settings.py).
- config ``attnlab/cell``: the cell id the report gives this configuration (attnlab.cell_identity: the
  config minus the seed and what does not change the computation), so runs group by cell in W&B;
  ``attnlab/factors``: the overrides that made this run, as {key: value}.
- artifacts: result.json always; checkpoints/last.ckpt when ``wandb_uploads.checkpoint=true``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterable

from experiments.config.spec import Spec

log = logging.getLogger("attnlab")


def job_type(states_claims: bool) -> str:
    """``train``, ``sweep_cell``, or ``study`` for a cell of a sweep whose config ``states_claims``."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    if not multirun:
        return "train"
    return "study" if states_claims else "sweep_cell"


def factors(overrides: list[str]) -> dict[str, str]:
    """``["attention=local", "seed=1"]`` -> {"attention": "local", "seed": "1"} (+/~ prefixes dropped)."""
    out = {}
    for line in overrides:
        key, sep, value = line.partition("=")
        if sep and not key.startswith("hydra"):
            out[key.lstrip("+~")] = value
    return out


# Factors left out of a display name: the variants (its head), the seed (its tail), presets that only gather other
# keys, and (in display_name) what does not change the computation or only its length, so a continued run keeps it.
NAMED_APART = ("attention", "position", "seed", "experiment", "hparams_search")
NAME_LENGTH = 128  # W&B shows a display name whole up to about this length


def display_name(spec: Spec, overrides: list[str]) -> str:
    """``local+alibi seed=0``, the run's other computation factors between: ``local+alibi optim.lr=0.01 seed=0``."""
    from attnlab.cell_identity import is_noise
    from experiments.config.budget import BUDGET_KEYS

    names = spec.names()
    head = f"{names['attention']}+{names['position']}"
    tail = f"seed={spec.run.seed}"
    middle = [
        f"{key}={value}"
        for key, value in factors(overrides).items()
        if key not in NAMED_APART and not is_noise(key) and key not in BUDGET_KEYS
    ]
    name = " ".join([head, *middle, tail])
    if len(name) <= NAME_LENGTH:
        return name
    return name[: NAME_LENGTH - len(tail) - 2] + "… " + tail


def cell(flat_config: dict[str, Any], result_fields: dict[str, Any]) -> str:
    """The report's cell id of this configuration (attnlab.cell_identity.identity on this run's config)."""
    from attnlab.cell_identity import cell_id, identity

    row = {f"config.{k}": v for k, v in flat_config.items()}
    row.update({k: result_fields.get(k) for k in ("task", "attention", "position")})
    return cell_id(identity(row))


def run_config(
    names: Mapping[str, str], flat_config: dict[str, Any], overrides: list[str], unused: Iterable[str] = ()
) -> dict[str, Any]:
    """The W&B config: the flattened config, the cell id and the factors. ``names``: the run's task, attention
    and position; ``unused``: the model's settings it did not build (``Transformer.unused_settings``), which the
    cell id, as the report's, leaves out."""
    from experiments.config.unused import record_unused

    computed: dict[str, Any] = {"config": flat_config}
    record_unused(computed, unused)  # nulls the unused keys in a copy of the config
    return {**flat_config, "attnlab/cell": cell(computed["config"], dict(names)), "attnlab/factors": factors(overrides)}


def log_artifacts(run: Any, result: dict[str, Any], run_dir: Path, *, checkpoint: bool) -> None:
    """result.json (and the final checkpoint when asked) as artifacts of the run."""
    import wandb

    files = [("result", "result", run_dir / "result.json")]
    if checkpoint:
        files.append(("model", "checkpoint", run_dir / "checkpoints" / "last.ckpt"))
    for kind, name, path in files:
        if not path.is_file():
            continue
        artifact = wandb.Artifact(
            f"{name}-{result['run_id']}", type=kind, metadata={"status": result["status"], "sweep": result.get("sweep")}
        )
        artifact.add_file(str(path))
        run.log_artifact(artifact)
