"""The device check is the project's: its dry run composes and preflights every command a device pass would
start, so a key that moves fails here (on CPU, in CI) and not on a lent GPU; a run caps each section,
stops it whole, and always leaves its summary and logs, at most ``MAX_FILES`` files.
"""

from __future__ import annotations

import json
import sys
import tarfile
import time
from unittest import mock

import pytest

from experiments.diagnostics.device_check import MAX_FILES, plan
from experiments.diagnostics.device_check.cli import main
from experiments.diagnostics.device_check.plan import Command, Knobs, Section
from experiments.diagnostics.device_check.run import run


@pytest.mark.slow  # composes every cell of the quick grid and imports every bench command (10-30 s on CPU)
@pytest.mark.parametrize("run_name, commands", [("A", 6), ("B", 5)])
def test_the_dry_run_preflights_every_command_and_passes(tmp_path, run_name, commands, capsys):
    assert main([run_name, "--dry-run", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "summary.json").read_text())["commands"]
    assert len(rows) == commands and not [r for r in rows if r["problem"]]
    assert f"{commands} commands, 0 refused" in (tmp_path / "summary.txt").read_text()


def test_a_renamed_training_key_fails_the_dry_run(tmp_path, capsys):
    """``progress_bar`` moved from ``trainer.progress_bar`` once; a device script that kept the old key
    measured nothing. Planted back, the dry run refuses it by name."""
    moved = [o if o != "progress_bar=false" else "trainer.progress_bar=false" for o in plan.QUICK]
    with mock.patch.object(plan, "QUICK", moved):
        assert main(["B", "--dry-run", "--out", str(tmp_path)]) == 1
    refused = [r for r in json.loads((tmp_path / "summary.json").read_text())["commands"] if r["problem"]]
    assert len(refused) == 4 and all("progress_bar" in r["problem"] for r in refused)


@pytest.mark.slow  # imports every bench command (about 10 s, more on a loaded core)
def test_a_renamed_bench_flag_fails_the_dry_run(tmp_path, capsys):
    real = plan.run_a

    def renamed(knobs):
        return [
            Section(
                s.name,
                s.cap_s,
                tuple(
                    Command(c.kind, tuple(a.replace("--bf16", "--bfloat16") for a in c.argv), c.env, c.parser)
                    for c in s.commands
                ),
            )
            for s in real(knobs)
        ]

    with mock.patch.dict(plan.RUNS, {"A": renamed}):
        assert main(["A", "--dry-run", "--out", str(tmp_path)]) == 1
    refused = [r for r in json.loads((tmp_path / "summary.json").read_text())["commands"] if r["problem"]]
    assert [r["section"] for r in refused] == ["mfu_eager", "mfu_compiled"]
    assert all("--bfloat16" in r["problem"] for r in refused)


def test_a_section_past_its_cap_is_stopped_whole_and_the_summary_is_still_written(tmp_path, capsys):
    sleeper = ("timeit", "-n", "1", "-r", "1", "import time; time.sleep(60)")
    sections = [
        Section("sleeps", 3, (Command("module", sleeper),)),
        Section("after", 30, (Command("module", ("timeit", "-n", "1", "-r", "1", "pass")),)),
        Section("fails", 30, (Command("module", ("no_such_module_here",)),)),
    ]
    knobs = Knobs(work=tmp_path / "work", deadline_s=120, grid_steps=())
    out = tmp_path / "out"
    began = time.monotonic()
    assert run("A", sections, knobs, out) == 1
    assert time.monotonic() - began < 40  # the 60 s sleeper was cut at its 3 s cap
    summary = json.loads((out / "summary.json").read_text())
    assert [(s["name"], s["status"]) for s in summary["sections"]] == [
        ("sleeps", "timeout"),
        ("after", "ok"),
        ("fails", "fail"),
    ]
    assert "sleeps timeout" in (out / "summary.txt").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["logs.tgz", "summary.json", "summary.txt"]
    assert len(list(out.iterdir())) <= MAX_FILES
    with tarfile.open(out / "logs.tgz") as tar:
        assert "./logs/sleeps.log" in tar.getnames()


def test_a_section_with_no_time_left_is_skipped_not_started(tmp_path, capsys):
    knobs = Knobs(work=tmp_path / "work", deadline_s=20, grid_steps=())
    sections = [Section("late", 60, (Command("module", (sys.executable,)),))]
    assert run("B", sections, knobs, tmp_path / "out") == 1
    rows = json.loads((tmp_path / "out" / "summary.json").read_text())["sections"]
    assert rows[0]["status"] == "skipped" and "left before the deadline" in rows[0]["why"]
