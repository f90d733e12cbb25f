"""One writer per run folder (experiments/training/lock.py): a second live process is refused in one line, a lock
left by a killed process is taken over, and the lock is gone after every ending."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from attnlab.run_folders import LOCK
from experiments.config.spec import build_spec
from experiments.training.lock import FolderBusyError, one_writer
from experiments.training.single_run import train
from tests.helpers.cli import ended_pid, start_train
from tests.helpers.config import TINY, compose
from tests.helpers.env import environment


def cli(run_dir: Path, *overrides: str) -> subprocess.Popen:
    return start_train(*TINY, *overrides, f"hydra.run.dir={run_dir}", env=environment(OMP_NUM_THREADS="1"))


@pytest.mark.slow
def test_a_second_process_on_a_folder_being_written_is_refused_in_one_line(tmp_path: Path) -> None:
    first = cli(tmp_path, "trainer.max_steps=100000", "trainer.val_check_interval=100000")
    try:
        deadline = time.time() + 120
        while not (tmp_path / LOCK).exists() and time.time() < deadline and first.poll() is None:
            time.sleep(0.05)
        assert json.loads((tmp_path / LOCK).read_text()) == {"pid": first.pid, "host": socket.gethostname()}
        second = cli(tmp_path)
        assert second.wait(timeout=120) == 2
        lines = second.stderr.read().strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0] == (
            f"attnlab: {tmp_path} is being written by process {first.pid} on {socket.gethostname()}; one process "
            "writes a run folder at a time: wait for it, or run in another folder"
        )
        assert first.poll() is None  # the writer goes on
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=120)
    assert not (tmp_path / LOCK).exists()  # released on Ctrl-C too


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_line(tmp_path: Path, capsys) -> None:
    dead = ended_pid()
    (tmp_path / LOCK).write_text(json.dumps({"pid": dead, "host": socket.gethostname()}))
    overrides = [*TINY, "trainer.max_steps=2"]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "completed"
    said = capsys.readouterr().err.strip().splitlines()
    host = socket.gethostname()
    assert f"attnlab: taking over the lock of {tmp_path}: its process {dead} on {host} is no longer running" in said
    assert not (tmp_path / LOCK).exists()


def test_the_lock_is_released_on_an_error_and_refuses_a_live_holder_on_another_host(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with one_writer(tmp_path):
            assert json.loads((tmp_path / LOCK).read_text())["pid"] == os.getpid()
            raise RuntimeError("training failed")
    assert not (tmp_path / LOCK).exists()
    # a pid on another machine cannot be checked from here: refused, naming how to clear it
    (tmp_path / LOCK).write_text(json.dumps({"pid": ended_pid(), "host": "elsewhere"}))
    with pytest.raises(FolderBusyError, match=f"on elsewhere; if it has ended, remove {tmp_path / LOCK}"):
        with one_writer(tmp_path):
            pass
    assert json.loads((tmp_path / LOCK).read_text())["host"] == "elsewhere"  # not ours to remove
