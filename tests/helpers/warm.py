"""``python -m module args`` run to its end in a child forked from a Python that has imported the training
stack once (``tests/helpers/warm_server.py``): the command's code runs afresh in a process of its own, the
5-odd seconds of torch, Lightning and Hydra imports do not (each child imports W&B itself: its import makes
temporary folders, which one child's end would delete under the next).

``run_module`` answers what ``subprocess.run(..., capture_output=True, text=True, timeout=...)`` gives: the exit
code (negative for a signal), stdout and stderr as text, ``TimeoutExpired`` after killing the child.
``start_module`` leaves the command running, as ``subprocess.Popen`` does, for a test that signals it once it is
at work (its first checkpoint written). One server per environment (less ``RUN_TIME``, which no import reads),
at most ``MAX_SERVERS`` alive per test process; while a server's command runs in the background, a command for
its environment starts afresh. A command about the process itself (a signal during start-up, start-up output,
file-size limits, an installed library) is started afresh by the caller; ``tests/project/test_warm_runs.py``
holds warm commands equal to fresh ones, signals included.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from tests.helpers.paths import ROOT

MAX_SERVERS = 2
# Read only once a command runs, never by the preloaded imports (W&B is not preloaded; Hydra reads HYDRA_FULL_ERROR
# when a run fails; pytest sets PYTEST_CURRENT_TEST per test phase): a server serves every environment that differs
# in these alone, and its child takes the command's environment whole (tests/helpers/warm_server.py: child).
RUN_TIME = frozenset({"PYTEST_CURRENT_TEST", "WANDB_MODE", "WANDB_SILENT", "HYDRA_FULL_ERROR"})

_servers: OrderedDict[tuple[tuple[str, str], ...], Server] = OrderedDict()


def _argv(module: str, args: Sequence[str]) -> list[str]:
    """``python -m module *args`` with this interpreter: what a fresh command runs and what its answer names."""
    return [sys.executable, "-m", module, *args]


class Server:
    """One warm Python, started in ``env`` and kept until this process exits or it is evicted."""

    def __init__(self, env: dict[str, str]) -> None:
        self.errors = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.warm_server"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
        )
        self.busy = False  # a child started in the background still runs
        hello = self._answer()
        self.errors.seek(0)
        printed = self.errors.read()
        if not hello.get("ready") or printed:
            self.close()
            raise RuntimeError(
                f"the warm server cannot serve: {hello.get('problem') or 'its imports printed'}\n{printed}"
            )

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.errors.seek(0)
            raise RuntimeError(f"the warm server ended (exit {self.proc.poll()}):\n{self.errors.read()[-3000:]}")
        return json.loads(line)

    def start(self, module: str, args: list[str], cwd: Path, env: dict[str, str], out: Path, err: Path) -> int:
        """Fork ``python -m module *args`` writing to ``out`` and ``err``; its pid. The server is busy until
        ``finish``."""
        request = {"module": module, "args": args, "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        self.busy = True
        return self._answer()["pid"]

    def finish(self) -> int:
        """The started child's exit code once it has ended (negative for a signal)."""
        try:
            return self._answer()["code"]
        finally:
            self.busy = False

    def run(self, module: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of ``python -m module *args`` in a forked child."""
        with tempfile.TemporaryDirectory() as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            out.touch()
            err.touch()
            pid = self.start(module, args, cwd, env, out, err)
            fired = threading.Event()

            def kill() -> None:
                fired.set()
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                code = self.finish()
            finally:
                timer.cancel()
            if fired.is_set():
                raise subprocess.TimeoutExpired(_argv(module, args), timeout, out.read_text(), err.read_text())
            return code, out.read_text(), err.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.errors.close()


def _server(env: dict[str, str]) -> Server | None:
    """The server for ``env``, started when there is none; None while its child started in the background runs."""
    key = tuple(sorted((k, v) for k, v in env.items() if k not in RUN_TIME))
    if key in _servers:
        _servers.move_to_end(key)
        return None if _servers[key].busy else _servers[key]
    idle = [k for k, server in _servers.items() if not server.busy]
    while len(_servers) >= MAX_SERVERS and idle:
        _servers.pop(idle.pop(0)).close()
    _servers[key] = Server(env)
    return _servers[key]


@atexit.register
def _close_all() -> None:
    while _servers:
        _servers.popitem()[1].close()


def run_module(
    module: str, *args: str, cwd: Path = ROOT, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess:
    """``python -m module *args`` in ``cwd`` with ``env``, run to its end, its output kept as text (afresh while
    this environment's server runs a command started in the background)."""
    server = _server(env)
    if server is None:
        return subprocess.run(_argv(module, args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    code, out, err = server.run(module, list(args), cwd, env, timeout)
    return subprocess.CompletedProcess(_argv(module, args), code, out, err)


class Started:
    """``python -m module *args`` started in a warm child and left running, with the part of ``subprocess.Popen``
    the tests use: ``pid``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``, ``communicate`` and
    ``returncode``; ``stderr`` (and ``stdout`` when not sent to a file) read as text from the start. A file, not
    a pipe: nothing stalls a long run, and read() returns what is there (the tests read once the command ended)."""

    def __init__(
        self, server: Server, module: str, args: list[str], cwd: Path, env: dict[str, str], stdout: Path | None
    ):
        self.args = _argv(module, args)
        self._folder = tempfile.TemporaryDirectory()
        err = Path(self._folder.name, "stderr")
        out = stdout if stdout is not None else Path(self._folder.name, "stdout")
        for path in (out, err):
            path.touch()
        self.returncode: int | None = None
        self._server, self._ended = server, threading.Event()
        self.pid = server.start(module, args, cwd, env, out, err)
        self.stderr = err.open()
        self.stdout = out.open() if stdout is None else None
        threading.Thread(target=self._reap, daemon=True).start()

    def _reap(self) -> None:
        self.returncode = self._server.finish()
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode if self._ended.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if not self._ended.is_set():  # as Popen: a command that ended (its pid maybe reused) is left alone
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str | None, str]:
        self.wait(timeout)
        return (self.stdout.read() if self.stdout else None), self.stderr.read()


def start_module(
    module: str, *args: str, cwd: Path = ROOT, env: dict[str, str], stdout: Path | None = None
) -> Started | subprocess.Popen:
    """``python -m module *args`` started in the background from the warm Python, stdout into ``stdout`` (kept
    for ``communicate`` when None), stderr kept as text; afresh while this environment's server is busy. For a
    command signalled once it has started work (a checkpoint written); one signalled during its start-up must
    start afresh, as its imports are what the signal interrupts."""
    server = _server(env)
    if server is not None:
        return Started(server, module, list(args), cwd, env, stdout)
    return subprocess.Popen(
        _argv(module, args),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE if stdout is None else stdout.open("w"),
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it (a job started in the background inherits it ignored), as in a warm child
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
