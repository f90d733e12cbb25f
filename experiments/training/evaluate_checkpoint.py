"""Evaluating a checkpoint alone: the run's validation and test again, on the weights it saved, into a folder
of its own.

The model is rebuilt from the checkpoint's hyper-parameters and weights, the data from its recorded config
(``experiments.training.run_checkpoint``), changed only where the evaluation asks (``eval_config``: new lengths,
another test set). The same readout as a training run's (``single_run.evaluate``) writes the same metrics and
``by_length`` into ``evaluation.json``: result.json's schema, marked by its ``evaluation`` entry (the checkpoint,
its hash and step, the overrides), in ``<run>/eval/<time>/`` unless told otherwise. The collector never counts it
as a seed of the run (it reads ``result.json`` files); ``analysis.collect.collect_evaluations`` reads it as one.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import lightning as L
import torch
from omegaconf import OmegaConf

from attnlab.run_folders import EVAL_DIR, EVALUATION
from experiments.config.spec import Spec, TrainerSpec, spec_of, thaw
from experiments.config.unused import record_unused
from experiments.model.transformer import ModelSpec, count_parameters
from experiments.record.result import environment, now_iso, read_result, write_json_atomic
from experiments.training import build, outcome, single_run
from experiments.training.eval_config import evaluation_config, parse_overrides
from experiments.training.module import TransformerModule
from experiments.training.run_checkpoint import CheckpointError, RunCheckpoint, read_run_checkpoint


def default_folder(checkpoint: RunCheckpoint) -> Path:
    """``<run>/eval/<UTC time>``: beside the run it measures, one folder per evaluation."""
    return checkpoint.run_dir / EVAL_DIR / datetime.now(timezone.utc).strftime("%Y-%m-%d_%H-%M-%S_%f")


def rebuilt_module(checkpoint: RunCheckpoint, evaluated: Spec, datamodule: Any) -> TransformerModule:
    """The trained module: its spec and weights from the checkpoint; what the test measures from the
    ``evaluated`` spec (the evaluation lengths from the rebuilt data). One line when the data no longer fits
    the model."""
    spec = ModelSpec.from_dict(checkpoint.hparams["model"])
    task, position = evaluated.task.name, evaluated.model.position
    if int(datamodule.vocab_size) != spec.vocab_size:
        raise CheckpointError(
            f"task={task}: the data now gives a vocabulary of {datamodule.vocab_size} tokens, the model "
            f"in {checkpoint.path} was trained on {spec.vocab_size}; evaluate it on the data it was trained with"
        )
    max_len = position.get("max_len") if position["name"] == "learned" else None
    if max_len is not None:
        from experiments.config.checks import longest_sequence

        need = longest_sequence(evaluated.model, datamodule)
        if need > int(max_len):
            raise CheckpointError(
                f"task={task}: the longest evaluated sequence needs {need} positions, the model's learned "
                f"table has position.max_len={max_len}; evaluate lengths it has positions for"
            )
    module = TransformerModule(
        **{
            **checkpoint.hparams,
            "model": spec,
            "eval_lengths": list(getattr(datamodule, "eval_lengths", []) or []),
            "generate": bool(evaluated.eval.generate),
            "bleu": datamodule.bleu_at_test,
            "evaluation": build.eval_options(evaluated.eval, datamodule),
        }
    )
    module.load_state_dict(checkpoint.state_dict, strict=True)
    return module


def evaluation_trainer(t: TrainerSpec, folder: Path) -> L.Trainer:
    """A Trainer that only tests: the run's device and precision and batch limits, no logger, no checkpoints."""
    return L.Trainer(
        accelerator=t.accelerator,
        devices=thaw(t.get("devices")),
        num_nodes=1,
        precision=t.get("precision"),
        limit_val_batches=t.get("limit_val_batches"),
        limit_test_batches=t.get("limit_test_batches"),
        deterministic=bool(t.get("deterministic", False)),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(folder),
    )


def evaluate_checkpoint(ckpt_path: str, overrides: list[str], out: str | Path | None = None) -> tuple[dict, Path]:
    """Evaluate the checkpoint ``ckpt_path`` names (a .ckpt file or a run folder) with ``overrides``; returns the
    evaluation's record (also written to ``<folder>/evaluation.json``) and its folder. Bad input raises a
    one-line ``CheckpointError`` (or the task's ``TaskConfigError``) before anything is written."""
    began = time.perf_counter()
    checkpoint = read_run_checkpoint(ckpt_path)
    parsed = parse_overrides(overrides)
    cfg = evaluation_config(checkpoint, parsed)
    if str(cfg.trainer.accelerator) in ("gpu", "cuda") and not torch.cuda.is_available():
        raise CheckpointError(
            f"trainer.accelerator={cfg.trainer.accelerator}: the run trained on a GPU and this machine has none; "
            "evaluate on the CPU with trainer.accelerator=cpu"
        )
    if "trainer.devices" not in parsed:
        cfg.trainer.devices = 1  # a DDP run's test, on one device: the same examples, each once
    if cfg.get("num_threads"):
        torch.set_num_threads(int(cfg.num_threads))
    spec = spec_of(OmegaConf.to_container(cfg, resolve=True))  # the evaluated config, read once
    L.seed_everything(spec.run.seed, workers=True, verbose=False)
    folder = Path(out) if out is not None else default_folder(checkpoint)
    # a task's tokenizer cache: the run's own when it made one, else the evaluation's folder
    cache_root = checkpoint.run_dir if (checkpoint.run_dir / "cache").is_dir() else folder
    datamodule = build.build_datamodule(spec, cache_root)
    module = rebuilt_module(checkpoint, spec, datamodule)
    folder.mkdir(parents=True, exist_ok=True)
    trainer = evaluation_trainer(spec.trainer, folder)
    # the run's id and hash, so the evaluation joins its run; a checkpoint that predates its id: its result's
    evaluation_id = uuid.uuid4().hex[:12]
    beside = read_result(checkpoint.run_dir / single_run.RESULT) or {}
    run_id = str(checkpoint.run_id or beside.get("run_id") or evaluation_id)
    result = single_run.new_result(spec, folder, overrides, run_id, checkpoint.config_hash)
    result["evaluation"] = {
        "id": evaluation_id,
        "checkpoint": str(checkpoint.path),
        "sha256": checkpoint.sha256,
        "step": checkpoint.step,
        "of_run_dir": str(checkpoint.run_dir),
        "overrides": list(overrides),
        "config_hash": spec.run.config_hash,  # of the evaluated config: the run's, with the overrides
    }
    result["train_lengths"] = list(getattr(datamodule, "train_lengths", []) or []) or None
    record_unused(result, module.model.unused_settings())
    params = count_parameters(module.model)
    parts = build.Parts(trainer=trainer, module=module, datamodule=datamodule, wandb=None, params=params)

    def validation() -> dict[str, float]:
        return outcome.scalar_metrics(trainer.validate(module, datamodule=datamodule, verbose=False))

    single_run.evaluate(spec, result, parts, folder, None, validation)
    result["cost"].update(params=params, peak_memory_mb=outcome.peak_memory_mb(module.device))
    result["cost"]["wall_seconds"] = time.perf_counter() - began
    result.update(finished_at=now_iso(), env=environment(outcome.device_name(trainer)))
    write_json_atomic(folder / EVALUATION, result)
    return result, folder
