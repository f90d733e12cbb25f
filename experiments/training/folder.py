"""A run folder belongs to one computation: its checkpoint is resumed only by a run that computes the same thing.

A config key is one of three kinds here:

- *inert*: changes nothing that is computed (logging, paths, threads, cadence of checkpoints, the run's name,
  ``resume`` and ``ckpt_path`` themselves); the keys ``experiments.record.result.config_hash`` and the report's cell
  identity (``attnlab.cell_identity.is_noise``) leave out. Never compared.
- *budget*: how long the same computation runs (``BUDGET_KEYS``). It may change on resume: raising
  ``trainer.max_steps`` continues a finished or interrupted run. Under ``optim.schedule=cosine``
  ``trainer.max_steps`` is the schedule's horizon, so every step's learning rate depends on it and it counts
  as computation; a budget below the checkpoint's step is refused too (the result would claim fewer steps
  than trained).
- *computation*: everything else (model, data, optimisation, evaluation, seed).

The hash of the computation keys is stored in every checkpoint (``RECORD_KEY``, beside the flat config, as
plain data that ``torch.load(weights_only=True)`` reads), and compared before any work:

- same hash: resume from ``checkpoints/last.ckpt``;
- another hash, a single run or ``experiments.run()``: refused in one line naming the keys that differ
  (old → new) and the ways out (another folder, or ``resume=never``);
- another hash, a sweep cell: the old files move to ``previous/<time>/`` and the cell trains afresh;
- ``resume=never``: whatever the folder holds moves to ``previous/<time>/``; nothing is ever deleted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from attnlab.cell_identity import is_noise
from attnlab.run_folders import LOCK, PREVIOUS
from experiments.config.budget import BUDGET_KEYS
from experiments.config.errors import ConfigError
from experiments.config.hashing import HASH_EXCLUDE_PREFIXES
from experiments.config.spec import RunSpec
from experiments.record.result import read_result

log = logging.getLogger("attnlab")

RESUME_MODES = ("auto", "never")
RECORD_KEY = "attnlab_run"  # the checkpoint's entry holding the hash and config it was computed with
CHECKPOINT = Path("checkpoints") / "last.ckpt"
RESULT = "result.json"


class RunFolderError(ConfigError):
    """The run folder holds another computation, or a checkpoint named by ``ckpt_path`` does not fit."""


def is_inert(key: str) -> bool:
    return key.startswith(HASH_EXCLUDE_PREFIXES) or is_noise(key)


def budget_keys(flat: Mapping[str, Any]) -> tuple[str, ...]:
    """The budget keys of this config: ``trainer.max_steps`` is computation under a cosine schedule (its horizon)."""
    if flat.get("optim.schedule") == "cosine":
        return tuple(k for k in BUDGET_KEYS if k != "trainer.max_steps")
    return BUDGET_KEYS


def computation(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The keys that decide what a run computes. A null is left out, so a key added to the schema with a
    null default does not make every earlier folder another computation."""
    budget = budget_keys(flat)
    return {k: v for k, v in flat.items() if v is not None and not is_inert(k) and k not in budget}


def computation_hash(flat: Mapping[str, Any]) -> str:
    blob = json.dumps(computation(flat), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old, new) of each computation key whose value differs; a key one side lacks reads as null."""
    a, b = computation(old), computation(new)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def describe_changes(changes: list[tuple[str, Any, Any]]) -> str:
    """``attention multihead → local, optim.lr 0.001 → 0.01``: a variant that changed stands for its parameters."""
    renamed = {k[: -len(".name")] for k, _, _ in changes if k.endswith(".name")}
    shown = []
    for key, old, new in changes:
        if key.endswith(".name") and key[: -len(".name")] in renamed:
            shown.append(f"{key[: -len('.name')]} {_show(old)} → {_show(new)}")
        elif not any(key.startswith(group + ".") for group in renamed):
            shown.append(f"{key} {_show(old)} → {_show(new)}")
    return ", ".join(shown)


def _show(value: Any) -> str:
    return "null" if value is None else str(value)


def run_record(flat: Mapping[str, Any], config_hash: str) -> dict[str, Any]:
    """What a checkpoint stores about the computation that wrote it (plain data only)."""
    return {"config_hash": config_hash, "computation_hash": computation_hash(flat), "config": dict(flat)}


def read_checkpoint(path: Path, key: str | None) -> dict[str, Any]:
    """A checkpoint as data (no code runs: ``weights_only``, tensors memory-mapped); one line naming ``key``
    when the file is not one."""
    import torch

    # a key names the setting that gave the path; None: the run folder's own checkpoint
    named, fix = (f"{key}={path}", "") if key else (str(path), "; resume=never moves it aside")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # noqa: BLE001 - whatever torch says, the user hears one line
        raise RunFolderError(f"{named} is not a checkpoint torch can read as data: {_why(err)}{fix}") from None
    if not isinstance(state, dict) or "state_dict" not in state or "global_step" not in state:
        raise RunFolderError(f"{named} is not a Lightning checkpoint (it has no state_dict and global_step){fix}")
    return state


def _why(err: Exception) -> str:
    """The line of torch's many that names the problem (an object that is not data: "Unsupported global: ...")."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in str(err).splitlines()]
    lines = [ln for ln in lines if ln]
    named = [ln for ln in lines if ln.startswith("WeightsUnpickler error:")]
    return (named or lines or [type(err).__name__])[0]


