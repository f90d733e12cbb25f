"""Assembling one run from its spec (experiments/config/spec.py): task, model, loggers, trainer (``outcome`` reads it
out afterwards)."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import lightning as L
import torch
from lightning.fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

from experiments.config import checks
from experiments.config.spec import EvalSpec, ModelChoice, Spec, TrainerSpec, thaw
from experiments.model.compiling import compile_model
from experiments.model.transformer import ModelSpec, VariantSpec, count_parameters
from experiments.record.loggers import wandb_logger
from experiments.training.callbacks import FailAtStep
from experiments.training.checkpointing import AtomicCheckpointIO
from experiments.training.clock import RunClock
from experiments.training.module import TransformerModule
from experiments.training.testing import EvalOptions

log = logging.getLogger("attnlab")


@dataclass
class Parts:
    trainer: L.Trainer
    module: TransformerModule
    datamodule: Any
    wandb: Any
    params: int


def build_datamodule(spec: Spec, run_dir: Path):
    """The task's LightningDataModule; a task that caches a tokenizer and names no folder caches in the run's."""
    from experiments.tasks import TASKS

    task = spec.task
    params = thaw(task.params)
    accepted = TASKS.accepted_params(task.name)
    if "cache_dir" in accepted and params.get("cache_dir") is None:
        params["cache_dir"] = str(run_dir / "cache")
    return TASKS.build(task.name, seed=spec.run.seed, **params)


def variant(node: Mapping[str, Any] | None) -> VariantSpec | None:
    """A spec's variant node (``{"name": .., **params}``) as the model's ``VariantSpec``; None stays None."""
    return None if node is None else VariantSpec.of(thaw(node))


def model_spec(spec: Spec, datamodule) -> ModelSpec:
    """The Transformer's spec: the chosen options and variants, plus what the task decides."""
    model = spec.model
    return ModelSpec(
        **thaw(model.options),
        **{role: variant(node) for role, node in model.roles.items()},
        vocab_size=int(datamodule.vocab_size),
        attention=variant(model.attention),
        position=variant(model.position),
        num_classes=int(getattr(datamodule, "num_classes", 0) or 0),
        backend=spec.run.backend,
        pad_id=datamodule.pad_id,
        bos_id=datamodule.bos_id,
        eos_id=datamodule.eos_id,
    )


def eval_options(evaluation: EvalSpec, datamodule) -> EvalOptions:
    """What the test measures besides the task's metrics (``eval.*``), with the task's functions it needs."""
    return EvalOptions(
        decode_text=datamodule.decode,
        attention_stats=bool(evaluation.attention_stats),
        stats_examples=evaluation.attention_stats_examples,
        alignment=datamodule.alignment,
    )


def trains_on_cuda(trainer: TrainerSpec) -> bool:
    """Whether the Trainer runs on a CUDA device (what each layer's kernel is planned for)."""
    accelerator = trainer.accelerator
    return accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())


def assemble(spec: Spec, run_dir: Path, *, run_id: str, overrides: list[str] | None = None) -> Parts:
    """The run's parts from its spec: the checks' refusal, if any, is raised here, where the run records it."""
    spec.checked()
    L.seed_everything(spec.run.seed, workers=True, verbose=False)
    datamodule = build_datamodule(spec, run_dir)
    checks.check_task_fit(spec, datamodule)
    model, trainer_spec = spec.model, spec.trainer
    cudagraphs = model.compile and model.compile_mode == "reduce-overhead"
    module = TransformerModule(
        model=model_spec(spec, datamodule),
        optim=spec.optim_options(),  # an OptimConf, the module's optimiser options
        task_kind=datamodule.kind,
        max_steps=trainer_spec.node["max_steps"],
        eval_lengths=list(getattr(datamodule, "eval_lengths", []) or []),
        sep_id=datamodule.sep_id,
        generate=spec.eval.generate,
        bleu=datamodule.bleu_at_test,
        evaluation=eval_options(spec.eval, datamodule),
        # The divergence flag is read at logging and checkpointing steps only (module._watch_divergence).
        divergence_every=math.gcd(
            max(trainer_spec.node["log_every_n_steps"], 1), max(trainer_spec.checkpoint_every_n_steps, 1)
        ),
        cudagraph_steps=cudagraphs,
    )
    if model.compile:
        compile_model(module.model, "cuda" if trains_on_cuda(trainer_spec) else "cpu", model.compile_mode)
        # CUDA graphs are recorded per input shape: a few bucket lengths, not one per batch
        datamodule.fixed_shapes = cudagraphs
    params = count_parameters(module.model)

    from experiments.training import lightning_parts

    unused = module.model.unused_settings()  # e.g. cross attention on a decoder: neither a tag nor in the cell id
    flat_config = spec.run.flat_config()
    start_wandb = wandb_starter(spec, run_dir, run_id, list(overrides or []), unused)
    loggers, wandb = lightning_parts.build_loggers(trainer_spec, run_dir, start_wandb)
    for logger in loggers:
        if logger is not wandb and flat_config:
            # the run's settings beside its curves (TensorBoard's hparams.yaml, the CSV logger's);
            # the module saves no hyper-parameters of its own, so Lightning would log {}
            logger.log_hyperparams(flat_config)
    if wandb is not None:
        wandb.log_checkpoint = lightning_parts.wandb_upload(trainer_spec, "checkpoint")
    callbacks = lightning_parts.build_callbacks(trainer_spec, run_dir, spec.sweep.trial)
    if spec.run.fail_at_step is not None:
        callbacks.append(FailAtStep(int(spec.run.fail_at_step)))
    callbacks.append(RunClock())  # train_seconds across the segments of a resumed run
    trainer = lightning_parts.build_trainer(
        trainer_spec, run_dir, loggers=loggers, callbacks=callbacks, plugins=[AtomicCheckpointIO(), *cluster_plugins()]
    )
    return Parts(trainer=trainer, module=module, datamodule=datamodule, wandb=wandb, params=params)


def wandb_starter(
    spec: Spec, run_dir: Path, run_id: str, overrides: list[str], unused: Iterable[str]
) -> Callable[[dict[str, Any]], Any]:
    """What starts the run's W&B logger from the logger node's keywords: attnlab's run identity (id, name, group,
    job type, tags, the cell in the config) under the user's settings (experiments/config/wandb_settings.py)."""
    from experiments.config import wandb_settings
    from experiments.record import wandb_run

    names = spec.names()

    def start_wandb(params: dict[str, Any]) -> Any:
        own = {
            "name": wandb_run.display_name(spec, overrides),
            "group": spec.run.name,
            "job_type": wandb_run.job_type(bool(spec.sweep.claims)),
            "save_dir": str(run_dir),
        }
        own_tags = [*names.values(), *role_tags(spec.model, unused)]
        return wandb_logger(
            run_id=run_id,
            config=wandb_run.run_config(names, spec.run.flat_config(), overrides, unused),
            **wandb_settings.resolve(params, own, own_tags),
        )

    return start_wandb


def role_tags(model: ModelChoice, unused: Iterable[str] = ()) -> list[str]:
    """``cross_attention=local(window=4)`` for each built role with a variant of its own (W&B caps a tag at 64)."""
    labels = model.role_labels()
    return [f"{role}={name}"[:64] for role, name in labels.items() if name is not None and role not in unused]


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
