"""Which examples each process reads, in an order a resumed run reproduces exactly.

The order of epoch ``e`` is a pure function of ``(seed, e)``. When a run resumes
from a mid-epoch checkpoint, the sampler reads the trainer's epoch and step
count and skips the batches that were already consumed, so the resumed run
sees the same batches, in the same order, as an uninterrupted one.

Under DDP the datamodule shards its own loaders (the Trainer runs with
``use_distributed_sampler=False``):
- training: every rank draws the same epoch order and takes every world-th
  example from its rank on, wrapping around so that all ranks have as many
  batches (DDP needs equal steps); a resumed rank skips its own consumed batches;
- evaluation: every world-th ready batch; a rank short of one repeats a batch
  marked to be skipped, so each batch counts exactly once and every rank takes
  the same steps. Lightning's own ``DistributedSampler`` also pads the last
  round with repeats, but counts them: some test examples would count twice.
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from experiments.tasks.batches import REPEATED

# (epoch, batches consumed since training began), or None outside a trainer
Position = Callable[[], "tuple[int, int] | None"]
# (rank, world size)
Shard = Callable[[], "tuple[int, int]"]


def single_process() -> tuple[int, int]:
    return 0, 1


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    # One stream per epoch: distinct epochs, reproducible ones.
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


class ResumableOrder(Sampler[int]):
    """This rank's indices for one epoch drawn by ``draw(generator)``; a resumed epoch starts where it stopped."""

    def __init__(
        self,
        draw: Callable[[torch.Generator], list[int]],
        length: int,
        seed: int,
        batch_size: int,
        position: Position | None = None,
        shard: Shard = single_process,
    ) -> None:
        self.draw, self.length, self.seed, self.batch_size = draw, length, seed, batch_size
        self.position, self.shard = position, shard
        self.epoch = 0
        #: the loader drops each epoch's last short batch (``TaskDataModule.train_dataloader``)
        self.drop_last = False

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        _, world = self.shard()
        return -(-self.length // world)  # every rank gets as many: the last round wraps around

    def batches_per_epoch(self) -> int:
        return len(self) // self.batch_size if self.drop_last else -(-len(self) // self.batch_size)

    def __iter__(self) -> Iterator[int]:
        where = self.position() if self.position is not None else None
        if where is None:
            epoch, consumed = self.epoch, 0
            self.epoch += 1  # outside a trainer, successive passes are successive epochs
        else:
            epoch, done = where
            per_epoch = self.batches_per_epoch()
            consumed = min(max(done - epoch * per_epoch, 0), per_epoch)
        order = self.draw(epoch_generator(self.seed, epoch))
        rank, world = self.shard()
        if world > 1 and order:
            total = len(self) * world
            order = [order[i % len(order)] for i in range(rank, total, world)]
        return iter(order[consumed * self.batch_size :])


class RankBatches(Dataset):
    """Ready evaluation batches ``rank, rank + world, ...``: each batch is evaluated on exactly one rank.

    Every rank gets ``ceil(n / world)`` items: a rank short of one repeats a batch
    marked ``REPEATED``, which evaluation skips. No rank may sit out a loop the
    others run: they would wait for it forever in the metric sync at the epoch's end.
    """

    def __init__(self, batches: list[dict], shard: Shard = single_process) -> None:
        self.batches, self.shard = batches, shard

    def __len__(self) -> int:
        _, world = self.shard()
        return -(-len(self.batches) // world)

    def __getitem__(self, i: int) -> dict:
        rank, world = self.shard()
        j = rank + i * world
        if j < len(self.batches):
            return self.batches[j]
        return {**self.batches[j % len(self.batches)], REPEATED: True}


def shuffled(n: int) -> Callable[[torch.Generator], list[int]]:
    return lambda g: torch.randperm(n, generator=g).tolist()


def uniform_starts(num_starts: int, count: int) -> Callable[[torch.Generator], list[int]]:
    return lambda g: torch.randint(num_starts, (count,), generator=g).tolist()


def trainer_position(datamodule) -> Position:
    """Where the datamodule's trainer stands: (epoch, batches consumed since training began)."""

    def position() -> tuple[int, int] | None:
        trainer = getattr(datamodule, "trainer", None)
        if trainer is None:
            return None
        return int(trainer.current_epoch), int(trainer.global_step) * int(trainer.accumulate_grad_batches)

    return position


def trainer_shard(datamodule) -> Shard:
    """This process's (rank, world size) in the datamodule's trainer; (0, 1) outside one."""

    def shard() -> tuple[int, int]:
        trainer = getattr(datamodule, "trainer", None)
        if trainer is None:
            return 0, 1
        return int(trainer.global_rank), max(int(trainer.world_size), 1)

    return shard


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
