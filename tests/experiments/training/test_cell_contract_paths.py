"""The cell contract (experiments/training/cell_contract.py) over every path that makes runs: one table of cases,
each path through all of them, so a new sweeper or launcher added to ``PATHS`` cannot skip one.

Cases, after a first run into a folder: the same config again (skipped, nothing retrained), a changed setting
(a sweep cell retrained with its old files moved aside; a study, an adaptive sequence and ``run()`` refused in
one line naming the change), a changed search space or budget (a study refused; a run's raised
``trainer.max_steps`` continues it), a live writer of a cell (refused and named), a killed writer (its lock
taken over, its partial files removed, the cell finished).

Each path's first run is a process of its own (``python -m experiments.train``, end to end); the reruns of the
cases run the same entry in the test's process (``main()`` with its argv, or ``run()``), which tests the same
contract without a process start (about 10 CPU s of imports) for each of the table's 40-odd reruns.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from attnlab.run_folders import LOCK, PREVIOUS
from tests.helpers.env import ENV
from tests.helpers.studies import QUICK
from tests.helpers.warm import run_module

JOB_FOLDERS = "hydra.sweep.subdir=${hydra.job.num}"  # cell folders by job number: 0, 1, ...
CLAIM = {"name": "lr", "metric": "val/loss", "a": {"optim.lr": 0.01}, "b": {"optim.lr": 0.001}, "expect": "less"}


def _tuned_final(folder: Path) -> Path:
    """The final seed at the best configuration: folders named by their overrides, which a rerun keeps (job
    numbers do not: a rerun with its trials finished numbers its first final job 0)."""
    listed = [p for p in folder.glob("*/.hydra/overrides.yaml") if "trial.role=tuned" in p.read_text()]
    (found,) = [p.parent.parent for p in listed]
    return found


@dataclass
class PathUnderTest:
    name: str
    args: list[str]  # after ``python -m experiments.train`` (run(): its overrides)
    # the folder (under the sweep's, or run()'s run_dir) of a run that a rerun launches again, or how to find it
    cell: str | Callable[[Path], Path]
    study: bool = False  # a sequence with settings of its own: a change is refused, not retrained
    budget: list[str] = field(default_factory=lambda: ["trainer.max_steps=4"])  # a changed budget or space
    relaunches: bool = True  # whether a rerun with the same settings launches its cell again


PATHS = [
    PathUnderTest("grid", ["-m", "attention=soft,linear", JOB_FOLDERS], "0"),
    PathUnderTest(
        "optuna",
        ["-m", "hparams_search=optuna", "hydra.sweeper.n_trials=1", "hydra/sweeper/sampler=random", JOB_FOLDERS],
        "0",
        study=True,
        budget=["optim.lr=tag(log, interval(1e-3, 1e-2))"],
        relaunches=False,
    ),
    PathUnderTest(
        "tuned",
        ["-m", "hparams_search=tuned", "hydra.sweeper.n_trials=1", "hydra.sweeper.final_seeds=[1000]"],
        _tuned_final,  # launched again by every rerun
        study=True,
        budget=["optim.lr=tag(log, interval(1e-3, 1e-2))"],
    ),
    PathUnderTest(
        "adaptive",
        [
            "-m",
            "hydra/sweeper=adaptive",
            "optim.lr=0.01,0.001",
            "hydra.sweeper.first_round=2",
            "hydra.sweeper.budget=2",
            JOB_FOLDERS,
        ],  # fmt: skip
        "0",
        study=True,
        budget=["hydra.sweeper.budget=4"],
        relaunches=False,
    ),
    PathUnderTest("ensemble", ["-m", "hydra/launcher=ensemble", "seed=0,1", JOB_FOLDERS], "0"),
    PathUnderTest("run", [], "."),
]
CASES = ["same config", "changed setting", "changed space or budget", "live writer", "killed writer"]


def _command(path: PathUnderTest, folder: Path, *extra: str) -> list[str]:
    """The path's command line: [python, -c, script, run_dir, *overrides] for run(), else
    [python, -m, experiments.train, *arguments]."""
    if path.name == "run":
        script = "import sys; from experiments import run; print(run(sys.argv[2:], run_dir=sys.argv[1])['status'])"
        return [sys.executable, "-c", script, str(folder), *QUICK, *extra]
    command = [sys.executable, "-m", "experiments.train", *path.args, *QUICK, *extra, f"hydra.sweep.dir={folder}"]
    if path.name == "adaptive":
        claims = folder.parent / "claims.yaml"
        claims.write_text(json.dumps({"claims": [CLAIM]}))
        command.append(f"hydra.sweeper.claims_file={claims}")
    return command


def _launch(path: PathUnderTest, folder: Path, *extra: str) -> subprocess.CompletedProcess:
    command = _command(path, folder, *extra)
    if command[1] == "-m":  # `python -m experiments.train`, from the warm Python (tests.helpers.warm)
        return run_module(command[2], *command[3:], cwd=folder.parent, env=ENV, timeout=600)
    return subprocess.run(command, cwd=folder.parent, env=ENV, capture_output=True, text=True, timeout=600)


class InProcess:
    """Runs a path's command in the test's process, as ``_launch`` runs it in a new one: a CompletedProcess
    with the exit code (``main()``'s SystemExit; 1 for an exception ``run()`` raises, with its traceback on
    stderr, as Python prints it) and what the command printed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
        self.monkeypatch, self.capfd = monkeypatch, capfd

    def __call__(self, path: PathUnderTest, folder: Path, *extra: str) -> subprocess.CompletedProcess:
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.hydra_config import HydraConfig

        from experiments.training import cell_contract

        command = _command(path, folder, *extra)
        mp = self.monkeypatch
        mp.chdir(folder.parent)
        for key in ("WANDB_MODE", "WANDB_SILENT", "HYDRA_FULL_ERROR"):
            mp.setenv(key, ENV[key])
        # main() marks the process as ending after a stopped run; this one goes on to the next case
        mp.setitem(cell_contract._STOP, "hold", cell_contract._STOP["hold"])
        # what Hydra sets for its run, given back after it: the next launch and later tests read them
        root, hydra_cfg = logging.getLogger(), HydraConfig.instance().cfg
        handlers, level = root.handlers[:], root.level
        self.capfd.readouterr()
        code = 0
        try:
            if path.name == "run":
                from experiments import run

                print(run(command[4:], run_dir=command[3])["status"])
            else:
                from experiments.app.train import main

                mp.setattr(sys, "argv", ["experiments.train", *command[3:]])
                main()
        except SystemExit as stopped:
            code = stopped.code if isinstance(stopped.code, int) else int(stopped.code is not None)
        except Exception as err:  # noqa: BLE001 - a process would print it and exit 1
            print("".join(traceback.format_exception(err)), file=sys.stderr)
            code = 1
        finally:
            GlobalHydra.instance().clear()
            HydraConfig.instance().cfg = hydra_cfg
            root.handlers[:] = handlers
            root.setLevel(level)
        said = self.capfd.readouterr()
        return subprocess.CompletedProcess(command, code, said.out, said.err)


