"""What the analysis leaves out, and says so: unused settings, failed runs, unreadable files, NaN metrics,
bands outside a metric's range, and output paths that cannot be written."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PolyCollection

from analysis.claims.cli import main as claims_main
from analysis.data.collect import collect
from analysis.report.build import build_report
from analysis.report.build import main as report_main
from analysis.report.figures import figure_canvas, summary_figure
from analysis.report.figures import plots as figures
from tests.helpers.cell_fixtures import flat_config, result, write
from tests.helpers.config import TINY
from tests.helpers.paths import ROOT

ACC = "test/token_acc"


def decoder_run(folder: Path, cross: str, seed: int = 0, unused: bool = True, nulled: bool = True) -> Path:
    """A decoder-only run whose cross attention was set on the command line; ``unused=False`` writes it the way
    runs did before they recorded unused settings; ``nulled=False`` keeps the asked config beside ``unused``
    (the config a W&B run holds)."""
    config = flat_config(
        "reverse",
        "multihead",
        "sinusoidal",
        seed,
        **{"model.arch": "decoder", "model.cross_attention.name": cross, "model.cross_attention.num_heads": 1},
    )
    del config["model.cross_attention"]
    res = result(f"{folder.name}", config, {ACC: 0.5 + 0.1 * seed})
    res["arch"] = "decoder"
    if unused:
        if nulled:
            config = {k: v for k, v in config.items() if not k.startswith("model.cross_attention.")}
            res["config"] = {**config, "model.cross_attention": None}
        res["unused"] = {"model.cross_attention": cross}
    return write(folder, res)


# ---------------------------------------------------------------- unused settings


def test_unused_setting_never_makes_a_factor_and_old_results_read_as_before(tmp_path):
    for cross in ("local", "soft"):
        for seed in (0, 1):
            decoder_run(tmp_path / "new" / f"{cross}{seed}", cross, seed)
            decoder_run(tmp_path / "old" / f"{cross}{seed}", cross, seed, unused=False)
            decoder_run(tmp_path / "asked" / f"{cross}{seed}", cross, seed, nulled=False)
    for folder in ("new", "asked"):
        with pytest.warns(UserWarning, match="model.cross_attention was given 2 values"):
            new = collect(tmp_path / folder)
        assert new.factors == [] and new.runs["cell"].nunique() == 1
        assert new.unused == {"model.cross_attention": ["local", "soft"]}
    old = collect(tmp_path / "old")  # no "unused" field: every setting counts, as before
    assert old.factors == ["model.cross_attention"] and old.runs["cell"].nunique() == 2 and old.unused == {}
    markdown = (build_report([tmp_path / "new"], tmp_path / "out", paper_files=False).parent / "report.md").read_text()
    lines = [line for line in markdown.splitlines() if "not used by the models" in line]
    assert len(lines) == 1 and "model.cross_attention (local, soft)" in lines[0]


@pytest.mark.slow
def test_decoder_grid_over_cross_attention_is_one_cell(tmp_path):
    """The command of the issue, end to end: two decoder-only runs that differ only in a cross attention
    the model never builds are one configuration."""
    # the shared tiny run, with nothing set for an encoder a decoder-only model does not build, and no logger
    tiny = [*(o for o in TINY if not o.startswith(("model.encoder_layers=", "logger="))), "logger=none"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.train",
            "-m",
            "task=reverse",
            "model.arch=decoder",
            "attention@model.cross_attention=local,soft",
            *tiny,
            f"hydra.sweep.dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*/result.json"))]
    assert [r["status"] for r in results] == ["completed", "completed"]
    assert all(r["cross_attention"] is None and r["config"]["model.cross_attention"] is None for r in results)
    assert sorted(r["unused"]["model.cross_attention"] for r in results) == ["local", "soft"]
    assert results[0]["cost"]["params"] == results[1]["cost"]["params"]  # the models are the same
    cited = {(ref["registry"], ref["name"]) for r in results for ref in r["references"]}
    assert ("attention", "multihead") in cited and not cited & {("attention", "local"), ("attention", "soft")}
    with pytest.warns(UserWarning):
        runs = collect(tmp_path)
    assert runs.factors == [] and runs.runs["cell"].nunique() == 1 and len(runs.duplicates) == 1


# ---------------------------------------------------------------- failed runs, dropped runs


def test_failed_runs_make_no_factors(tmp_path):
    for attention in ("multihead", "soft"):
        for seed in (0, 1):
            config = flat_config("copy", attention, "sinusoidal", seed)
            write(tmp_path / f"{attention}{seed}", result(f"{attention}{seed}", config, {ACC: 0.5 + 0.1 * seed}))
    for i, (lr, steps) in enumerate([(0.1, 10), (0.2, 20), (0.3, 30)]):  # broken runs of other settings
        config = flat_config("copy", "local", "rope", i, **{"optim.lr": lr, "trainer.max_steps": steps})
        write(tmp_path / f"failed{i}", result(f"failed{i}", config, status="failed"))
    runs = collect(tmp_path)
    assert runs.factors == ["attention"]
    markdown = (build_report([tmp_path], tmp_path / "out", paper_files=False).parent / "report.md").read_text()
    assert "Factors (config keys that vary): attention." in markdown


def test_diverged_runs_make_no_factors(tmp_path):
    """A rerun at a higher learning rate, without warm-up and clipping, that diverged: the completed sweep keeps
    its one factor and its labels."""
    for attention in ("multihead", "soft"):
        for seed in (0, 1):
            config = flat_config("copy", attention, "sinusoidal", seed)
            write(tmp_path / f"{attention}{seed}", result(f"{attention}{seed}", config, {ACC: 0.5 + 0.1 * seed}))
    blown = {"optim.lr": 1.0, "optim.warmup_steps": 0, "optim.grad_clip": 0.0}
    diverged = write(
        tmp_path / "diverged",
        result("diverged", flat_config("copy", "multihead", "sinusoidal", 2, **blown), {ACC: None}, status="diverged"),
    )
    runs = collect(tmp_path)
    assert runs.factors == ["attention"]
    assert set(runs.runs["cell_label"]) == {"attention=multihead", "attention=soft"}
    assert str(diverged) in set(runs.dropped["source"])
    markdown = (build_report([tmp_path], tmp_path / "out", paper_files=False).parent / "report.md").read_text()
    assert "Factors (config keys that vary): attention." in markdown
    assert "optim.lr" not in markdown.split("## Overview")[0]  # no summary row or label names the diverged setting


def test_nan_and_unreadable_runs_are_listed_as_left_out(tmp_path):
    for seed in (0, 1):
        config = flat_config("copy", "multihead", "sinusoidal", seed)
        write(tmp_path / f"ok{seed}", result(f"ok{seed}", config, {ACC: 0.6 + 0.1 * seed}))
    nan = write(tmp_path / "nan", result("nan", flat_config("copy", "multihead", "sinusoidal", 2), {ACC: None}))
    failed = write(
        tmp_path / "failed", result("failed", flat_config("copy", "multihead", "sinusoidal", 3), status="failed")
    )
    bad = {}
    for name, text in {"truncated": '{"schema": 1, "run_id": "x', "list": "[]", "empty": "{}"}.items():
        (tmp_path / name).mkdir()
        bad[name] = tmp_path / name / "result.json"
        bad[name].write_text(text)
    with pytest.warns(UserWarning):
        runs = collect(tmp_path)
    dropped = dict(zip(runs.dropped["source"], runs.dropped["reason"]))
    assert set(dropped) == {str(p) for p in [nan, failed, *bad.values()]}
    assert dropped[str(nan)] == f"NaN metric(s): {ACC}" and dropped[str(failed)].startswith("failed")
    with pytest.warns(UserWarning):
        markdown = (build_report([tmp_path], tmp_path / "out", paper_files=False).parent / "report.md").read_text()
    lead = markdown.split("## Summary")[0]  # before the first numbers
    assert "5 run(s) or file(s) are left out" in lead
    assert all(str(p) in lead for p in [nan, failed, *bad.values()])


def sweep_cell(root: Path, attention: str, seed: int, done: bool) -> Path:
    """A cell folder as a Hydra job leaves it: its overrides, the run's state, and the result once it has one."""
    folder = root / f"attention={attention},seed={seed}"
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(f"- task=copy\n- attention={attention}\n- seed={seed}\n")
    (folder / "run_state.json").write_text(json.dumps({"run_id": f"{attention}{seed}", "config_hash": "h"}))
    if done:
        config = flat_config("copy", attention, "sinusoidal", seed)
        write(folder, result(f"{attention}{seed}", config, {ACC: 0.5 + 0.1 * seed}))
    return folder