@dataclass
class Held:
    """The computation a folder (or a named checkpoint) holds."""

    where: str  # what told us: "checkpoints/last.ckpt", "result.json"
    computation_hash: str | None
    config: dict[str, Any] | None
    step: int | None = None
    # a result.json's config holds null for the model settings its model did not use (experiments/config/unused.py);
    # the new config is compared under the same mask
    unused: tuple[str, ...] = ()


def held_by_checkpoint(
    path: Path, run_dir: Path | None, key: str | None, state: Mapping[str, Any] | None = None
) -> Held:
    """The computation a checkpoint was written by: its own record, else (written before checkpoints held
    one) the config of the result.json beside it. ``state``: the checkpoint already read (``read_checkpoint``),
    so that a caller deciding more than this reads a large file once."""
    state = read_checkpoint(path, key) if state is None else state
    record = state.get(RECORD_KEY) or {}
    config, unused = record.get("config"), ()
    if config is None and run_dir is not None:
        result = read_result(run_dir / RESULT) or {}
        config, unused = result.get("config"), tuple(result.get("unused") or ())
    found = record.get("computation_hash") or (computation_hash(config) if config is not None else None)
    return Held(_relative(path, run_dir), found, config, int(state["global_step"]), unused)


def held_by_folder(run_dir: Path) -> Held | None:
    """What the folder has computed: its checkpoint, else a result that is more than a failure before
    training (a failed run leaves a checkpoint when it trained at all). None: nothing."""
    if (run_dir / CHECKPOINT).exists():
        return held_by_checkpoint(run_dir / CHECKPOINT, run_dir, None)
    result = read_result(run_dir / RESULT)
    if result and result.get("status") != "failed" and isinstance(result.get("config"), dict):
        return Held(
            RESULT, computation_hash(result["config"]), result["config"], None, tuple(result.get("unused") or ())
        )
    return None


def masked(flat: Mapping[str, Any], unused: tuple[str, ...]) -> Mapping[str, Any]:
    """``flat`` as a result.json records it when ``unused`` were the model's unused settings: null, no sub-keys."""
    if not unused:
        return flat
    kept = {k: v for k, v in flat.items() if not any(k.startswith(u + ".") for u in unused)}
    return {**kept, **dict.fromkeys(unused)}


def _relative(path: Path, run_dir: Path | None) -> str:
    if run_dir is not None and path.is_relative_to(run_dir):
        return str(path.relative_to(run_dir))
    return str(path)


