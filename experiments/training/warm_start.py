"""``init_from=PATH``: new training that starts from another run's weights (fine-tuning, a warm start).

Only the weights are taken: the optimiser, the schedule and the step start afresh, and ``result.json``
records where the weights came from (``init_from``). Resuming the same computation is ``ckpt_path``
(experiments/training/folder.py); the two never mix. ``init_from`` is part of the config hash, so a warm-started
run is a computation of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from experiments.training.folder import RECORD_KEY, RunFolderError, read_checkpoint


def warm_start(module: torch.nn.Module, path: str) -> dict[str, Any]:
    """Load the checkpoint's weights into ``module`` (every key, every shape equal, or one line naming the
    first difference); returns what ``result.json`` records."""
    file = Path(path).expanduser()
    state = read_checkpoint(file, "init_from")
    theirs, own = state["state_dict"], module.state_dict()
    missing = sorted(set(own) - set(theirs))
    extra = sorted(set(theirs) - set(own))
    shapes = [
        (k, tuple(theirs[k].shape), tuple(v.shape))
        for k, v in own.items()
        if k in theirs and theirs[k].shape != v.shape
    ]
    if shapes:
        key, old, new = shapes[0]
        raise RunFolderError(
            f"init_from={path}: {key} has shape {list(old)} in the checkpoint and {list(new)} in this model "
            f"({len(shapes)} tensors differ); warm start needs the same architecture sizes"
        )
    if missing or extra:
        which = (
            f"this model has {missing[0]} that the checkpoint lacks"
            if missing
            else f"the checkpoint has {extra[0]} that this model lacks"
        )
        raise RunFolderError(
            f"init_from={path}: {which} ({len(missing)} missing, {len(extra)} unexpected); warm start needs the same "
            "architecture and variants"
        )
    module.load_state_dict({k: theirs[k] for k in own}, strict=True)
    record = state.get(RECORD_KEY) or {}
    return {
        "path": str(file.resolve()),
        "step": int(state["global_step"]),
        "config_hash": record.get("config_hash"),
    }
