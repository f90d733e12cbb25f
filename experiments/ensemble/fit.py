"""The members' batched fit: each member's training batches, one Trainer over the batched model with the
members' shared checkpoint, and the fit itself. ``experiments/ensemble/run.py`` assembles the members before it
and evaluates each member after it."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from experiments.config.spec import Spec, TrainerSpec, thaw
from experiments.ensemble.members import Member

log = logging.getLogger("attnlab")


def fit_members(spec: Spec, shared_dir: Path, todo: list[Member], callbacks: list[Any], resume_from: str | None):
    """Train ``todo`` as one batched model in ``shared_dir``: (the EnsembleModule, its Trainer, the fit's seconds
    over every segment of a resumed ensemble, the members' MemberValidation)."""
    from experiments.ensemble.module import EnsembleModule
    from experiments.ensemble.validation import MemberValidation, validation_interval
    from experiments.training import folder as run_folder
    from experiments.training.callbacks import FailAtStep
    from experiments.training.clock import RunClock

    t = spec.trainer
    seeds = [m.seed for m in todo]
    # the clipping a single run's Trainer does with trainer.gradient_clip_val (by default optim.grad_clip)
    clip = t.get("gradient_clip_val")
    module = EnsembleModule([m.parts.module for m in todo], seeds, clip, log_every=t.get("log_every_n_steps"))
    extra = [FailAtStep(int(spec.run.fail_at_step))] if spec.run.fail_at_step is not None else []
    loaders = train_loaders([m.parts for m in todo])
    # before the fit's callbacks: a member stopped early at this step takes no step after it
    validation = MemberValidation(
        [m.parts for m in todo],
        [m.run_dir for m in todo],
        validation_interval(todo[0].parts.trainer, min(len(x) for x in loaders)),
    )
    clock = RunClock()  # train_seconds across the segments of a resumed ensemble
    # every checkpoint records the computation that wrote it (the first member's), for the next run's comparison
    first_run = todo[0].spec.run
    recorded = run_folder.record_callback(run_folder.run_record(first_run.flat_config(), first_run.config_hash))
    trainer = _trainer(t, shared_dir, validation, [clock, recorded, *extra, *callbacks])
    batches = _member_batches(todo, trainer, loaders)
    if resume_from:  # only ever a checkpoint of these members' computation (experiments/ensemble/folder.py)
        log.info("resuming the ensemble of seeds %s from %s", seeds, resume_from)
    start = time.perf_counter()
    trainer.fit(module, train_dataloaders=batches, ckpt_path=resume_from)
    # the whole fit, over every segment of a resumed ensemble (RunClock keeps the earlier ones)
    train_seconds = time.perf_counter() - start + clock.before["seconds"]
    if trainer.interrupted:
        raise KeyboardInterrupt("training was interrupted")
    return module, trainer, train_seconds, validation


def train_loaders(parts: list) -> list:
    """Each member's training loader, from its own datamodule (``parts``: each member's assembled run): the
    batches its separate run would read."""
    loaders = []
    for p in parts:
        dm = p.datamodule
        dm.prepare_data()
        dm.setup("fit")
        loaders.append(dm.train_dataloader())
    return loaders


def _trainer(t: TrainerSpec, shared_dir: Path, validation, callbacks: list[Any]):
    """The ensemble's Trainer, from the trainer spec ``t``: the shared checkpoint first, then the members'
    ``validation``, the progress lines and step timer, and ``callbacks``."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    from experiments.ensemble.trainer_keys import passed_keywords
    from experiments.record.loggers import csv_logger
    from experiments.training.callbacks import PlainProgress, StepTimer
    from experiments.training.checkpointing import AtomicCheckpointIO

    return L.Trainer(
        # every key the table passes, as a single run's Trainer takes it; the limits that end a single run's
        # fit end the ensemble's alike (stops.stop_after_fit then records which one did, in every member).
        # The table's other keys are handled below or were refused before any work (preflight).
        **passed_keywords(thaw(t.node)),
        devices=1,
        limit_val_batches=0,  # the members validate in MemberValidation
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        logger=[csv_logger(shared_dir)],
        callbacks=[
            ModelCheckpoint(
                dirpath=str(shared_dir / "checkpoints"),
                filename="step{step}",
                save_last=True,
                save_top_k=0,
                every_n_train_steps=max(t.checkpoint_every_n_steps, 1),
                auto_insert_metric_name=False,
            ),
            validation,
            PlainProgress(every=max(t.get("log_every_n_steps"), 1)),
            StepTimer(),
            *callbacks,
        ],
        plugins=[AtomicCheckpointIO()],
        default_root_dir=str(shared_dir),
        use_distributed_sampler=False,
    )


def _member_batches(todo: list[Member], trainer, loaders: list):
    """The members' loaders as one stream of batches for the batched model."""
    for m in todo:  # each member's sampler reads the ensemble's epoch and step, as in its own run
        m.parts.datamodule.trainer = trainer
    return member_batches([m.parts for m in todo], loaders)


def member_batches(parts: list, loaders: list):
    """The members' ``loaders`` zipped into one stream of stacked batches, collated as the members' runs
    (``parts``, each member's assembled run) collate theirs."""
    from experiments.ensemble.data import MemberBatches

    first = parts[0]
    model = first.module.spec
    return MemberBatches(
        loaders,
        kind=first.datamodule.kind,
        arch=model.arch,
        pad_id=model.pad_id,
        bos_id=model.bos_id,
        sep_id=first.datamodule.sep_id,
    )
