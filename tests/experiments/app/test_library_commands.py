"""Every command as a console script, and the lines that tell the user what to run next in the form they typed."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.app.summary import report_command
from tests.helpers.paths import ROOT

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11: pyproject.toml read as TOML, not by the code under test
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_every_command_has_a_console_script_whose_target_loads() -> None:
    wanted = {"attnlab-train", "attnlab-report", "attnlab-claims", "attnlab-bench", "attnlab-gpu-check"}
    assert wanted <= set(SCRIPTS), sorted(wanted - set(SCRIPTS))
    for name, target in SCRIPTS.items():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), f"{name} = {target}"


@pytest.mark.parametrize(
    "argv0, expected",
    [
        ("/home/me/.venv/bin/attnlab-train", "attnlab-report /runs/a --out /runs/a/report"),
        ("/home/me/attnlab/experiments/train.py", "python -m analysis.report /runs/a --out /runs/a/report"),
        ("/home/me/.venv/lib/python3.11/site-packages/ipykernel_launcher.py", "python -m analysis.report /runs/a"),
    ],
    ids=["console-script", "python-m", "notebook"],
)
def test_the_report_line_is_in_the_form_training_was_started_by(monkeypatch, argv0: str, expected: str) -> None:
    monkeypatch.setattr(sys, "argv", [argv0, "task=copy"])
    assert report_command(Path("/runs/a")).startswith(expected)


@pytest.mark.slow
@pytest.mark.parametrize("script", ["attnlab-claims", "attnlab-gpu-check"])
def test_a_console_script_names_itself_in_its_help(script: str, tmp_path: Path) -> None:
    """The script's entry run from a file named like the console script pip writes."""
    module, _, function = SCRIPTS[script].partition(":")
    launcher = tmp_path / script
    launcher.write_text(f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(launcher), "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.startswith(f"usage: {script} "), done.stdout + done.stderr
