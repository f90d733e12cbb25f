"""Training order that a resumed run reproduces exactly.

The order of epoch ``e`` is a pure function of ``(seed, e)``. When a run resumes
from a mid-epoch checkpoint, the sampler reads the trainer's epoch and step
count and skips the examples that were already consumed, so the resumed run
sees the same batches, in the same order, as an uninterrupted one.
"""
from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch.utils.data import DataLoader, Sampler

# (epoch, batches of that epoch already consumed), or None outside a trainer
Position = Callable[[], "tuple[int, int] | None"]


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    # One stream per epoch: distinct epochs, reproducible ones.
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


class ResumableOrder(Sampler[int]):
    """Indices for one epoch drawn by ``draw(generator)``; a resumed epoch starts where it stopped."""

    def __init__(self, draw: Callable[[torch.Generator], list[int]], length: int, seed: int, batch_size: int,
                 position: Position | None = None) -> None:
        self.draw, self.length, self.seed, self.batch_size = draw, length, seed, batch_size
        self.position = position
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[int]:
        where = self.position() if self.position is not None else None
        epoch, consumed = where if where is not None else (self.epoch, 0)
        order = self.draw(epoch_generator(self.seed, epoch))
        if where is None:
            self.epoch += 1  # outside a trainer, successive passes are successive epochs
        return iter(order[consumed * self.batch_size:])


def shuffled(n: int) -> Callable[[torch.Generator], list[int]]:
    return lambda g: torch.randperm(n, generator=g).tolist()


def uniform_starts(num_starts: int, count: int) -> Callable[[torch.Generator], list[int]]:
    return lambda g: torch.randint(num_starts, (count,), generator=g).tolist()


def trainer_position(datamodule, batches_per_epoch: int) -> Position:
    """Where the datamodule's trainer stands: (epoch, batches consumed in it)."""

    def position() -> tuple[int, int] | None:
        trainer = getattr(datamodule, "trainer", None)
        if trainer is None:
            return None
        epoch = int(trainer.current_epoch)
        batches = int(trainer.global_step) * int(trainer.accumulate_grad_batches)
        consumed = min(max(batches - epoch * batches_per_epoch, 0), batches_per_epoch)
        return epoch, consumed

    return position


class ResumableLoader(DataLoader):
    """A train loader whose resumption is the sampler's business (see ``ResumableOrder``).

    It declares the state interface Lightning looks for, so a mid-epoch resume is
    known to be exact; there is no state to carry, since the order is recovered
    from the trainer's own epoch and step count.
    """

    def state_dict(self) -> dict:
        return {"order": "recovered from the trainer's epoch and step"}

    def load_state_dict(self, state: dict) -> None:
        return None