def conflict(held: Held, flat: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """Why ``held`` is not this computation ([]: it is). A hash recorded with no config to compare keys
    with says so as the hash itself."""
    problems = []
    flat = masked(flat, held.unused)
    if held.config is not None:
        problems = changed_keys(held.config, flat)
    if not problems and held.computation_hash != computation_hash(flat):
        problems = [("config_hash", held.computation_hash, computation_hash(flat))]
    max_steps = flat.get("trainer.max_steps")
    if held.step is not None and isinstance(max_steps, int) and 0 < max_steps < held.step:
        problems.append(("trainer.max_steps", f"{held.step} trained", max_steps))
    return problems


@dataclass
class Claim:
    """What this run does with its folder."""

    resume_from: str | None = None  # the checkpoint training continues from
    moved_to: Path | None = None  # where the folder's old files went
    changed: list[tuple[str, Any, Any]] = field(default_factory=list)  # why (empty for resume=never)

    def record(self, run_dir: Path) -> dict[str, Any] | None:
        """``previous_run`` in result.json: where the old files are, and what changed."""
        if self.moved_to is None:
            return None
        return {
            "moved_to": _relative(self.moved_to, run_dir),
            "changed": {k: [o, n] for k, o, n in self.changed},  # key: [old, new]
            "summary": describe_changes(self.changed),  # a changed variant standing for its parameters
        }


def resume_mode(value: Any) -> str:
    if value not in RESUME_MODES:
        raise RunFolderError(
            f"resume={value} is not allowed; choose one of {list(RESUME_MODES)} (auto: skip a completed run and "
            "resume an interrupted one of the same computation; never: move the folder's files aside and start afresh)"
        )
    return str(value)


def claim_folder(
    run_dir: Path, flat: Mapping[str, Any], *, resume: Any, ckpt_path: str | None, sweep_cell: bool
) -> Claim:
    """Decide, before any work, whether this run resumes, starts afresh, or is refused (``RunFolderError``)."""
    mode = resume_mode(resume)
    if ckpt_path is not None:
        if mode == "never":
            raise RunFolderError(
                f"ckpt_path={ckpt_path} with resume=never: one resumes a checkpoint, the other starts afresh; "
                "drop one (init_from=PATH starts afresh from a checkpoint's weights)"
            )
        return Claim(resume_from=str(_named_checkpoint(run_dir, flat, ckpt_path)))
    if mode == "never":
        return Claim(moved_to=move_aside(run_dir))
    held = held_by_folder(run_dir)
    if held is None:
        return Claim()
    problems = conflict(held, flat)
    if not problems:
        if (run_dir / CHECKPOINT).exists():
            return Claim(resume_from=str(run_dir / CHECKPOINT))
        # the same computation with another budget and no checkpoint to continue: its result is kept aside
        moved = move_aside(run_dir)
        log.info("%s holds a finished run of this computation with another budget; moved to %s", run_dir, moved)
        return Claim(moved_to=moved)
    if sweep_cell:
        moved = move_aside(run_dir)
        log.warning(
            "the configuration of %s changed (%s); retraining, old files in %s",
            run_dir,
            describe_changes(problems),
            moved,
        )
        return Claim(moved_to=moved, changed=problems)
    raise refusal(run_dir, held, problems)


def refusal(
    run_dir: Path, held: Held, problems: list[tuple[str, Any, Any]], moved_to: str | None = None
) -> RunFolderError:
    """The one line refusing ``run_dir`` (the folder the user gave); ``moved_to``: where resume=never moves
    its files, when not to ``run_dir/previous/<time>/`` (an ensemble's go to each of its folders' own)."""
    where = moved_to or f"{run_dir / PREVIOUS}/<time>/"
    return RunFolderError(
        f"{run_dir} holds another computation ({held.where}): {describe_changes(problems)}; "
        f"run in another folder, or add resume=never to move its files to {where} and start afresh"
    )


def check_before_start(run_dir: Path, flat: Mapping[str, Any], *, resume: Any, ckpt_path: str | None) -> None:
    """What ``claim_folder`` would refuse, checked without touching the folder: the command line runs it
    before Hydra writes the new run's ``.hydra/`` into a folder that is not its own. A folder another live
    process writes is refused here too (experiments.training.lock)."""
    from experiments.training.lock import check_free

    mode = resume_mode(resume)
    if not run_dir.is_dir():
        if ckpt_path == "last":
            raise RunFolderError(
                f"ckpt_path=last: {run_dir} has no checkpoints/last.ckpt; ckpt_path takes 'last' or a checkpoint file"
            )
        if ckpt_path is not None:
            _named_checkpoint(run_dir, flat, ckpt_path)
        return
    check_free(run_dir)
    if ckpt_path is not None:
        _named_checkpoint(run_dir, flat, ckpt_path)
        return
    held = held_by_folder(run_dir) if mode == "auto" else None
    if held is not None:
        problems = conflict(held, flat)
        if problems:
            raise refusal(run_dir, held, problems)


def _named_checkpoint(run_dir: Path, flat: Mapping[str, Any], ckpt_path: str) -> Path:
    """``ckpt_path=last`` (this folder's) or a path: it must exist, be a checkpoint, and hold this computation."""
    path = run_dir / CHECKPOINT if ckpt_path == "last" else Path(ckpt_path).expanduser()
    if not path.is_file():
        where = f"{run_dir} has no checkpoints/last.ckpt" if ckpt_path == "last" else f"{path} is not a file"
        raise RunFolderError(f"ckpt_path={ckpt_path}: {where}; ckpt_path takes 'last' or a checkpoint file")
    held = held_by_checkpoint(path, run_dir if ckpt_path == "last" else path.parent.parent, "ckpt_path")
    problems = conflict(held, flat)
    if problems:
        raise RunFolderError(
            f"ckpt_path={ckpt_path} holds another computation: {describe_changes(problems)}; resume it with its own "
            "settings, or start new training from its weights with init_from=PATH"
        )
    return path


def move_aside(run_dir: Path, keep: tuple[str, ...] = ()) -> Path | None:
    """Move everything the folder holds into ``previous/<time>/`` (None: nothing to move).

    Kept in place: ``previous/`` itself, the lock of the process now writing, this Hydra run's own
    ``.hydra/`` (written for this run before it started), and the entries named in ``keep`` (an ensemble's
    shared folder inside its first member's, moved aside on its own). ``train.log``, which Hydra has already
    opened for this run, is copied and then emptied, so this run's lines stay in the folder.
    """
    entries = [p for p in run_dir.iterdir() if p.name not in (PREVIOUS, LOCK, *keep) and not _this_runs(p)]
    if not entries:
        return None
    dest = run_dir / PREVIOUS / datetime.now(timezone.utc).strftime("%Y-%m-%d_%H-%M-%S_%f")
    dest.mkdir(parents=True)
    for entry in entries:
        if entry.name == "train.log" and _open_log(entry):
            shutil.copy2(entry, dest / entry.name)
            entry.write_bytes(b"")  # the handler appends, so this run's lines start at the top
        else:
            entry.rename(dest / entry.name)
    return dest


def _this_runs(path: Path) -> bool:
    """Whether ``path`` is the ``.hydra`` folder Hydra wrote for the run now starting."""
    if path.name != ".hydra":
        return False
    try:
        from hydra.core.hydra_config import HydraConfig

        return (
            HydraConfig.initialized() and Path(HydraConfig.get().runtime.output_dir).resolve() == path.parent.resolve()
        )
    except Exception:  # noqa: BLE001 - no Hydra run: experiments.run()
        return False


def _open_log(path: Path) -> bool:
    """Whether a logging handler of this process writes ``path`` (Hydra's ``train.log``)."""
    target = str(path.resolve())
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in logging.root.manager.loggerDict)]
    return any(
        isinstance(h, logging.FileHandler) and str(Path(h.baseFilename).resolve()) == target
        for lg in loggers
        for h in getattr(lg, "handlers", [])
    )


