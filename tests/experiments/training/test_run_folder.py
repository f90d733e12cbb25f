"""A run folder belongs to one computation (experiments/training/folder.py): a checkpoint is resumed only by a run
that computes the same thing; another run is refused before any work (a single run), or retrains with the
old files moved aside (a sweep cell). ``ckpt_path`` resumes, ``init_from`` warm-starts; nothing is deleted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from experiments.config.spec import build_spec
from experiments.sweep.grid import cell_line
from experiments.training.folder import RunFolderError
from experiments.training.single_run import train
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY, compose
from tests.helpers.env import environment

# a few steps with a checkpoint every 2, so that a resumed run continues from a real step
BASE = [*TINY, "trainer.max_steps=4", "trainer.val_check_interval=4", "checkpoint_every_n_steps=2", "seed=1"]


def run(run_dir: Path, *extra: str, sweep_cell: bool = False) -> dict:
    overrides = [*BASE, *extra]
    return train(build_spec(compose(overrides)), run_dir, overrides, sweep_cell=sweep_cell)


def folder_state(run_dir: Path) -> dict[str, bytes]:
    """Every file of the folder and its bytes (train.log aside: a refused run's Hydra would append to it)."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def checkpoint_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]


def preset(folder: Path, lr: float) -> list[str]:
    """A user's own experiment preset (as ``--config-dir``) that sets the learning rate; editing it between
    two runs is the everyday way a folder's configuration changes unseen."""
    (folder / "experiment").mkdir(parents=True, exist_ok=True)
    (folder / "experiment" / "mine.yaml").write_text(f"# @package _global_\noptim:\n  lr: {lr}\n")
    return [f"hydra.searchpath=[file://{folder}]", "experiment=mine"]


# (the first run's extra overrides, the second's, what the refusal must name); tmp is a folder for a preset
CHANGES = {
    "attention": (lambda tmp: [], lambda tmp: ["attention=local"], "attention multihead → local"),
    "optim value": (lambda tmp: [], lambda tmp: ["optim.lr=0.01"], "optim.lr 0.001 → 0.01"),
    "edited preset": (lambda tmp: preset(tmp, 0.003), lambda tmp: preset(tmp, 0.03), "optim.lr 0.003 → 0.03"),
}


@pytest.mark.parametrize("first, second, expected", CHANGES.values(), ids=CHANGES.keys())
def test_a_changed_computation_is_refused_before_any_work(tmp_path: Path, first, second, expected) -> None:
    run_dir = tmp_path / "run"
    assert run(run_dir, *first(tmp_path / "conf"))["status"] == "completed"
    before = folder_state(run_dir)
    with pytest.raises(RunFolderError) as refused:
        run(run_dir, *second(tmp_path / "conf"))
    message = str(refused.value)
    assert "\n" not in message and expected in message, message
    assert "resume=never" in message and "another folder" in message
    assert folder_state(run_dir) == before  # nothing written, nothing moved


def cli(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    """``python -m experiments.train`` on ``run_dir`` as its own process (stderr kept)."""
    return train_cli(*BASE, *overrides, f"hydra.run.dir={run_dir}", env=environment(OMP_NUM_THREADS="1"))


@pytest.mark.slow
def test_the_command_line_refuses_in_one_line_with_exit_2_and_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    assert cli(tmp_path).returncode == 0
    before = folder_state(tmp_path)
    refused = cli(tmp_path, "attention=local", "optim.lr=0.01")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert lines[0].startswith(f"attnlab: {tmp_path} holds another computation"), lines[0]
    assert "attention multihead → local" in lines[0] and "optim.lr 0.001 → 0.01" in lines[0]
    # refused before Hydra wrote anything: the folder's .hydra/ still records the run that trained
    assert folder_state(tmp_path) == before


def test_raising_max_steps_continues_the_same_computation(tmp_path: Path) -> None:
    """The budget may grow on resume: 4 steps, then 8 in the same folder, equal 8 steps straight."""
    run(tmp_path / "a")
    resumed = run(tmp_path / "a", "trainer.max_steps=8")
    straight = run(tmp_path / "b", "trainer.max_steps=8")
    assert resumed["cost"]["steps"] == 8 and resumed["config"]["trainer.max_steps"] == 8
    assert resumed["metrics"] == straight["metrics"]
    assert "previous_run" not in resumed


def test_max_steps_is_part_of_the_computation_under_a_cosine_schedule_or_below_the_trained_step(
    tmp_path: Path,
) -> None:
    run(tmp_path, "optim.schedule=cosine")
    # cosine's horizon is max_steps: every step's learning rate would differ from the run that trained
    with pytest.raises(RunFolderError, match="trainer.max_steps 4 → 8"):
        run(tmp_path, "optim.schedule=cosine", "trainer.max_steps=8")
    # a result must never claim fewer steps than its weights trained
    with pytest.raises(RunFolderError, match="trainer.max_steps 4 trained → 2"):
        run(tmp_path, "optim.schedule=cosine", "trainer.max_steps=2")


def test_resume_never_moves_the_old_run_aside_and_trains_afresh(tmp_path: Path) -> None:
    from analysis.data.collect import find_results

    run_dir = tmp_path / "run"
    old = run(run_dir)
    before = folder_state(run_dir)
    new = run(run_dir, "attention=local", "resume=never")
    assert new["status"] == "completed" and new["config"]["attention.name"] == "local"
    moved = run_dir / new["previous_run"]["moved_to"]
    assert moved.parent == run_dir / "previous"
    assert folder_state(moved) == before  # every old file, byte for byte; nothing deleted
    assert new["run_id"] != old["run_id"]
    # what trained is what the result records: the same metrics as that config in a fresh folder
    assert new["metrics"] == run(tmp_path / "fresh", "attention=local")["metrics"]
    # the report reads the folder's run, not the one kept under previous/
    assert find_results([run_dir]) == [(run_dir / "result.json").resolve()]


def test_a_sweep_cell_whose_configuration_changed_retrains_and_the_summary_lists_it(tmp_path: Path) -> None:
    cell = tmp_path / "cell"
    run(cell, sweep_cell=True)
    retrained = run(cell, "optim.lr=0.01", sweep_cell=True)
    assert retrained["status"] == "completed" and retrained["config"]["optim.lr"] == 0.01
    assert retrained["previous_run"]["changed"] == {"optim.lr": [0.001, 0.01]}
    assert (cell / retrained["previous_run"]["moved_to"] / "checkpoints" / "last.ckpt").exists()
    # trained afresh with what it records, not resumed from the old weights
    assert retrained["metrics"] == run(tmp_path / "fresh", "optim.lr=0.01")["metrics"]
    line = cell_line(retrained, "completed", "val/loss", cell)
    assert "retrained: optim.lr 0.001 → 0.01" in line and "previous/" in line


def test_ckpt_path_last_resumes_the_same_computation_and_refuses_another(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(RunFolderError, match="ckpt_path=last: .* has no checkpoints/last.ckpt"):
        run(run_dir, "ckpt_path=last")
    failed = run(run_dir, "fail_at_step=3")  # stopped after its checkpoint of step 2
    assert failed["status"] == "failed"
    resumed = run(run_dir, "ckpt_path=last")
    assert resumed["status"] == "completed" and resumed["cost"]["steps"] == 4
    assert resumed["metrics"] == run(tmp_path / "straight")["metrics"]
    # another folder's checkpoint resumes here only for the same computation
    with pytest.raises(RunFolderError, match="holds another computation: attention multihead → local"):
        run(tmp_path / "other", "attention=local", f"ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'}")
    not_a_checkpoint = tmp_path / "notes.ckpt"
    not_a_checkpoint.write_text("hello")
    with pytest.raises(RunFolderError, match="is not a checkpoint"):
        run(tmp_path / "other", f"ckpt_path={not_a_checkpoint}")


def test_init_from_starts_new_training_from_the_weights_and_is_recorded(tmp_path: Path) -> None:
    source = tmp_path / "source"
    run(source)
    ckpt = source / "checkpoints" / "last.ckpt"
    # a learning rate too small to move a weight: the warm-started run ends where the source ended
    warm = run(tmp_path / "warm", f"init_from={ckpt}", "optim.lr=1e-12", "trainer.max_steps=2")
    assert warm["status"] == "completed", warm["error"]
    assert warm["init_from"]["path"] == str(ckpt.resolve()) and warm["init_from"]["step"] == 4
    state = torch.load(tmp_path / "warm" / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] == 2  # step 0 and a fresh optimiser: 2 steps of its own, not 4 + 2
    assert all(s["step"] == 2 for s in state["optimizer_states"][0]["state"].values())
    theirs = checkpoint_weights(source)
    assert all(torch.allclose(w, theirs[k], atol=1e-6) for k, w in state["state_dict"].items())
    wrong = run(tmp_path / "wrong", f"init_from={ckpt}", "model.d_model=32")
    assert wrong["status"] == "failed" and wrong.get("user_error"), wrong["error"]
    assert "init_from=" in wrong["error"] and "has shape" in wrong["error"]
    with pytest.raises(RunFolderError, match="init_from=.*is not a file"):
        run(tmp_path / "missing", f"init_from={tmp_path / 'nope.ckpt'}")


def test_resume_takes_auto_or_never(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match=r"resume=maybe is not allowed; choose one of \['auto', 'never'\]"):
        run(tmp_path, "resume=maybe")


class Pickled:
    """An object whose unpickling creates a file: the sign that loading a checkpoint ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_the_ensemble_reads_its_checkpoint_as_data_only(tmp_path: Path) -> None:
    from experiments.ensemble.folder import read_checkpoint, seeds_of

    def checkpoint_seeds(ckpt: Path) -> list[int] | None:  # as the ensemble reads them: data only
        return seeds_of(read_checkpoint(ckpt, None))

    plain = tmp_path / "plain.ckpt"
    torch.save(
        {"state_dict": {}, "global_step": 2, "attnlab_ensemble": {"seeds": [0, 1], "torch_rng": torch.ones(2)}}, plain
    )
    assert checkpoint_seeds(plain) == [0, 1]
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.ckpt"
    torch.save({"attnlab_ensemble": {"seeds": [0, 1]}, "hook": Pickled(marker)}, evil)
    with pytest.raises(Exception, match="(?i)weights_only|unsupported|global"):
        checkpoint_seeds(evil)
    assert not marker.exists()


def test_a_named_checkpoint_that_runs_code_is_refused_without_running_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "global_step": 2, "hook": Pickled(marker)}, evil)
    for key in ("ckpt_path", "init_from"):
        with pytest.raises(RunFolderError, match=f"{key}={evil} is not a checkpoint torch can read as data"):
            run(tmp_path / "run", f"{key}={evil}")
    assert not marker.exists()


@pytest.mark.slow
def test_a_multirun_retrains_a_changed_cell_and_its_closing_line_says_so(tmp_path: Path) -> None:
    """A real sweep: the learning rate is left out of the cell's folder name, as an edited preset's value is,
    so the second sweep finds the first one's cell with another configuration."""
    env = environment(OMP_NUM_THREADS="1")
    same_folder = "hydra.job.config.override_dirname.exclude_keys=[optim.lr]"

    def sweep(lr: str) -> subprocess.CompletedProcess:
        return train_cli("-m", *BASE, f"optim.lr={lr}", same_folder, f"hydra.sweep.dir={tmp_path}", env=env)

    assert sweep("0.001").returncode == 0
    (cell,) = [p.parent for p in tmp_path.glob("*/result.json")]
    second = sweep("0.01")
    assert second.returncode == 0, second.stderr
    closing = [line for line in second.stdout.splitlines() if line.startswith("completed") and str(cell) in line]
    assert len(closing) == 1 and "retrained: optim.lr 0.001 → 0.01 (old files in previous/" in closing[0], closing
    (moved,) = (cell / "previous").iterdir()
    assert (moved / "checkpoints" / "last.ckpt").exists() and (moved / "result.json").exists()
    assert json.loads((cell / "result.json").read_text())["config"]["optim.lr"] == 0.01
