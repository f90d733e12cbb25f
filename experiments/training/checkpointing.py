"""Checkpoints written atomically and read back without unpickling arbitrary objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from experiments.record.files import OutputError, atomic_write


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (disk full, permissions); the previous one is intact."""


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save into a temp file beside the target, fsync, then rename (experiments.record.files).

    A kill or a full disk at any moment leaves either the previous checkpoint or
    the new one, never a truncated file.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        try:
            atomic_write(path, lambda f: torch.save(checkpoint, f), binary=True)
        except OutputError as err:
            raise CheckpointWriteError(f"could not write checkpoint {err}") from err

    def load_checkpoint(self, path, map_location=None, weights_only: bool | None = None) -> dict[str, Any]:
        # Only tensors and plain containers: a tampered checkpoint cannot run code.
        return torch.load(path, map_location=map_location or "cpu", weights_only=True)


def checkpoint_bytes(module: torch.nn.Module) -> int:
    """A lower bound on the size of a checkpoint of ``module`` trained with Adam(W):
    the weights, two moment estimates per parameter, and the buffers."""
    params = sum(p.numel() * p.element_size() for p in module.parameters())
    buffers = sum(b.numel() * b.element_size() for b in module.buffers())
    return 3 * params + buffers


def checkpoint_step(path: Path | str) -> int:
    """The global step a checkpoint was saved at, read without loading its tensors (mmap)."""
    return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["global_step"])
