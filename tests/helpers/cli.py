"""Commands as a user runs them, each in a process of its own: ``python -m experiments.train`` waited for or
started in the background, and a Python in a folder of the user's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.env import ENV, INSTALLED_ENV
from tests.helpers.paths import ROOT
from tests.helpers.warm import Started, run_module, start_module


def train_cli(
    *args: str, env: dict[str, str] = ENV, cwd: Path = ROOT, timeout: int = 300
) -> subprocess.CompletedProcess:
    """The training command run to its end, its stdout and stderr kept as text: in a process of its own
    forked from one that has imported the stack already (``tests/helpers/warm.py``)."""
    return run_module("experiments.train", *args, cwd=cwd, env=env, timeout=timeout)


def start_train(*args: str, env: dict[str, str]) -> Started | subprocess.Popen:
    """The training command started in the background from the checkout, Ctrl-C as a terminal delivers it: stdout
    dropped, stderr kept as text. From the warm Python (``tests.helpers.warm.start_module``): for a run signalled
    once it has written a checkpoint, not during its start-up."""
    return start_module("experiments.train", *args, env=env, stdout=Path(os.devnull))


def installed_python(folder: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """This interpreter run in ``folder`` as an installed library's user runs it (no checkout on the path)."""
    return subprocess.run(
        [sys.executable, *args], cwd=folder, env=INSTALLED_ENV, capture_output=True, text=True, timeout=timeout
    )


def ended_pid() -> int:
    """The pid of a process that has ended (and been reaped), as a killed run's lock would name."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)
