"""The "Ablations over any parameter" example of docs/sweeps.md runs as printed and its report has one row per
window."""

from __future__ import annotations

import shlex
import sys

import pandas as pd
import pytest

from tests.docs.test_readme import doc_block
from tests.helpers.cell_fixtures import md_table
from tests.helpers.env import ENV
from tests.helpers.paths import ROOT
from tests.helpers.warm import run_module

SWEEPS = ROOT / "docs" / "sweeps.md"


def commands(block: str) -> list[list[str]]:
    """The shell commands of a docs block, continuation lines joined, ``python`` as this interpreter."""
    joined = block.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        if line.strip().startswith("python "):
            argv = shlex.split(line)
            out.append([sys.executable, *argv[1:]])
    return out


@pytest.mark.slow
def test_sweeps_page_window_ablation_runs_as_printed(tmp_path):
    block = doc_block(SWEEPS, "## Ablations over any parameter", "")
    train, report = commands(block)
    assert train[1:4] == ["-m", "experiments.train", "-m"] and report[1:3] == ["-m", "analysis.report"]
    windows = next(a for a in train if a.startswith("attention.window=")).split("=", 1)[1].split(",")
    for argv in (train, report):  # `python -m module ...` as printed, from a Python with the stack imported
        proc = run_module(argv[2], *argv[3:], cwd=tmp_path, env=ENV, timeout=500)
        assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / report[report.index("--out") + 1]
    markdown = (out / "report.md").read_text()
    table = md_table(markdown, "test/token_acc on reverse:")
    assert list(table) == windows  # one row per window, in numeric order
    cells = pd.read_csv(out / "cells.csv")
    cells = cells[cells["metric"] == "test/token_acc"]
    assert sorted(cells["cell_label"]) == sorted(f"attention.window={w}" for w in windows)
    assert (cells["n"] == 1).all()
    # The block's printed table is a table of this report: same caption, same rows.
    printed = md_table(doc_block(SWEEPS, "gives one row per window", ""), "val/loss on reverse:")
    assert list(printed) == list(md_table(markdown, "val/loss on reverse:")) == windows
