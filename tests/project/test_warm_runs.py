"""A command the tests fork from a warm Python (``tests/helpers/warm.py``) is the command a user runs.

What a fresh ``python -m`` gives is the reference: its exit code, output, working folder, environment and
import path, the interpreter's end (threads waited for, ``atexit`` run, output flushed), and a training
run's result, metrics and weights.
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import warm, warm_server
from tests.helpers.config import TINY
from tests.helpers.env import ENV, ONE_THREAD_ENV, environment
from tests.helpers.wandb_runs import offline_runs
from tests.helpers.warm import Started, run_module, start_module

# a module of the test's own, importable because `python -m` puts the working folder first on the path
PROBE = """
import atexit, os, sys, threading, time

def later():
    time.sleep(0.2)
    print("thread done", flush=True)

atexit.register(lambda: print("atexit ran"))
what = sys.argv[1]
print("argv", sys.argv[1:], "cwd", os.getcwd(), "path0", sys.path[0], "X", os.environ.get("PROBE_X"))
print("partial line without flush", end="")
print("to stderr", file=sys.stderr)
if what == "thread":
    threading.Thread(target=later).start()
elif what == "exit3":
    sys.exit(3)
elif what == "message":
    sys.exit("stopped: a message")
elif what == "raise":
    1 / 0
elif what == "sleep":
    time.sleep(60)
elif what == "wait":  # started: says so, then waits for a signal
    open("ready", "w").close()
    time.sleep(60)
