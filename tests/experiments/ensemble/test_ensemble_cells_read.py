"""An ensemble's cell folder (``ensemble.seeds=N``: ``.hydra/``, the shared ``ensemble/`` folder and the members in
``seed=<s>/``) is read as what it is: neither a run nor a cell without a result. Its members are the runs, each
judged by the lock of the shared folder; the demo grid's report leaves nothing out; an ensemble stopped mid-fit
is reported as interrupted, member by member, never as a cell that lost its result."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from analysis.data.pending import cells_without_result
from attnlab.run_folders import LOCK
from tests.helpers.cli import ended_pid, train_cli
from tests.helpers.env import ENV
from tests.helpers.warm import run_module, start_module


def cell_folder(root: Path, members: dict[int, str], lock_pid: int | None) -> Path:
    """An ensemble cell as ``ensemble.seeds`` leaves it: members ``{seed: "result" | "started"}``, the shared
    folder's lock held by ``lock_pid`` (None: no lock)."""
    cell = root / "position=rope,seed=0"
    (cell / ".hydra").mkdir(parents=True)
    (cell / ".hydra" / "overrides.yaml").write_text("- position=rope\n- seed=0\n")
    (cell / "ensemble").mkdir()
    if lock_pid is not None:
        (cell / "ensemble" / LOCK).write_text(json.dumps({"pid": lock_pid, "host": os.uname().nodename}))
    for seed, state in members.items():
        member = cell / f"seed={seed}"
        member.mkdir()
        (member / "run_state.json").write_text(json.dumps({"run_id": f"r{seed}", "config_hash": "h"}))
        if state == "result":
            (member / "result.json").write_text("{}")
    return cell


def test_a_finished_ensemble_cell_leaves_nothing_out(tmp_path: Path) -> None:
    cell_folder(tmp_path, {0: "result", 1: "result", 2: "result"}, lock_pid=None)
    assert cells_without_result([tmp_path]) == []


def test_a_killed_ensembles_members_are_each_said_stopped_by_the_shared_lock(tmp_path: Path) -> None:
    pid = ended_pid()
    cell = cell_folder(tmp_path, {0: "result", 1: "started", 2: "started"}, lock_pid=pid)
    rows = cells_without_result([tmp_path])
    assert [r["source"] for r in rows] == [str(cell / "seed=1"), str(cell / "seed=2")]
    assert all(r["status"] == "no result" and f"process {pid} ended" in r["reason"] for r in rows)


def test_a_live_ensembles_members_are_running(tmp_path: Path) -> None:
    cell = cell_folder(tmp_path, {0: "started", 1: "started"}, lock_pid=os.getpid())
    rows = cells_without_result([tmp_path])
    assert [(r["source"], r["status"]) for r in rows] == [
        (str(cell / "seed=0"), "running"),
        (str(cell / "seed=1"), "running"),
    ]


def test_an_ensemble_stopped_before_its_members_started_is_one_row(tmp_path: Path) -> None:
    pid = ended_pid()
    cell = cell_folder(tmp_path, {}, lock_pid=pid)
    rows = cells_without_result([tmp_path])
    assert [(r["source"], r["status"]) for r in rows] == [(str(cell), "no result")]
    assert f"process {pid} ended" in rows[0]["reason"]


DEMO_TINY = [
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=1",
    "checkpoint_every_n_steps=2",
    "task.train_size=64",
    "task.val_size=16",
    "task.test_size=16",
    "task.batch_size=8",
    "model.d_model=16",
    "model.ffn_dim=32",
    "progress_bar=false",
    "logger=csv",
]


@pytest.mark.slow
def test_the_demo_grids_report_leaves_nothing_out(tmp_path: Path) -> None:
    sweep = tmp_path / "demo"
    train = train_cli(
        "-m",
        "experiment=demo",
        "trainer=cpu",
        *DEMO_TINY,
        f"hydra.sweep.dir={sweep}",
        env=ENV,
        cwd=tmp_path,
        timeout=900,
    )
    assert train.returncode == 0, train.stderr[-3000:]
    assert len(list(sweep.glob("*/seed=*/result.json"))) == 9  # 3 cells, each an ensemble of 3 seeds
    report = run_module(
        "analysis.report", str(sweep), "--out", str(tmp_path / "report"), cwd=tmp_path, env=ENV, timeout=900
    )
    assert report.returncode == 0, report.stderr[-3000:]
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Left out" not in text and "no result" not in text
    assert text.index("## Summary — copy") < 200  # the first screen is the summary


@pytest.mark.slow
def test_an_ensemble_stopped_mid_fit_is_reported_interrupted_not_lost(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    argv = ["task=copy", "ensemble.seeds=3", "trainer=cpu", *DEMO_TINY,
            "trainer.max_steps=100000", "trainer.val_check_interval=1000", f"hydra.run.dir={run_dir}"]  # fmt: skip
    # signalled mid-fit, long after its start-up: from the warm Python
    proc = start_module("experiments.train", *argv, cwd=tmp_path, env=ENV, stdout=Path(os.devnull))
    try:
        deadline = time.monotonic() + 300
        # mid-fit: the shared checkpoint is written every 2 steps, so a few have passed once it exists
        while not (run_dir / "ensemble" / "checkpoints" / "last.ckpt").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the ensemble ended before its first checkpoint"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr[-3000:]
    rows = cells_without_result([tmp_path])
    assert rows == []  # the cell folder is no run without a result: its members wrote theirs
    members = sorted(run_dir.glob("seed=*/result.json"))
    assert len(members) == 3
    for path in members:
        said = json.loads(path.read_text())
        assert said["status"] == "failed" and said["interrupted"] is True
        assert said["error"].startswith("interrupted by SIGTERM")
    report = run_module(
        "analysis.report", str(run_dir), "--out", str(tmp_path / "report"), cwd=tmp_path, env=ENV, timeout=900
    )
    assert report.returncode == 0, report.stderr[-3000:]
    left_out = (tmp_path / "report" / "report.md").read_text().split("## Left out", 1)[1].split("\n## ", 1)[0]
    assert "no result" not in left_out
    assert [line.split(": ", 1)[0] for line in left_out.splitlines() if "interrupted by SIGTERM" in line] == [
        f"- {path}" for path in members
    ]
