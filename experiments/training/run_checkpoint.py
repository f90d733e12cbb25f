"""A run's checkpoint read back as the run that wrote it: its composed config, its data, its weights, its step.

Every checkpoint a run saves carries, under ``folder.RECORD_KEY`` and as plain data, the composed config
(flattened, as result.json spells it) and, from ``evaluation_record``, the run's id and the data it read: the
absolute path of each task file it named, so a path given relative to where the run started is found from
anywhere. Generated data needs nothing more: it is regenerated from the task's settings and the seed. The model
is rebuilt from the checkpoint's ``hyper_parameters`` (``TransformerModule.save_hyperparameters``), so what is
evaluated is what trained. ``python -m experiments.evaluate`` reads a checkpoint only through ``read_run_checkpoint``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from experiments.config.errors import ConfigError
from experiments.config.spec import TaskSpec
from experiments.training.folder import CHECKPOINT, RECORD_KEY, RESULT, read_checkpoint


class CheckpointError(ConfigError):
    """A checkpoint (or a run folder) that evaluation cannot rebuild a run from; the message names the path."""


@dataclass(frozen=True)
class RunCheckpoint:
    """What evaluation needs of one checkpoint, read once."""

    path: Path  # the checkpoint file, absolute
    step: int  # the global step it was saved at
    sha256: str  # of the file: which weights an evaluation measured
    config: dict[str, Any]  # the run's composed config, flattened (result.json's spelling)
    config_hash: str | None  # the run's config_hash, as its result.json has it
    run_id: str | None  # the run's id (None: a checkpoint written before checkpoints recorded it)
    files: dict[str, str]  # task key -> the absolute path of the file the run read ({} for generated data)
    hparams: dict[str, Any]  # TransformerModule's keywords: the model spec, the task kind, ...
    state_dict: dict[str, Any]

    @property
    def run_dir(self) -> Path:
        """The run folder the checkpoint belongs to (``<run>/checkpoints/<file>``), else the file's folder."""
        return self.path.parent.parent if self.path.parent.name == CHECKPOINT.parent.name else self.path.parent


def evaluation_record(task: TaskSpec, run_id: str) -> dict[str, Any]:
    """What a checkpoint records beside its config so that it can be evaluated alone: the run's id and its data,
    ``{"files": {key: path}}``: every task setting that names an existing file, made absolute (the task reads
    the same settings again; this is only where the files lie)."""
    files = {}
    for key, value in {"name": task.name, **task.params}.items():
        if isinstance(value, str) and value and Path(value).expanduser().is_file():
            files[str(key)] = str(Path(value).expanduser().resolve())
    return {"run_id": run_id, "data": {"files": files}}


def tested_checkpoint(run_dir: Path) -> Path:
    """The checkpoint a run folder's test read: ``tested_checkpoint`` in its result.json (eval.checkpoint=best),
    else ``checkpoints/last.ckpt``."""
    from experiments.record.result import read_result

    tested = (read_result(run_dir / RESULT) or {}).get("tested_checkpoint")
    return run_dir / (tested or CHECKPOINT)


def checkpoint_file(given: str) -> Path:
    """The checkpoint ``ckpt_path=given`` names: a file, or a run folder's (``tested_checkpoint``)."""
    path = Path(given).expanduser()
    if path.is_dir():
        found = tested_checkpoint(path)
        if not found.is_file():
            raise CheckpointError(
                f"ckpt_path={given}: the folder has no {found.relative_to(path)} (a run trained with callbacks=none "
                "keeps none, and a run still before its first checkpoint has none yet); give a .ckpt file or a run "
                "folder with one"
            )
        return found.resolve()
    if not path.exists():
        raise CheckpointError(f"ckpt_path={given}: no such file or folder; give a .ckpt file or a run folder")
    return path.resolve()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_run_checkpoint(given: str) -> RunCheckpoint:
    """The checkpoint ``ckpt_path=given`` names, with the config and model it was trained with; one line
    (``CheckpointError``) naming the path when it is missing, unreadable, or lacks what rebuilds its run."""
    path = checkpoint_file(given)
    try:
        state = read_checkpoint(path, "ckpt_path")
    except ConfigError as err:
        raise CheckpointError(str(err)) from None
    record = state.get(RECORD_KEY)
    if not isinstance(record, Mapping) or not isinstance(record.get("config"), Mapping):
        raise CheckpointError(
            f"ckpt_path={path} holds no run config (it was written before attnlab's checkpoints recorded one, or "
            "not by attnlab's training); evaluation rebuilds a run from its checkpoint alone: train it again"
        )
    hparams = state.get("hyper_parameters")
    if not isinstance(hparams, Mapping) or not isinstance(hparams.get("model"), Mapping) or "task_kind" not in hparams:
        raise CheckpointError(
            f"ckpt_path={path} holds no single model's spec (hyper_parameters.model); an ensemble's shared "
            "checkpoint holds its members batched: evaluate a member's own run instead"
        )
    return RunCheckpoint(
        path=path,
        step=int(state["global_step"]),
        sha256=file_sha256(path),
        config=dict(record["config"]),
        config_hash=record.get("config_hash"),
        run_id=record.get("run_id"),
        files=dict((record.get("data") or {}).get("files") or {}),
        hparams=dict(hparams),
        state_dict=state["state_dict"],
    )
