"""A run cut short of its budget (max_time, early stopping, a signal) is marked in the report and never
compared as if it had its full budget."""

from __future__ import annotations

import warnings
from pathlib import Path

from analysis.data.collect import collect
from analysis.report.build import build_report
from tests.helpers.cell_fixtures import flat_config, result, write

ACC = "test/token_acc"


def sweep_with_a_short_run(root: Path) -> Path:
    for attention, base in (("local", 0.8), ("multihead", 0.6)):
        for seed in (0, 1):
            res = result(
                f"{attention}{seed}", flat_config("reverse", attention, "sinusoidal", seed), {ACC: base + seed / 100}
            )
            res["stop"] = {"reason": "max_steps", "step": 1000, "max_steps": 1000}
            write(root / f"{attention}{seed}", res)
    # a third multihead seed that max_time stopped at step 230: its low accuracy says nothing of multihead
    config = flat_config("reverse", "multihead", "sinusoidal", 2, **{"trainer.max_time": "00:00:05:00"})
    short = result("multihead2", config, {ACC: 0.05})
    short["stop"] = {"reason": "max_time", "step": 230, "max_steps": 1000}
    return write(root / "multihead2", short)


def test_a_run_stopped_short_is_left_out_with_its_reason(tmp_path: Path) -> None:
    short = sweep_with_a_short_run(tmp_path)
    runs = collect([tmp_path])
    assert sorted(runs.runs["run_id"]) == ["local0", "local1", "multihead0", "multihead1"]
    assert dict(zip(runs.dropped["source"], runs.dropped["reason"])) == {str(short): "stopped at 230/1000 by max_time"}
    assert "trainer.max_time" not in runs.factors  # its limit does not make a factor of the others
    # the cell means are over the full-budget seeds only (hand-computed: 0.60 and 0.61)
    multihead = runs.runs[runs.runs["attention"] == "multihead"]
    assert multihead[ACC].mean() == (0.6 + 0.61) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        markdown = (build_report([tmp_path], tmp_path / "out", paper_files=False).parent / "report.md").read_text()
    assert "stopped at 230/1000 by max_time" in markdown


def test_results_without_a_stop_record_are_compared_as_before(tmp_path: Path) -> None:
    for seed in (0, 1):
        write(
            tmp_path / f"r{seed}", result(f"r{seed}", flat_config("reverse", "local", "sinusoidal", seed), {ACC: 0.5})
        )
    runs = collect([tmp_path])
    assert len(runs.runs) == 2 and len(runs.dropped) == 0
