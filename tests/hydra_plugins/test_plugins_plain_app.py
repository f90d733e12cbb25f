"""attnlab's Hydra plugins stay out of other people's Hydra apps.

Hydra imports every module under ``hydra_plugins`` of the environment when any Hydra app starts (its plugin scan).
A plain app, written here into tmp_path, then runs with attnlab installed: once alone and once beside its own
``experiments/`` package (a name attnlab's plugins once imported at scan time). It must print no "Error importing"
warning, and after Hydra has scanned, composed and run it, none of attnlab's packages, nor torch or Lightning, may
be in its ``sys.modules``. (The plugin modules themselves are loaded by the scan; they import Hydra and OmegaConf.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

APP = """
import sys

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path=None, config_name=None)
def app(cfg: DictConfig) -> None:
    print("greeting", cfg.greeting)
    print("MODULES", " ".join(sorted(sys.modules)))


if __name__ == "__main__":
    app()
"""
# what attnlab's plugins must leave unimported in another app
FORBIDDEN = ("experiments", "analysis", "variants", "attnlab", "conf", "torch", "lightning", "pandas", "optuna")


def run_app(folder: Path, python: str = sys.executable) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Write the app into ``folder`` and run it there with ``python``; its output and the modules it had loaded."""
    (folder / "app.py").write_text(APP)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [python, "app.py", "+greeting=hello", "hydra.run.dir=out"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("MODULES ")]
    return done, set(lines[0].split()[1:]) if lines else set()


@pytest.mark.parametrize("own_experiments", [False, True], ids=["alone", "with-its-own-experiments-package"])
def test_a_plain_hydra_app_runs_without_attnlab(tmp_path: Path, own_experiments: bool) -> None:
    if own_experiments:
        (tmp_path / "experiments").mkdir()
        (tmp_path / "experiments" / "__init__.py").write_text("TRIALS = []\n")
    done, modules = run_app(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "greeting hello" in done.stdout
    assert "Error importing" not in done.stderr and "Plugins scanner" not in done.stderr, done.stderr
    assert any(m.startswith("hydra_plugins.attnlab_") for m in modules), "the scan did not reach attnlab's plugins"
    loaded = sorted(m for m in modules if m.split(".")[0] in FORBIDDEN)
    assert not loaded, f"imported in a plain Hydra app: {loaded}"
