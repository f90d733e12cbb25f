"""An ensemble's folders are guarded as a single run's (experiments/ensemble/folder.py): another computation is
refused before any work (or, as a sweep cell, retrained with the old files moved aside), one process writes
an ensemble at a time, its train_seconds covers every segment of a resumed fit, the Trainer's stop keys
end it as they end a single run, and each member's flex kernel options are chosen on the fit's device as a
single run's are at fit start."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import pytest
import torch

from attnlab.run_folders import LOCK, PREVIOUS
from experiments.config.spec import build_spec
from experiments.ensemble import train_ensemble
from experiments.ensemble.members import SHARED
from experiments.training.folder import RunFolderError
from experiments.training.lock import FolderBusyError
from experiments.training.single_run import train
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY, compose
from tests.helpers.env import environment

BASE = [*TINY, "trainer.max_steps=4", "checkpoint_every_n_steps=2", "model.dropout=0.0"]


def ensemble(overrides: list[str], folder: Path, seeds: int = 2, **kwargs) -> list[dict]:
    overrides = [*overrides, f"ensemble.seeds={seeds}"]
    return train_ensemble(build_spec(compose(overrides)), folder, overrides, **kwargs)


def cli(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    return train_cli(*overrides, f"hydra.run.dir={run_dir}", env=environment(OMP_NUM_THREADS="1"), timeout=120)


@pytest.mark.parametrize("first_ended", ["completed", "killed"])
def test_a_changed_attention_on_an_ensemble_folder_is_refused_before_any_work(tmp_path: Path, first_ended: str) -> None:
    run = tmp_path / "ens"
    killed = ["fail_at_step=3"] if first_ended == "killed" else []
    first = ensemble([*BASE, *killed], run)
    assert {m["status"] for m in first} == ({"completed"} if not killed else {"failed"})
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != LOCK}
    with pytest.raises(RunFolderError, match="attention multihead → local") as refused:
        ensemble([*BASE, "attention=local"], run)
    assert "resume=never" in str(refused.value) and "\n" not in str(refused.value)
    # named by the folder the user gave (the held file in brackets), not by a member's seed=<s>/ folder
    assert str(refused.value).startswith(f"{run} holds another computation ("), refused.value
    # nothing was written: the members' results and the shared checkpoint are the old computation's
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != LOCK} == before


@pytest.mark.slow
def test_the_command_line_refuses_a_changed_ensemble_in_one_line_with_exit_2(tmp_path: Path) -> None:
    run = tmp_path / "ens"
    ensemble(BASE, run)
    (run / ".hydra").mkdir()
    (run / ".hydra" / "config.yaml").write_text("the old run's config\n")  # as its Hydra run wrote it
    done = cli(run, *BASE, "ensemble.seeds=2", "attention=local", "logger=none")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert (
        lines[0].startswith(f"attnlab: {run} holds another computation (") and "attention multihead → local" in lines[0]
    )
    # refused in the preflight, before Hydra wrote the refused run's config over the old one
    assert (run / ".hydra" / "config.yaml").read_text() == "the old run's config\n"


@pytest.mark.slow
def test_a_changed_sweep_cell_retrains_with_the_old_files_moved_aside(tmp_path: Path) -> None:
    run = tmp_path / "ens"
    old = ensemble(BASE, run)
    # hydra/launcher=ensemble writes each member job's .hydra/ record before the ensemble starts: it stays
    (run / "seed=1" / ".hydra").mkdir()
    (run / "seed=1" / ".hydra" / "overrides.yaml").write_text("- optim.lr=0.01\n")
    new = ensemble([*BASE, "optim.lr=0.01"], run, sweep_cell=True)
    assert (run / "seed=1" / ".hydra" / "overrides.yaml").read_text() == "- optim.lr=0.01\n"
    for before, after, seed in zip(old, new, (0, 1)):
        assert after["status"] == "completed" and after["config"]["optim.lr"] == 0.01
        assert after["previous_run"]["changed"] == {"optim.lr": [before["config"]["optim.lr"], 0.01]}
        kept = run / f"seed={seed}" / after["previous_run"]["moved_to"] / "result.json"
        assert json.loads(kept.read_text())["run_id"] == before["run_id"]  # moved, never deleted
    assert any((run / SHARED / PREVIOUS).rglob("last.ckpt"))


@pytest.mark.slow
def test_resume_never_moves_an_ensemble_aside_and_starts_afresh(tmp_path: Path) -> None:
    run = tmp_path / "ens"
    ensemble([*BASE, "fail_at_step=3"], run)
    fresh = ensemble([*BASE, "resume=never"], run)
    assert [m["cost"]["segments"] for m in fresh] == [1, 1]
    assert [m["status"] for m in fresh] == ["completed"] * 2 and fresh[0]["previous_run"]["moved_to"]


@pytest.mark.slow
def test_a_second_process_on_an_ensemble_being_written_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "ens"
    (run / SHARED).mkdir(parents=True)
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # a live holder
    try:
        (run / SHARED / LOCK).write_text(json.dumps({"pid": writer.pid, "host": socket.gethostname()}))
        with pytest.raises(FolderBusyError, match=f"being written by process {writer.pid}") as refused:
            ensemble(BASE, run)
        assert str(refused.value).startswith(f"{run} is being written by"), refused.value  # not {run}/ensemble
        assert not (run / "seed=0" / "result.json").exists()
        done = cli(run, *BASE, "ensemble.seeds=2", "logger=none")
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and f"process {writer.pid}" in lines[0], done.stderr
        assert lines[0].startswith(f"attnlab: {run} is being written by"), lines[0]
    finally:
        writer.kill()
        writer.wait()
    members = ensemble(BASE, run)  # the holder is gone: its lock is taken over
    assert [m["status"] for m in members] == ["completed"] * 2
    assert not (run / SHARED / LOCK).exists()


class SlowSteps(L.Callback):
    """Sleeps after each training step: a segment that takes a known least time."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_batch_end(self, *args) -> None:
        time.sleep(self.seconds)


