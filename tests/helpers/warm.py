"""``python -m module args`` run to its end in a child forked from a Python that has imported the training
stack once (``tests/helpers/warm_server.py``): the command's code runs afresh in a process of its own, the
5-odd seconds of torch, Lightning and Hydra imports do not (each child imports W&B itself: its import makes
temporary folders, which one child's end would delete under the next).

The answer is what ``subprocess.run(..., capture_output=True, text=True, timeout=...)`` gives: the exit code
(negative for a signal), stdout and stderr as text, ``TimeoutExpired`` after killing the child. One server
per environment (less the variables pytest changes per test), at most ``MAX_SERVERS`` alive per test
process. A command about the process itself (signals, start-up output, file-size limits, an installed
library) is started afresh by the caller instead; ``tests/project/test_warm_runs.py`` holds a warm run equal to
a fresh one.
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
from pathlib import Path

from tests.helpers.paths import ROOT

MAX_SERVERS = 2
# set by pytest per test phase: a server serves every test that shares the rest of the environment
VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})

_servers: OrderedDict[tuple[tuple[str, str], ...], Server] = OrderedDict()


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

    def run(self, module: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of ``python -m module *args`` in a forked child."""
        with tempfile.TemporaryDirectory() as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            out.touch()
            err.touch()
            request = {
                "module": module,
                "args": args,
                "cwd": str(cwd),
                "env": env,
                "stdout": str(out),
                "stderr": str(err),
            }
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            pid = self._answer()["pid"]
            fired = threading.Event()

            def kill() -> None:
                fired.set()
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                code = self._answer()["code"]
            finally:
                timer.cancel()
            if fired.is_set():
                raise subprocess.TimeoutExpired(
                    [sys.executable, "-m", module, *args], timeout, out.read_text(), err.read_text()
                )
            return code, out.read_text(), err.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.errors.close()


def _server(env: dict[str, str]) -> Server:
    key = tuple(sorted((k, v) for k, v in env.items() if k not in VOLATILE))
    if key in _servers:
        _servers.move_to_end(key)
        return _servers[key]
    while len(_servers) >= MAX_SERVERS:
        _servers.popitem(last=False)[1].close()
    _servers[key] = Server(env)
    return _servers[key]


@atexit.register
def _close_all() -> None:
    while _servers:
        _servers.popitem()[1].close()


def run_module(
    module: str, *args: str, cwd: Path = ROOT, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess:
    """``python -m module *args`` in ``cwd`` with ``env``, run to its end, its output kept as text."""
    code, out, err = _server(env).run(module, list(args), cwd, env, timeout)
    return subprocess.CompletedProcess([sys.executable, "-m", module, *args], code, out, err)
