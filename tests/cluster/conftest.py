"""A real one-node SLURM cluster for the tests here (``tests/cluster/slurm-local``).

The cluster is started once for the session and stopped at the end when this session
started it. Where it cannot run (not root, not Debian, packages unreachable) every test
here is skipped with the script's reason.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "slurm-local"
CANNOT_HOST, NO_PACKAGES = 3, 4


@pytest.fixture(scope="session")
def slurm_cluster():
    was_running = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True).returncode == 0
    started = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=900)
    if started.returncode in (CANNOT_HOST, NO_PACKAGES):
        pytest.skip(f"no local SLURM cluster: {started.stderr.strip()}")
    assert started.returncode == 0, f"slurm-local start failed:\n{started.stdout}\n{started.stderr}"
    yield
    if not was_running:
        subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, timeout=120)