def _said(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_every_path_keeps_the_cell_contract(
    tmp_path: Path, path: PathUnderTest, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "out"
    first = _launch(path, folder)  # the path end to end, as a command of its own
    assert first.returncode == 0, _said(first)
    cell = path.cell(folder) if callable(path.cell) else folder / path.cell
    result = cell / "result.json"
    before = result.read_text()
    for case in CASES:
        check = CHECKS[case]
        check(InProcess(monkeypatch, capfd), path, folder, cell, result, before)
        before = result.read_text() if result.exists() else before


def _same_config(launch, path, folder, cell, result, before) -> None:
    proc = launch(path, folder)
    assert proc.returncode == 0, _said(proc)
    assert result.read_text() == before, "a completed run of the same config is skipped, not retrained"


def _changed_setting(launch, path, folder, cell, result, before) -> None:
    proc = launch(path, folder, "task.train_size=48")
    if path.study:
        assert proc.returncode == 2, _said(proc)
        assert "train_size" in proc.stderr or "another grid" in proc.stderr, _said(proc)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    elif path.name == "run":
        assert proc.returncode != 0 and "holds another computation" in proc.stderr, _said(proc)
        assert "task.train_size 64 → 48" in proc.stderr
    else:  # a sweep cell: retrained, its old files kept under previous/
        assert proc.returncode == 0, _said(proc)
        assert json.loads(result.read_text())["config"]["task.train_size"] == 48
        assert (cell / PREVIOUS).is_dir()
    if not path.study and path.name != "run":
        launch(path, folder)  # back to the table's config (moving the changed runs aside) for the next cases


def _changed_space_or_budget(launch, path, folder, cell, result, before) -> None:
    proc = launch(path, folder, *path.budget)
    if path.name == "adaptive":  # an anytime-valid sequence may be extended: a raised budget continues it
        assert proc.returncode == 0, _said(proc)
        said = _said(proc)
        assert "(4 seed pair(s))" in said and "results from earlier runs left as they were" in said, said
    elif path.study:
        assert proc.returncode == 2, _said(proc)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    else:  # a raised trainer.max_steps continues the same computation from its checkpoint
        assert proc.returncode == 0, _said(proc)
        done = json.loads(result.read_text())
        assert done["status"] == "completed" and done["cost"]["steps"] == 4


def _live_writer(launch, path, folder, cell, result, before) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        (cell / LOCK).write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname()}))
        result.unlink()  # the writer has not finished: a rerun would launch the cell
        proc = launch(path, folder, *path.budget if not path.study else ())
        if path.relaunches:
            assert f"process {holder.pid}" in _said(proc), _said(proc)
            assert proc.returncode != 0, "a cell another process writes did not complete here"
            assert not result.exists(), "the live writer's folder is not written"
        else:  # the study's runs are finished: nothing is launched, the folder stays the writer's
            assert proc.returncode == 0, _said(proc)
        assert (cell / LOCK).exists()
    finally:
        holder.kill()
        holder.wait()
    result.write_text(before)