@pytest.mark.slow
def test_a_killed_and_resumed_ensemble_counts_the_time_of_both_segments(tmp_path: Path) -> None:
    run = tmp_path / "ens"
    ensemble([*BASE, "trainer.max_steps=6", "fail_at_step=5"], run, callbacks=[SlowSteps(0.5)])
    state = torch.load(run / SHARED / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert state["global_step"] == 4
    first_segment = 4 * 0.5  # the slept time of the 4 steps before the checkpoint, at least
    began = time.perf_counter()
    resumed = ensemble([*BASE, "trainer.max_steps=6"], run)
    second_wall = time.perf_counter() - began
    for m in resumed:
        assert m["status"] == "completed" and m["cost"]["segments"] == 2
        assert m["ensemble"]["train_seconds"] >= first_segment
        # the first segment up to its checkpoint, plus no more than this whole second call
        assert m["ensemble"]["train_seconds"] <= state["callbacks"]["attnlab.RunClock"]["seconds"] + second_wall
        assert m["cost"]["train_seconds"] == pytest.approx(m["ensemble"]["train_seconds"] / 2)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("limit", "reason"),
    [("+trainer.max_epochs=1", "max_epochs"), ("trainer.fast_dev_run=true", "fast_dev_run")],
)
def test_the_trainers_stop_keys_end_an_ensemble_as_they_end_a_single_run(
    tmp_path: Path, limit: str, reason: str
) -> None:
    overrides = [*TINY, "trainer.max_steps=1000", "task.train_size=48", limit]
    members = ensemble(overrides, tmp_path / "ens")
    alone = train(build_spec(compose([*overrides, "seed=0"])), tmp_path / "alone", overrides)  # the reference
    assert alone["stop"]["reason"] == reason and alone["stop"]["step"] < 1000
    for m in members:
        assert m["status"] == "completed" and m["stop"] == alone["stop"]
        assert m["cost"]["steps"] == alone["cost"]["steps"]


@pytest.mark.slow
def test_each_member_chooses_its_kernel_options_on_the_fits_device_and_records_them(
    tmp_path: Path, monkeypatch
) -> None:
    from experiments.training.module import TransformerModule

    asked = []

    def choose(self, device: torch.device, precision: str) -> None:  # records what a CUDA fit would choose for
        asked.append((device.type, precision))
        self.flex_options = {"device": device.type, "precision": precision}

    monkeypatch.setattr(TransformerModule, "choose_flex_options", choose)
    members = ensemble([*BASE, "trainer.precision=bf16-mixed"], tmp_path / "ens")
    assert [m["kernel_options"] for m in members] == [{"device": "cpu", "precision": "bf16-mixed"}] * 2
    assert asked == [("cpu", "bf16-mixed")] * 2


@pytest.mark.parametrize("key", ["ckpt_path", "init_from"])
def test_a_checkpoint_setting_an_ensemble_would_ignore_is_refused_in_one_line(tmp_path: Path, key: str) -> None:
    from experiments.config.checks import check_config
    from experiments.config.errors import ConfigError

    with pytest.raises(ConfigError, match=f"^{key}=x.ckpt is not taken by an ensemble \\(ensemble.seeds=2\\); "):
        check_config(compose([*BASE, "ensemble.seeds=2", f"{key}=x.ckpt"]))
    check_config(compose([*BASE, f"{key}=x.ckpt"]))  # a single run takes it


def test_a_resumed_ensemble_reads_its_shared_checkpoint_once(tmp_path: Path, monkeypatch) -> None:
    from experiments.ensemble.folder import claim_ensemble
    from experiments.ensemble.members import member_dirs, member_seeds, member_spec
    from experiments.training.folder import CHECKPOINT

    run = tmp_path / "ens"
    ensemble([*BASE, "fail_at_step=3"], run)  # killed after the checkpoint of step 2
    ckpt = run / SHARED / CHECKPOINT
    spec = build_spec(compose([*BASE, "ensemble.seeds=2"]))
    seeds = member_seeds(spec)
    members = [(d, member_spec(spec, s).run.flat_config()) for s, d in zip(seeds, member_dirs(spec, run, seeds))]
    real, reads = torch.load, []

    def counted(f, *args, **kwargs):
        reads.append((Path(f), kwargs.get("weights_only")))
        return real(f, *args, **kwargs)

    monkeypatch.setattr(torch, "load", counted)
    claim = claim_ensemble(run / SHARED, members, seeds, resume=spec.run.resume, sweep_cell=False)
    # the same decision as ever (resume the shared checkpoint), from one read of it, as data only
    assert claim.resume_from == str(ckpt)
    assert [r for r in reads if r[0] == ckpt] == [(ckpt, True)]
