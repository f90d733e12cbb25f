"""``analysis.report --wandb`` declares the result artifacts of the runs it read as the report run's inputs, so
W&B's lineage graph goes runs -> report. W&B refuses ``use_artifact`` offline, so the calls are recorded by a
stand-in ``wandb`` module; offline, the inputs are named in the report artifact's metadata instead."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.report.wandb_artifact import log_report

# run id -> its W&B mode (None: the run had no W&B logger)
RUNS = {"a1": "offline", "b2": "online", "c3": None, "d4": "disabled"}


class FakeArtifact:
    def __init__(self, name: str, type: str, metadata: dict[str, Any]) -> None:
        self.name, self.type, self.metadata, self.files = name, type, metadata, []

    def add_file(self, path: str, name: str | None = None) -> None:
        self.files.append(name or Path(path).name)


class FakeRun:
    def __init__(self, calls: list[tuple], known: set[str], **init: Any) -> None:
        self.calls, self.known, self.init = calls, known, init
        self.url, self.dir = "https://wandb.example/run", str(Path(init["dir"]) / "wandb" / "run-x" / "files")

    def use_artifact(self, name: str, type: str | None = None) -> None:
        if name not in self.known:
            raise ValueError(f"artifact {name} not found")
        self.calls.append(("use_artifact", name, type))

    def log_artifact(self, artifact: FakeArtifact) -> None:
        self.calls.append(("log_artifact", artifact.name, artifact.type, artifact.metadata["inputs"]))

    def finish(self) -> None:
        self.calls.append(("finish",))


def fake_wandb(monkeypatch, known: set[str]) -> list[tuple]:
    calls: list[tuple] = []
    module = types.ModuleType("wandb")
    module.Artifact = FakeArtifact
    module.Settings = lambda **kw: kw
    module.init = lambda **init: calls.append(("init", init)) or FakeRun(calls, known, **init)
    monkeypatch.setitem(sys.modules, "wandb", module)
    return calls


def report_folder(root: Path) -> Path:
    """A report folder as analysis.report writes it, reduced to the results.csv columns lineage reads."""
    rows = []
    for run_id, mode in RUNS.items():
        row = {"run_id": run_id, "sweep": "abl", "config.logger.wandb.project": "proj" if mode else None}
        row["config.logger.wandb.mode"] = mode
        rows.append(row)
    out = root / "report"
    out.mkdir()
    pd.DataFrame(rows).to_csv(out / "results.csv", index=False)
    (out / "report.md").write_text("# report\n")
    return out


def test_online_the_report_run_uses_each_logged_runs_result_artifact_before_logging_its_own(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "online")
    wanted = ["result-a1:latest", "result-b2:latest"]  # c3 had no W&B logger, d4's was disabled
    calls = fake_wandb(monkeypatch, known=set(wanted))
    log_report(report_folder(tmp_path))
    assert calls[0][0] == "init" and calls[0][1]["job_type"] == "report" and calls[0][1]["project"] == "proj"
    assert calls[1:] == [
        ("use_artifact", "result-a1:latest", "result"),
        ("use_artifact", "result-b2:latest", "result"),
        ("log_artifact", "report-abl", "report", wanted),
        ("finish",),
    ]


def test_an_unsynced_runs_artifact_is_left_out_of_the_lineage_with_one_line(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("WANDB_MODE", "online")
    calls = fake_wandb(monkeypatch, known={"result-b2:latest"})
    log_report(report_folder(tmp_path))
    assert [c[1] for c in calls if c[0] == "use_artifact"] == ["result-b2:latest"]
    assert [c[0] for c in calls][-2:] == ["log_artifact", "finish"]  # the report is logged all the same
    err = capsys.readouterr().err
    assert "1 of 2 runs' result artifacts not found" in err and "result-a1:latest" in err


def test_offline_the_inputs_are_named_in_the_artifact_and_nothing_is_used(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    calls = fake_wandb(monkeypatch, known={"result-a1:latest", "result-b2:latest"})
    log_report(report_folder(tmp_path))
    assert not [c for c in calls if c[0] == "use_artifact"]  # W&B: "Cannot use artifact when in offline mode"
    [logged] = [c for c in calls if c[0] == "log_artifact"]
    assert logged[3] == ["result-a1:latest", "result-b2:latest"]


def test_the_report_run_takes_wandb_project_when_the_runs_name_none(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "from-env")
    calls = fake_wandb(monkeypatch, known=set())
    out = report_folder(tmp_path)
    table = pd.read_csv(out / "results.csv")
    table["config.logger.wandb.project"] = None  # conf/logger/wandb.yaml leaves the project null
    table.to_csv(out / "results.csv", index=False)
    log_report(out)
    assert calls[0][1]["project"] == "from-env"


def test_the_real_wandb_refuses_use_artifact_offline(tmp_path: Path) -> None:
    """Why offline lineage is metadata: this wandb version cannot declare an input without a server."""
    wandb = pytest.importorskip("wandb")
    run = wandb.init(project="p", mode="offline", dir=str(tmp_path), settings=wandb.Settings(console="off"))
    try:
        with pytest.raises(TypeError, match="offline"):
            run.use_artifact("result-x:latest", type="result")
    finally:
        run.finish()