"""


def both(tmp_path: Path, *args: str, env: dict[str, str] = ENV) -> tuple[subprocess.CompletedProcess, ...]:
    """(fresh, warm) runs of ``python -m probe *args`` in ``tmp_path``."""
    (tmp_path / "probe.py").write_text(PROBE)
    fresh = subprocess.run(
        [sys.executable, "-m", "probe", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    return fresh, run_module("probe", *args, cwd=tmp_path, env=env, timeout=60)


@pytest.mark.parametrize("what", ["plain", "thread", "exit3", "message"])
def test_a_warm_command_ends_as_a_fresh_one(tmp_path: Path, what: str) -> None:
    fresh, warm = both(tmp_path, what, env={**ENV, "PROBE_X": "seen"})
    assert (warm.returncode, warm.stdout, warm.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert "X seen" in fresh.stdout and f"cwd {tmp_path} path0 {tmp_path}" in fresh.stdout
    assert fresh.stdout.endswith("atexit ran\n")
    assert fresh.returncode == {"exit3": 3, "message": 1}.get(what, 0)


def test_an_exception_ends_a_warm_command_with_1_and_its_traceback(tmp_path: Path) -> None:
    fresh, warm = both(tmp_path, "raise")
    assert warm.returncode == fresh.returncode == 1
    assert warm.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1] == "ZeroDivisionError: division by zero"
    assert warm.stdout == fresh.stdout


def test_a_warm_command_past_its_timeout_is_killed_and_raises(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    with pytest.raises(subprocess.TimeoutExpired):
        run_module("probe", "sleep", cwd=tmp_path, env=ENV, timeout=1)
    # the server answers the next command: the killed child was reaped
    assert run_module("probe", "plain", cwd=tmp_path, env=ENV, timeout=60).returncode == 0


def test_commands_differing_only_in_run_time_variables_share_a_server_and_each_sees_its_own(tmp_path: Path) -> None:
    printing = "import os\nprint(os.environ['WANDB_MODE'], os.environ['HYDRA_FULL_ERROR'])\n"
    (tmp_path / "envprobe.py").write_text(printing)
    quiet = {**ENV, "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": "0"}
    loud = {**ENV, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "1"}
    assert warm._server(quiet) is warm._server(loud)  # one server: the imports it holds read neither
    for env, printed in ((quiet, "offline 0\n"), (loud, "disabled 1\n")):
        assert run_module("envprobe", cwd=tmp_path, env=env, timeout=60).stdout == printed
    # torch sizes its thread pool from OMP_NUM_THREADS as it is imported: a server of its own
    assert warm._server(ONE_THREAD_ENV) is not warm._server(quiet)


def test_a_commands_environment_is_the_test_process_as_it_started(monkeypatch) -> None:
    # an in-process run's seed_everything leaves PL_GLOBAL_SEED behind; a user's shell would not pass it on
    monkeypatch.setenv("PL_GLOBAL_SEED", "7")
    monkeypatch.setenv("WANDB_SERVICE", "left-behind")
    env = environment(OMP_NUM_THREADS="1")
    assert "PL_GLOBAL_SEED" not in env and "WANDB_SERVICE" not in env
    assert env == ONE_THREAD_ENV  # so both name one warm server


def test_a_server_whose_imports_make_a_temporary_folder_refuses_to_serve(tmp_path: Path, monkeypatch) -> None:
    # W&B's import makes two: the first child to end would delete them under every later child's runs
    (tmp_path / "planted_tmp.py").write_text("import tempfile\nHELD = tempfile.TemporaryDirectory('planted')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(warm_server, "PRELOAD", ("planted_tmp",))
    problem = warm_server.preload()
    assert problem is not None and "planted" in problem and "temporary folders" in problem
    sys.modules.pop("planted_tmp").HELD.cleanup()


def signalled(proc, folder: Path, sig: int) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a started probe sent ``sig`` once it said it is ready."""
    deadline = time.monotonic() + 60
    while not (folder / "ready").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the probe ended before it was ready"
        time.sleep(0.02)
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.1)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_command_started_in_the_background_takes_a_signal_as_a_fresh_one(tmp_path: Path, sig: int) -> None:
    fresh_dir, warm_dir = tmp_path / "fresh", tmp_path / "warm"
    for folder in (fresh_dir, warm_dir):
        folder.mkdir()
        (folder / "probe.py").write_text(PROBE)
    fresh = subprocess.Popen(
        [sys.executable, "-m", "probe", "wait"], cwd=fresh_dir, env=ENV, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    warm = start_module("probe", "wait", cwd=warm_dir, env=ENV)
    assert isinstance(warm, Started), "the server was idle: the command is forked from it"
    (code, out, err), (fresh_code, fresh_out, fresh_err) = (
        signalled(warm, warm_dir, sig),
        signalled(fresh, fresh_dir, sig),
    )
    assert code == fresh_code == -sig  # Python ends an uncaught KeyboardInterrupt by SIGINT, as a shell expects
    assert out.replace(str(warm_dir), "DIR") == fresh_out.replace(str(fresh_dir), "DIR")
    assert err.splitlines()[-1:] == fresh_err.splitlines()[-1:]  # KeyboardInterrupt's traceback ends alike
    warm.send_signal(signal.SIGKILL)  # an ended command is left alone
    assert warm.poll() == code


def test_a_command_run_while_another_runs_in_the_background_starts_afresh(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    background = start_module("probe", "wait", cwd=tmp_path, env=ENV)
    assert isinstance(background, Started)
    try:
        beside = run_module("probe", "exit3", cwd=tmp_path, env=ENV, timeout=60)  # its server is busy
        assert beside.returncode == 3 and "to stderr" in beside.stderr
        assert background.poll() is None
    finally:
        background.kill()
    assert background.wait(timeout=60) == -signal.SIGKILL
    # the server is free again: the next command is forked from it
    assert run_module("probe", "exit3", cwd=tmp_path, env=ENV, timeout=60).returncode == 3
    again = start_module("probe", "exit3", cwd=tmp_path, env=ENV)
    assert isinstance(again, Started) and again.wait(timeout=60) == 3


@pytest.mark.slow
def test_warm_runs_one_after_another_each_log_their_wandb_run(tmp_path: Path) -> None:
    # each child imports W&B itself, so one child's end leaves the next one's media folders in place
    ids = []
    for name in ("first", "second"):
        done = run_module(
            "experiments.train", *TINY, "num_threads=1", "logger=wandb", f"hydra.run.dir={tmp_path / name}",
            cwd=tmp_path, env=ONE_THREAD_ENV,
        )  # fmt: skip
        assert done.returncode == 0 and "W&B could not" not in done.stdout + done.stderr, done.stderr[-2000:]
        ids.append(json.loads((tmp_path / name / "result.json").read_text())["run_id"])
    assert sorted(offline_runs(tmp_path)) == sorted(ids)


def metrics_rows(run_dir: Path) -> list[dict[str, str]]:
    """metrics.csv rows without the time columns."""
    (path,) = run_dir.rglob("metrics.csv")
    with path.open() as f:
        return [{k: v for k, v in row.items() if "time" not in k and "second" not in k} for row in csv.DictReader(f)]


# a result's fields that differ between any two runs: when, how fast, the folder and the run's id
VARYING = {"started_at", "finished_at", "run_dir", "run_id", "command", "cost"}
MEASURED = {"test_seconds", "attention_stats_seconds", "step_ms", "train_seconds", "compile_seconds", "wall_seconds"}
MEASURED |= {"tokens_per_second", "fit_tokens_per_second", "peak_memory_mb"}


@pytest.mark.slow
def test_a_warm_training_run_equals_a_fresh_one(tmp_path: Path) -> None:
    args = [*TINY, "num_threads=1"]
    fresh = subprocess.run(
        [sys.executable, "-m", "experiments.train", *args, f"hydra.run.dir={tmp_path / 'fresh'}"],
        cwd=tmp_path, env=ONE_THREAD_ENV, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    warm = run_module(
        "experiments.train", *args, f"hydra.run.dir={tmp_path / 'warm'}", cwd=tmp_path, env=ONE_THREAD_ENV
    )
    assert warm.returncode == fresh.returncode == 0, warm.stderr
    assert warm.stderr == fresh.stderr

    def lines(out: str, name: str) -> list[str]:  # the log's time stamps and the speeds dropped
        kept = [line.split(" - ", 1)[-1] for line in out.replace(str(tmp_path / name), "RUN").splitlines()]
        return [line for line in kept if "steps/s" not in line and not line.startswith("cost")]

    assert lines(warm.stdout, "warm") == lines(fresh.stdout, "fresh")
    results = [json.loads((tmp_path / name / "result.json").read_text()) for name in ("fresh", "warm")]
    assert [{k: v for k, v in r.items() if k not in VARYING} for r in results] == [
        {k: v for k, v in results[0].items() if k not in VARYING}
    ] * 2
    counts = [{k: v for k, v in r["cost"].items() if k not in MEASURED} for r in results]
    assert counts[0] == counts[1] and counts[0]["params"] > 0
    assert metrics_rows(tmp_path / "warm") == metrics_rows(tmp_path / "fresh")
    weights = [
        torch.load(next((tmp_path / name / "checkpoints").glob("last*.ckpt")), map_location="cpu")["state_dict"]
        for name in ("fresh", "warm")
    ]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
