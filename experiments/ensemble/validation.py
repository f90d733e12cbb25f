"""Each member validated during the batched training as its separate run validates, and stopped alone.

A separate run validates every ``trainer.val_check_interval`` steps; its ``EarlyStopping`` may end
it, and a ``ModelCheckpoint`` with a ``monitor`` keeps its best weights. Here, at the same steps,
each member still training is validated by its own assembled run (its module, datamodule and
trainer, loaded with the member's current weights), and those of its callbacks decide for it
alone: a member whose early stopping fires stops updating (status ``completed``, fewer steps),
the others go on; a member's best weights go to its own folder. The metrics are kept, not
logged, so that the member's evaluation logs them at the separate run's steps with the rest of
its history (CSV and W&B alike).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

log = logging.getLogger("attnlab")


@dataclass
class MemberRecord:
    """What the validations decided for one member: its history, its last validation, its best weights."""

    history: list[tuple[int, dict[str, float]]] = field(default_factory=list)  # (logged step, val metrics)
    last: tuple[int, dict[str, float]] | None = None  # (weights' step, metrics) of the latest validation
    best_path: str | None = None
    best_score: float | None = None
    stopped_at: int | None = None
    reason: str | None = None


def validation_interval(trainer: L.Trainer, batches_per_epoch: int) -> int | None:
    """Training steps between validations of a member's own trainer (None: it never validates)."""
    if not trainer.limit_val_batches:
        return None
    interval = trainer.val_check_interval
    if isinstance(interval, float):  # a fraction of an epoch
        return max(1, int(batches_per_epoch * interval))
    return max(1, int(interval))


class MemberValidation(L.Callback):
    """Validates the members (their assembled parts, ``parts``) every ``every`` steps of the ensemble."""

    def __init__(self, parts: list[Any], folders: list[Path], every: int | None) -> None:
        self.parts, self.folders, self.every = parts, folders, every
        self.records = [MemberRecord() for _ in parts]
        self.stoppers = [[c for c in p.trainer.callbacks if isinstance(c, EarlyStopping)] for p in parts]
        self.keepers = [[c for c in p.trainer.callbacks if isinstance(c, ModelCheckpoint) and c.monitor] for p in parts]
        from experiments.training.callbacks import PlainProgress

        # The member trainers only validate from here on, once set up for it: no loggers (the member's
        # evaluation logs this history, at these steps, with the rest) and no progress line (it would
        # name the member trainer's step, 0; validate() logs its own).
        for p in parts:
            p.trainer.loggers = []
            p.trainer.callbacks[:] = [c for c in p.trainer.callbacks if not isinstance(c, PlainProgress)]

    def on_train_batch_end(self, trainer: L.Trainer, ensemble: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        step = trainer.global_step  # after this step's update, as a separate run's validation sees it
        if self.every is None or step % self.every:
            return
        for index in ensemble.training_members():
            self.validate(ensemble, index, step)
        if not ensemble.training_members():
            trainer.should_stop = True

    def validate(self, ensemble: Any, index: int, step: int) -> dict[str, float]:
        from experiments.training.outcome import scalar_metrics

        parts, record = self.parts[index], self.records[index]
        ensemble.load_member_into(parts.module.model, index)
        parts.module.to(ensemble.device)
        own = parts.trainer
        fitting = parts.datamodule.trainer  # validate() attaches its trainer to the datamodule; the
        try:  # train sampler must go on reading the ensemble's epoch and step
            metrics = scalar_metrics(own.validate(parts.module, datamodule=parts.datamodule, verbose=False))
        finally:
            parts.datamodule.trainer = fitting
        # a validation inside a separate run's fit is logged at the step before the update count
        record.history.append((step - 1, metrics))
        log.info(
            "seed=%d step %d validation %s",
            ensemble.seeds[index],
            step,
            {k: f"{v:.4f}" for k, v in metrics.items() if k.startswith("val/")},
        )
        record.last = (step, metrics)
        for keeper in self.keepers[index]:
            self._keep_best(keeper, ensemble, index, step, metrics)
        for stopper in self.stoppers[index]:
            if stopper.monitor not in metrics:
                continue
            stop, reason = stopper._evaluate_stopping_criteria(torch.tensor(metrics[stopper.monitor]))
            if stop:
                record.stopped_at, record.reason = step, reason
                ensemble.stop_member(index, step)
                log.info("member %d (seed=%d) stops early at step %d: %s", index, ensemble.seeds[index], step, reason)
                break
        return metrics

    def _keep_best(
        self, keeper: ModelCheckpoint, ensemble: Any, index: int, step: int, metrics: dict[str, float]
    ) -> None:
        """The member's best weights by ``keeper.monitor`` (its top 1), saved as its run would name them."""
        value = metrics.get(keeper.monitor)
        if value is None:
            return
        record = self.records[index]
        better = record.best_score is None or (
            value < record.best_score if keeper.mode == "min" else value > record.best_score
        )
        if not better:
            return
        folder = Path(keeper.dirpath) if keeper.dirpath else self.folders[index] / "checkpoints"
        name = (keeper.filename or "best-step{step}").format(
            step=step, **{k.replace("/", "_"): v for k, v in metrics.items()}
        )
        path = folder / f"{name}.ckpt"
        from experiments.record.files import atomic_write

        # what trainer.validate/test(ckpt_path=...) reads: the module's state dict and Lightning's version
        module = self.parts[index].module  # holds the member's weights of this step (validate loaded them)
        state = {
            "state_dict": {k: v.detach().cpu().clone() for k, v in module.state_dict().items()},
            "pytorch-lightning_version": L.__version__,
            "global_step": step,
            "monitor": keeper.monitor,
            "score": value,
        }
        atomic_write(path, lambda handle: torch.save(state, handle), binary=True)
        if record.best_path and record.best_path != str(path):
            Path(record.best_path).unlink(missing_ok=True)
        record.best_path, record.best_score = str(path), value

    # -- resumption: what the validations decided so far travels in the shared checkpoint -------
    def state_dict(self) -> dict[str, Any]:
        return {
            "records": [vars(r) for r in self.records],
            "stoppers": [[s.state_dict() for s in stoppers] for stoppers in self.stoppers],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for record, saved in zip(self.records, state.get("records", [])):
            for key, value in saved.items():
                setattr(
                    record,
                    key,
                    [tuple(h) for h in value]
                    if key == "history"
                    else tuple(value)
                    if key == "last" and value is not None
                    else value,
                )
        for stoppers, saved in zip(self.stoppers, state.get("stoppers", [])):
            for stopper, s in zip(stoppers, saved):
                stopper.load_state_dict(s)
