"""Checkpoints written atomically and read back without unpickling arbitrary objects."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (disk full, permissions); the previous one is intact."""


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save into a temp file beside the target, fsync, then rename.

    A kill or a full disk at any moment leaves either the previous checkpoint or
    the new one, never a truncated file.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as err:
            Path(tmp).unlink(missing_ok=True)
            raise CheckpointWriteError(f"could not write checkpoint {path}: {err.strerror or err}") from err
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load_checkpoint(self, path, map_location=None, weights_only: bool | None = None) -> dict[str, Any]:
        # Only tensors and plain containers: a tampered checkpoint cannot run code.
        return torch.load(path, map_location=map_location or "cpu", weights_only=True)