def _killed_writer(launch, path, folder, cell, result, before) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (cell / LOCK).write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    partial = cell / ".result.json.c4t.tmp"
    partial.write_text("{")
    if path.relaunches:
        result.unlink()  # killed before writing its result
    proc = launch(path, folder, *path.budget if not path.study else ())
    assert proc.returncode == 0, _said(proc)
    if path.relaunches:
        assert json.loads(result.read_text())["status"] == "completed"
        assert not partial.exists() and not (cell / LOCK).exists()


CHECKS = {
    "same config": _same_config,
    "changed setting": _changed_setting,
    "changed space or budget": _changed_space_or_budget,
    "live writer": _live_writer,
    "killed writer": _killed_writer,
}


def test_the_table_covers_every_sweeper_and_launcher_attnlab_ships() -> None:
    """A sweeper or launcher added to conf/hydra/ without a row in ``PATHS`` fails here."""
    from tests.helpers.paths import CONF

    sweepers = {p.stem for p in (CONF / "hydra" / "sweeper").glob("*.yaml")}
    # slurm needs a cluster; its jobs run the grid's cells (tests/experiments/sweep/test_slurm.py)
    launchers = {p.stem for p in (CONF / "hydra" / "launcher").glob("*.yaml")} - {"slurm"}
    assert sweepers | launchers <= {p.name for p in PATHS}, sorted(sweepers | launchers - {p.name for p in PATHS})
    assert set(CASES) == set(CHECKS)
