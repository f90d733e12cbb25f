"""analysis.dashboards.wandb_dashboard: the specification, the wandb-workspaces report built from it, and the
offline CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from analysis.dashboards.wandb_dashboard import GROUP_BY, build, specification
from tests.helpers.env import environment
from tests.helpers.paths import ROOT


def panels(spec: dict) -> list[dict]:
    return [p for b in spec["blocks"] if b["type"] == "PanelGrid" for p in b["panels"]]


def test_specification_covers_length_curves_cost_and_maps_of_one_group() -> None:
    spec = specification("attnlab", "quick", "me")
    grids = [b for b in spec["blocks"] if b["type"] == "PanelGrid"]
    assert all(g["runset"]["filters"] == "Group = 'quick'" and g["runset"]["project"] == "attnlab" for g in grids)
    lines = [p for p in panels(spec) if p["type"] == "LinePlot" and p["x"] == "length"]
    # the keys the training app logs (experiments/record/wandb_tables.py) against `length`
    assert {p["y"][0] for p in lines} >= {"by_length/seq_acc", "by_length/alignment"}
    assert grids[0]["runset"]["groupby"] == GROUP_BY == ["config.attention.name", "config.position.name"]
    assert any(p["type"] == "BarPlot" and p["metrics"] == ["cost/train_seconds"] for p in panels(spec))
    assert any(p["type"] == "MediaBrowser" and "attention/cross/0" in p["media_keys"] for p in panels(spec))


def test_wandb_workspaces_accepts_every_panel() -> None:
    pytest.importorskip("wandb_workspaces")
    import wandb_workspaces.reports.v2 as wr

    spec = specification("attnlab", "quick", "me")
    report = build(spec)
    assert isinstance(report, wr.Report) and report.title == "attnlab: quick"
    grids = [b for b in report.blocks if isinstance(b, wr.PanelGrid)]
    assert len(grids) == sum(b["type"] == "PanelGrid" for b in spec["blocks"])
    built = [type(p).__name__ for g in grids for p in g.panels]
    assert built == [p["type"] for p in panels(spec)]
    assert grids[0].runsets[0].groupby == GROUP_BY


def test_without_a_key_it_prints_the_specification_and_exits_0() -> None:
    env = environment()
    done = subprocess.run(
        [sys.executable, "-m", "analysis.dashboards.wandb_dashboard", "--project", "attnlab", "--group", "g"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == specification("attnlab", "g")
    assert "printed the report specification" in done.stderr
