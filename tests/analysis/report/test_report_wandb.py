"""``analysis.report --wandb``: the written report folder as one W&B artifact (type report) from a run with
job_type report, grouped by the sweep, in the runs' project. Offline; read back from the run's record log."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.report.build import main
from tests.helpers.cell_fixtures import flat_config, result, write
from tests.helpers.wandb_runs import offline_runs


def small_sweep(root: Path, project: str) -> Path:
    sweep = root / "abl"
    for attention in ("multihead", "local"):
        for seed in range(2):
            config = flat_config("copy", attention, "sinusoidal", seed, name="abl", **{"logger.wandb.project": project})
            acc = 0.5 + 0.1 * seed
            write(
                sweep / f"{attention}-{seed}",
                result(
                    f"{attention}{seed}",
                    config,
                    metrics={"test/token_acc": acc},
                    by_length={"8": {"token_acc": acc}, "16": {"token_acc": 0.4}},
                ),
            )
    return sweep


def test_wandb_flag_logs_the_report_folder_as_one_artifact(tmp_path: Path, monkeypatch, capsys) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    out = tmp_path / "report"
    assert main([str(small_sweep(tmp_path, "myproj")), "--out", str(out), "--figure-formats", "png", "--wandb"]) == 0
    assert capsys.readouterr().out.strip() == str(out / "report.html")

    [logged] = offline_runs(tmp_path / "wb").values()
    assert logged["job_type"] == "report" and logged["group"] == "abl" and logged["project"] == "myproj"
    [artifact] = logged["artifacts"]
    assert artifact["type"] == "report" and artifact["name"] == "report-abl"
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}  # the folder as built
    assert {"report.md", "report.html", "results.csv", "latex/tables.tex"} <= written
    assert any(name.startswith("figures/") for name in written)
    assert sorted(artifact["files"]) == sorted(written)


def test_a_failure_to_log_is_one_line_and_keeps_the_report(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("WANDB_MODE", "offlne")
    out = tmp_path / "report"
    code = main(
        [str(small_sweep(tmp_path, "attnlab")), "--out", str(out), "--no-paper", "--figure-formats", "png", "--wandb"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and (out / "report.md").is_file()
    assert err[-1] == "error: WANDB_MODE='offlne' is not a W&B mode; use one of offline, online, disabled"
    assert not (out / "wandb").exists()


def test_without_wandb_dir_the_run_sits_in_the_report_folder_and_not_in_its_artifact(
    tmp_path: Path, monkeypatch
) -> None:
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default: no account needed
    monkeypatch.delenv("WANDB_DIR", raising=False)
    out = tmp_path / "report"
    sweep = small_sweep(tmp_path, "attnlab")
    for _ in range(2):  # the second run finds the first one's wandb/ in the folder and leaves it out
        assert main([str(sweep), "--out", str(out), "--no-paper", "--figure-formats", "png", "--wandb"]) == 0
    logged = offline_runs(out / "wandb")
    assert len(logged) == 2 and {r["job_type"] for r in logged.values()} == {"report"}
    report_files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and "wandb" not in p.parts}
    for run in logged.values():
        assert run["project"] == "attnlab" and sorted(run["artifacts"][0]["files"]) == sorted(report_files)
