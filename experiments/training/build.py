"""Assembling one run from its config: task, model, loggers, trainer (``outcome`` reads it out afterwards)."""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import lightning as L
import torch
from lightning.fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment
from omegaconf import DictConfig, OmegaConf

from attnlab.roles import ROLES
from experiments.config import checks
from experiments.config.roles import role_labels
from experiments.model.compiling import compile_model
from experiments.model.transformer import ModelSpec, VariantSpec, count_parameters
from experiments.record.loggers import wandb_logger
from experiments.training.callbacks import FailAtStep
from experiments.training.checkpointing import AtomicCheckpointIO
from experiments.training.clock import RunClock
from experiments.training.module import EvalOptions, TransformerModule

log = logging.getLogger("attnlab")


@dataclass
class Parts:
    trainer: L.Trainer
    module: TransformerModule
    datamodule: Any
    wandb: Any
    params: int


def build_datamodule(cfg: DictConfig, run_dir: Path):
    from experiments.tasks import TASKS

    params = OmegaConf.to_container(cfg.task, resolve=True)
    name = params.pop("name")
    accepted = TASKS.accepted_params(name)
    if "cache_dir" in accepted and params.get("cache_dir") is None:
        params["cache_dir"] = str(run_dir / "cache")
    return TASKS.build(name, seed=cfg.seed, **params)


def model_spec(cfg: DictConfig, datamodule) -> ModelSpec:
    """The Transformer's spec: ``cfg.model`` as its typed schema object, plus what the task decides."""
    chosen = OmegaConf.to_object(cfg.model)  # a ModelConf (experiments/config/schema.py), defaults filled in
    roles = {role: None if getattr(chosen, role) is None else VariantSpec.of(getattr(chosen, role)) for role in ROLES}
    return ModelSpec.of(
        chosen,
        **roles,
        vocab_size=int(datamodule.vocab_size),
        attention=VariantSpec.of(cfg.attention),
        position=VariantSpec.of(cfg.position),
        num_classes=int(getattr(datamodule, "num_classes", 0) or 0),
        backend=cfg.backend,
        pad_id=datamodule.pad_id,
        bos_id=datamodule.bos_id,
        eos_id=datamodule.eos_id,
    )


def eval_options(cfg: DictConfig, datamodule) -> EvalOptions:
    """What the test measures besides the task's metrics (``eval.*``), with the task's functions it needs."""
    return EvalOptions(
        decode_text=datamodule.decode,
        attention_stats=bool(cfg.eval.attention_stats),
        stats_examples=cfg.eval.attention_stats_examples,
        alignment=datamodule.alignment,
    )


def trains_on_cuda(cfg: DictConfig) -> bool:
    """Whether the Trainer of ``cfg`` runs on a CUDA device (what each layer's kernel is planned for)."""
    accelerator = cfg.trainer.accelerator
    return accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())


def assemble(
    cfg: DictConfig, run_dir: Path, *, run_id: str, flat_config: dict[str, Any], overrides: list[str] | None = None
) -> Parts:
    checks.check_config(cfg)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule = build_datamodule(cfg, run_dir)
    checks.check_task_fit(cfg, datamodule)
    cudagraphs = bool(cfg.model.compile) and cfg.model.compile_mode == "reduce-overhead"
    module = TransformerModule(
        model=model_spec(cfg, datamodule),
        optim=OmegaConf.to_object(cfg.optim),  # an OptimConf, the module's optimiser options
        task_kind=datamodule.kind,
        max_steps=cfg.trainer.max_steps,
        eval_lengths=list(getattr(datamodule, "eval_lengths", []) or []),
        sep_id=datamodule.sep_id,
        generate=cfg.eval.generate,
        bleu=datamodule.bleu_at_test,
        evaluation=eval_options(cfg, datamodule),
        # The divergence flag is read at logging and checkpointing steps only (module._watch_divergence).
        divergence_every=math.gcd(max(cfg.trainer.log_every_n_steps, 1), max(cfg.checkpoint_every_n_steps, 1)),
        cudagraph_steps=cudagraphs,
    )
    if cfg.model.compile:
        compile_model(module.model, "cuda" if trains_on_cuda(cfg) else "cpu", cfg.model.compile_mode)
        # CUDA graphs are recorded per input shape: a few bucket lengths, not one per batch
        datamodule.fixed_shapes = cudagraphs
    params = count_parameters(module.model)

    from experiments.config import wandb_settings
    from experiments.record import wandb_run
    from experiments.training import lightning_parts

    unused = module.model.unused_settings()  # e.g. cross attention on a decoder: neither a tag nor in the cell id

    def start_wandb(params: dict[str, Any]) -> Any:
        own = {
            "name": wandb_run.display_name(cfg, list(overrides or [])),
            "group": cfg.name,
            "job_type": wandb_run.job_type(cfg),
            "save_dir": str(run_dir),
        }
        own_tags = [cfg.task.name, cfg.attention.name, cfg.position.name, *role_tags(cfg, unused)]
        return wandb_logger(
            run_id=run_id,
            config=wandb_run.run_config(cfg, flat_config, list(overrides or []), unused),
            **wandb_settings.resolve(params, own, own_tags),
        )

    loggers, wandb = lightning_parts.build_loggers(cfg, run_dir, start_wandb)
    for logger in loggers:
        if logger is not wandb and flat_config:
            # the run's settings beside its curves (TensorBoard's hparams.yaml, the CSV logger's);
            # the module saves no hyper-parameters of its own, so Lightning would log {}
            logger.log_hyperparams(flat_config)
    if wandb is not None:
        wandb.log_checkpoint = lightning_parts.wandb_upload(cfg, "checkpoint")
    callbacks = lightning_parts.build_callbacks(cfg, run_dir)
    if cfg.get("fail_at_step") is not None:
        callbacks.append(FailAtStep(int(cfg.fail_at_step)))
    callbacks.append(RunClock())  # train_seconds across the segments of a resumed run
    trainer = lightning_parts.build_trainer(
        cfg, run_dir, loggers=loggers, callbacks=callbacks, plugins=[AtomicCheckpointIO(), *cluster_plugins()]
    )
    return Parts(trainer=trainer, module=module, datamodule=datamodule, wandb=wandb, params=params)


def role_tags(cfg: DictConfig, unused: Iterable[str] = ()) -> list[str]:
    """``cross_attention=local(window=4)`` for each built role with a variant of its own (W&B caps a tag at 64)."""
    return [f"{role}={name}"[:64] for role, name in role_labels(cfg).items() if name is not None and role not in unused]


def cluster_starts_ranks() -> bool:
    """Whether a scheduler (SLURM's srun, torchrun) started one process per rank, so Lightning starts none."""
    return SLURMEnvironment.detect() or TorchElasticEnvironment.detect() or "LOCAL_RANK" in os.environ


def cluster_plugins() -> list[Any]:
    """Under SLURM, Lightning's own requeue stays off.

    submitit owns the job: on a timeout or preemption it requeues the cell (see
    ``max_num_timeout`` in conf/hydra/launcher/slurm.yaml), which then resumes from
    ``checkpoints/last.ckpt``. Lightning's default SIGUSR1 handler would requeue the
    same job a second time.
    """
    if os.environ.get("SLURM_JOB_ID") and SLURMEnvironment.detect():
        return [SLURMEnvironment(auto_requeue=False)]
    return []
