"""An ensemble's folders belong to one computation, as a single run's folder does (experiments/training/folder.py).

An ensemble writes its members' folders (``seed=<s>/``, or the sweep jobs' own under hydra/launcher=ensemble)
and one shared folder (``ensemble/``) whose checkpoint continues every member. Before any work:

- each member's folder is compared, as a single run's, with what it holds (its ``result.json``);
- the shared checkpoint is compared with the computation of the first member it trains (the record
  ``run_folder.RECORD_KEY`` the fit writes into it) and must hold the same members (their seeds);
- another computation is refused in one line naming the keys old → new (``run_folder.refusal``), or, in a
  sweep cell, the old files move to ``previous/<time>/`` and the members train afresh;
- a checkpoint of other members (``ensemble.seeds`` changed) is moved aside, never overwritten: the members'
  own folders guard their results, so this is no refusal;
- ``resume=never`` moves every member's folder and the shared one aside.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from experiments.config.spec import Spec
from experiments.training.folder import (
    CHECKPOINT,
    Claim,
    Held,
    conflict,
    held_by_checkpoint,
    held_by_folder,
    move_aside,
    read_checkpoint,
    refusal,
    resume_mode,
)

log = logging.getLogger("attnlab")


@dataclass
class EnsembleClaim:
    """What an ensemble does with its folders: the shared checkpoint it resumes, and each member's claim."""

    resume_from: str | None = None
    members: dict[Path, Claim] = field(default_factory=dict)


def seeds_of(state: Mapping[str, Any]) -> list[int] | None:
    """The members' seeds of a shared checkpoint already read."""
    return state.get("attnlab_ensemble", {}).get("seeds")


def claim_ensemble(
    shared: Path,
    members: list[tuple[Path, Mapping[str, Any]]],
    seeds: list[int],
    *,
    resume: Any,
    sweep_cell: bool,
) -> EnsembleClaim:
    """Decide, before any work, whether the ensemble of ``members`` ((folder, flat config), in seed order)
    resumes ``shared``'s checkpoint, starts afresh, or is refused (``run_folder.RunFolderError``)."""
    mode = resume_mode(resume)
    ckpt = shared / CHECKPOINT
    if mode == "never":
        _move_shared(shared, "resume=never")
        return EnsembleClaim(members={d: Claim(moved_to=_move_member(d, shared)) for d, _ in members if d.is_dir()})
    # the shared checkpoint, which may be large, read once for all three decisions (its seeds, its record,
    # whether it resumes) and only when they come to it: a member's other computation is found first
    state = functools.cache(lambda: read_checkpoint(ckpt, None))
    found = another_computation(shared, members, seeds, state)
    if found is not None:
        return _changed(shared, members, *found, sweep_cell)
    if not ckpt.exists():
        return EnsembleClaim()
    held_seeds = seeds_of(state())
    if held_seeds != seeds:
        _move_shared(shared, f"it holds the ensemble of seeds {held_seeds}, not {seeds}")
        return EnsembleClaim()
    return EnsembleClaim(resume_from=str(ckpt))


def another_computation(
    shared: Path,
    members: list[tuple[Path, Mapping[str, Any]]],
    seeds: list[int],
    state: Callable[[], Mapping[str, Any]] | None = None,
) -> tuple[Path, Held, list[tuple[str, Any, Any]]] | None:
    """(where, what it holds, the keys that differ) of the first folder that holds another computation than
    ``members``; None when none does. Reads only; ``state`` gives the shared checkpoint read once."""
    for folder, flat in members:
        held = held_by_folder(folder)
        problems = conflict(held, flat) if held is not None else []
        if problems:
            return folder, held, problems
    ckpt = shared / CHECKPOINT
    if not ckpt.exists():
        return None
    read = state() if state is not None else read_checkpoint(ckpt, None)
    if seeds_of(read) != seeds:
        return None  # nothing to resume, or another ensemble's checkpoint: moved aside, no refusal
    first_dir, first_flat = members[0]
    # the record is the first member's computation; a checkpoint written before records were kept is read
    # against the first member's result.json
    held = held_by_checkpoint(ckpt, first_dir, None, state=read)
    held.where = str(ckpt)
    problems = conflict(held, first_flat)
    return (shared, held, problems) if problems else None


def check_before_start(run_dir: Path, spec: Spec) -> None:
    """What ``claim_ensemble`` would refuse for ``ensemble.seeds=N`` in ``run_dir``, checked without touching
    the folder: the preflight runs it before Hydra writes the new run's ``.hydra/`` into it. Its memory is
    checked first (``memory.check_memory``): resolving a thousand members' configs alone takes seconds."""
    from experiments.ensemble.members import SHARED, any_result, member_dirs, member_seeds, member_spec
    from experiments.ensemble.memory import check_memory
    from experiments.training.cell_contract import completed
    from experiments.training.lock import check_free

    seeds = member_seeds(spec)
    dirs = member_dirs(spec, run_dir, seeds)
    never = resume_mode(spec.run.resume) == "never"
    if len(seeds) > 1 and (never or not any_result(dirs)):  # every member trains: checked before resolving any
        check_memory(spec, len(seeds))
    if never or not run_dir.is_dir():
        return
    check_free(run_dir / SHARED, named=run_dir)
    members, waiting = [], []  # (folder, flat config) and seed of each member still to train, as the run decides
    for seed, folder in zip(seeds, dirs):
        member = member_spec(spec, seed)
        if completed(spec.run.resume, folder, member.run.config_hash) is None:
            members.append((folder, member.run.flat_config()))
            waiting.append(seed)
    if not members:
        return
    if any_result(dirs) and len(members) > 1:  # the completed members stay out of the batched model
        check_memory(spec, len(seeds), to_train=len(members))
    found = another_computation(run_dir / SHARED, members, waiting)
    if found is not None:
        _, held, problems = found
        raise ensemble_refusal(run_dir / SHARED, held, problems)


def ensemble_refusal(shared: Path, held: Held, problems: list[tuple[str, Any, Any]]) -> Exception:
    """The refusal naming the ensemble's run folder (the one the user gave, above ``shared``), not the
    member's folder or the shared checkpoint that differs: ``held.where`` names that file."""
    return refusal(
        shared.parent, held, problems, moved_to=f"the previous/<time>/ of each member's folder and of {shared}"
    )


def _changed(shared: Path, members, where: Path, held, problems, sweep_cell: bool) -> EnsembleClaim:
    if not sweep_cell:
        raise ensemble_refusal(shared, held, problems)
    from experiments.training.folder import describe_changes

    _move_shared(shared, describe_changes(problems))
    moved = {d: Claim(moved_to=_move_member(d, shared), changed=problems) for d, _ in members if d.is_dir()}
    log.warning(
        "the configuration of the ensemble in %s changed (%s); retraining", shared.parent, describe_changes(problems)
    )
    return EnsembleClaim(members=moved)


def _move_member(folder: Path, shared: Path) -> Path | None:
    # under hydra/launcher=ensemble the shared folder (and the lock this process holds in it) lies inside
    # the first member's folder; it is moved aside on its own. A member's .hydra/ is this sweep's record of
    # its job, written by the launcher before the ensemble started (a seed=<s>/ folder has none).
    inside = shared.parent.resolve() == folder.resolve()
    return move_aside(folder, keep=(shared.name, ".hydra") if inside else (".hydra",))


def _move_shared(shared: Path, why: str) -> None:
    if shared.is_dir():
        moved = move_aside(shared)
        if moved is not None:
            log.info("%s: %s; its files moved to %s, the ensemble starts afresh", shared, why, moved)