def test_cells_still_running_or_without_a_result_are_left_out(tmp_path):
    """A sweep of attention x seed (the seeds from the preset's sweeper params, as multirun.yaml records them):
    three cells done, one running, one whose process was killed, one not started."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(
        "hydra:\n"
        "  sweeper:\n"
        "    _target_: hydra._internal.core_plugins.basic_sweeper.BasicSweeper\n"
        "    max_batch_size: null\n"
        "    params:\n"
        "      seed: 0,1\n"
        "  overrides:\n"
        "    task: [task=copy, 'attention=multihead,soft,local']\n"
    )
    for attention, seed in (("multihead", 0), ("multihead", 1), ("soft", 0)):
        sweep_cell(sweep, attention, seed, done=True)
    running = sweep_cell(sweep, "soft", 1, done=False)
    (running / ".attnlab.lock").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    killed = sweep_cell(sweep, "local", 0, done=False)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (killed / ".attnlab.lock").write_text(json.dumps({"pid": int(ended.stdout), "host": socket.gethostname()}))
    (killed / "previous" / "old").mkdir(parents=True)  # an earlier run kept inside the folder is no cell
    (killed / "previous" / "old" / "run_state.json").write_text("{}")
    lone = tmp_path / "single"  # a single run without a lock: it may still run, or be gone
    lone.mkdir()
    (lone / "run_state.json").write_text("{}")

    runs = collect([sweep, lone])
    assert sorted(runs.runs["run_id"]) == ["multihead0", "multihead1", "soft0"]
    left = {r.source: (r.status, r.reason) for r in runs.dropped.itertuples(index=False)}
    assert left == {
        str(running): ("running", left[str(running)][1]),
        str(killed): ("no result", left[str(killed)][1]),
        f"{sweep} [seed=1 attention=local]": ("not started", left[f"{sweep} [seed=1 attention=local]"][1]),
        str(lone): ("no result", left[str(lone)][1]),
    }
    assert f"process {os.getpid()}" in left[str(running)][1]
    assert f"its process {int(ended.stdout)} ended without writing one" in left[str(killed)][1]
    assert "still running, or stopped" in left[str(lone)][1]
    markdown = (build_report([sweep, lone], tmp_path / "out", paper_files=False).parent / "report.md").read_text()
    lead = markdown.split("## Summary")[0]  # before the first numbers
    assert "## Left out" in lead and "4 run(s) or file(s) are left out" in lead
    assert all(source in lead for source in left)


# ---------------------------------------------------------------- figures and wording


def _band_edges(fig) -> np.ndarray:
    polys = [c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)]
    assert polys, "no band drawn"
    return np.concatenate([p.get_paths()[0].vertices[:, 1] for p in polys])


def test_accuracy_bands_stay_within_0_and_1(tmp_path, monkeypatch):
    import pandas as pd

    # n=2 with values 0.05 and 0.95: the t-interval is 0.5 ± 5.7, far outside [0, 1]
    data = pd.DataFrame({"label": ["a"] * 4, "length": [8, 8, 16, 16], "value": [0.05, 0.95, 0.0, 0.9]})
    drawn = []
    monkeypatch.setattr(figure_canvas, "save", lambda fig, path, style: drawn.append(fig) or path)
    summary_figure.metric_vs_length(data, ["a"], "token_acc", None, "t", tmp_path / "f")
    panel = data.assign(attention="multihead", position="rope", seed=[0, 1, 0, 1])
    figures.length_generalisation(panel, "token_acc", None, {"rope": (0, 0, 1)}, "t", tmp_path / "g")
    for fig in drawn:
        edges = _band_edges(fig)
        assert edges.min() >= 0.0 and edges.max() <= 1.0


def test_one_other_cell_is_singular(tmp_path):
    for attention, values in {"multihead": [0.90, 0.92, 0.91], "soft": [0.10, 0.12, 0.11]}.items():
        for seed, value in enumerate(values):
            config = flat_config("copy", attention, "sinusoidal", seed)
            write(
                tmp_path / f"{attention}{seed}",
                result(f"{attention}{seed}", config, {ACC: value}, by_length={"8": {"token_acc": value}}),
            )
    markdown = (build_report([tmp_path], tmp_path / "out", paper_files=False).parent / "report.md").read_text()
    assert "the other cell is significantly worse" in markdown and "the other 1 are" not in markdown


# ---------------------------------------------------------------- output paths


def _sweep(root: Path) -> Path:
    for seed in (0, 1):
        config = flat_config("copy", "multihead", "sinusoidal", seed)
        write(root / f"r{seed}", result(f"r{seed}", config, {ACC: 0.5 + 0.1 * seed}))
    return root


def _no_reading(monkeypatch, module) -> None:
    def read(*_):
        raise AssertionError("the sweep was read before the output path was checked")

    monkeypatch.setattr(module, "collect", read)


@pytest.mark.parametrize("out", ["file", "/proc/x", "file/below"])
def test_report_out_that_cannot_be_a_folder_exits_2_before_any_work(tmp_path, capsys, monkeypatch, out):
    import analysis.report.build as R

    (tmp_path / "file").write_text("not a folder")
    target = tmp_path / out if not out.startswith("/") else Path(out)
    _no_reading(monkeypatch, R)
    code = report_main([str(_sweep(tmp_path / "s")), "--out", str(target)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(target) in err[0], err


def test_report_out_check_leaves_nothing_behind(tmp_path):
    from analysis.command.outputs import check_out_dir

    check_out_dir(tmp_path / "a" / "b" / "c")
    assert list(tmp_path.iterdir()) == []


def test_claims_csv_in_a_bad_place_exits_2_before_any_work(tmp_path, capsys, monkeypatch):
    import analysis.data.collect as collect_module

    _no_reading(monkeypatch, collect_module)  # claims imports collect inside main
    for csv in ["/proc/x/c.csv", str(tmp_path)]:
        code = claims_main([str(_sweep(tmp_path / "s")), "--csv", csv])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and csv in err[0], err


def test_claims_over_a_sweep_where_every_run_failed_say_so(tmp_path, capsys):
    claim = {
        "name": "c",
        "metric": ACC,
        "a": {"attention": "multihead"},
        "b": {"attention": "soft"},
        "expect": "greater",
    }
    for attention in ("multihead", "soft"):
        for seed in (0, 1):
            config = flat_config("copy", attention, "sinusoidal", seed, claims=[claim])
            write(tmp_path / f"{attention}{seed}", result(f"{attention}{seed}", config, status="failed"))
    code = claims_main([str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "every run failed (4 runs)" in err[0], err
    assert "unknown" not in err[0]


@pytest.fixture
def small_disk(tmp_path):
    """A 300 kB tmpfs: full after a figure or two."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {proc.stderr.strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=False)


def test_full_disk_while_writing_the_report_is_one_line(tmp_path, small_disk, capsys):
    sweep = _sweep(tmp_path / "s")
    (small_disk / "filler").write_bytes(b"x" * 260_000)  # a report of two runs would otherwise fit
    started = time.perf_counter()
    code = report_main([str(sweep), "--out", str(small_disk / "report")])
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error:")]
    assert code == 2 and len(errors) == 1, err
    assert "no space left" in errors[0] and str(small_disk / "report") in errors[0]
    assert time.perf_counter() - started < 120