def record_callback(record: dict[str, Any]):
    """A Lightning callback that writes ``record`` into every checkpoint the run saves (``RECORD_KEY``)."""
    from lightning.pytorch.callbacks import Callback

    class RecordComputation(Callback):
        def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict[str, Any]) -> None:
            checkpoint[RECORD_KEY] = record

    return RecordComputation()


def claim(run: RunSpec, run_dir: Path, *, sweep_cell: bool, rank_zero: bool = True) -> Claim:
    """``claim_folder`` for a run's spec; ``init_from`` is checked here too, before any work. A DDP rank > 0
    follows the decision its rank 0 has already carried out (the folder's files are rank 0's by then)."""
    if run.init_from is not None:
        check_init_from(run.init_from)
    ckpt_path = run.ckpt_path
    if not rank_zero:
        named = None if ckpt_path is None else run_dir / CHECKPOINT if ckpt_path == "last" else Path(ckpt_path)
        found = named or (run_dir / CHECKPOINT if (run_dir / CHECKPOINT).exists() else None)
        return Claim(resume_from=str(found) if found is not None else None)
    return claim_folder(run_dir, run.flat_config(), resume=run.resume, ckpt_path=ckpt_path, sweep_cell=sweep_cell)


def check_init_from(path: str) -> None:
    """Before any work: ``init_from`` names a checkpoint readable as data (training/warm_start.py loads it)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise RunFolderError(f"init_from={path}: {file} is not a file; init_from takes a checkpoint file (.ckpt)")
    read_checkpoint(file, "init_from")
