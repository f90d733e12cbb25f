"""What each run of the device check starts: its sections, their caps and their commands, composed from
the knobs of one pass (``Knobs``). Nothing here runs anything; ``run`` runs, ``--dry-run`` preflights."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

#: the quick grid as ``trainer=gpu`` runs it, quiet and from scratch
QUICK = ["experiment=quick", "trainer=gpu", "logger=none", "progress_bar=false", "resume=never"]


@dataclass(frozen=True)
class Knobs:
    """One pass's settings (``python -m experiments.device_check --help`` names each)."""

    work: Path  # where sections write (their logs, JSON and sweeps)
    deadline_s: int = 400  # the whole run: two runs and one machine start fit a 15-minute lease
    k: int = 4  # quick-grid cells at a time on the GPU
    grid_steps: tuple[int, ...] = (100, 1000)
    ensemble_seeds: int = 8
    ensemble_steps: int = 200


@dataclass(frozen=True)
class Command:
    """One process a section starts: ``argv`` after ``python -m``; ``kind`` says how a dry run checks it."""

    kind: str  # train (Hydra overrides) | bench | module (checked by the build_parser() of ``parser``)
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    #: the module whose ``build_parser()`` parses a ``module`` command (default: the module it runs)
    parser: str = ""

    def line(self) -> list[str]:
        return [sys.executable, "-m", *self.argv]


@dataclass(frozen=True)
class Section:
    name: str
    cap_s: int
    commands: tuple[Command, ...]


def train(*overrides: str, env: dict[str, str] | None = None) -> Command:
    return Command("train", ("experiments.train", "-m", *overrides), env or {})


def run_a(knobs: Knobs) -> list[Section]:
    def out(name: str) -> str:
        return str(knobs.work / "json" / f"{name}.json")

    mfu = ("experiments.bench", "mfu", "--device", "cuda", "--bf16")
    flex_check = ("experiments.flex_check", "--budget", "120", "--out", out("flex_check"))
    return [
        Section("env", 40, (Command("module", ("experiments.diagnostics.device_check.env", out("env"))),)),
        Section(
            "targets",
            160,
            (Command("bench", ("experiments.bench", "targets", "--device", "cuda", "--out", out("targets"))),),
        ),
        Section(
            "flexcheck",
            200,
            (Command("module", flex_check, {"TORCH_LOGS": "recompiles"}, parser="experiments.diagnostics.flex_check"),),
        ),
        Section("mfu_eager", 45, (Command("bench", (*mfu, "--out", out("mfu_eager"))),)),
        Section("mfu_compiled", 90, (Command("bench", (*mfu, "--compile", "--out", out("mfu_compiled"))),)),
        Section("probes", 120, (Command("module", ("experiments.diagnostics.device_check.probes", out("probes"))),)),
    ]


def run_b(knobs: Knobs) -> list[Section]:
    sections = [
        Section(
            "env",
            40,
            (Command("module", ("experiments.diagnostics.device_check.env", str(knobs.work / "json/env.json"))),),
        )
    ]
    parallel = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={knobs.k}", f"jobs_per_gpu={knobs.k}"]
    caps = {100: 90, 1000: 140}  # the 100-step grid first: a cut leaves it whole
    for steps in knobs.grid_steps:
        sweep = f"hydra.sweep.dir={knobs.work / f'grid{steps}'}"
        command = train(*QUICK, f"trainer.max_steps={steps}", *parallel, sweep, env={"TORCH_LOGS": "recompiles"})
        sections.append(Section(f"grid{steps}", caps.get(steps, 140), (command,)))
    seeds = ",".join(str(s) for s in range(knobs.ensemble_seeds))
    ensemble = (*QUICK, "attention=multihead", "position=sinusoidal", f"seed={seeds}")
    steps = f"trainer.max_steps={knobs.ensemble_steps}"
    sections.append(
        Section(
            "ensemble_batched",
            65,
            (train(*ensemble, steps, "hydra/launcher=ensemble", f"hydra.sweep.dir={knobs.work / 'ens_batched'}"),),
        )
    )
    sections.append(
        Section("ensemble_separate", 75, (train(*ensemble, steps, f"hydra.sweep.dir={knobs.work / 'ens_sep'}"),))
    )
    return sections


RUNS = {"A": run_a, "B": run_b}


def sections_of(run: str, knobs: Knobs) -> list[Section]:
    if run not in RUNS:
        raise ValueError(f"run={run!r} is unknown; choose one of {sorted(RUNS)}")
    return RUNS[run](knobs)
