"""Report sections are one registry kind: each declares its place and its inputs, its function takes exactly
those inputs, and a throwaway section registered here appears in a report with no other edit."""

from __future__ import annotations

import inspect
from pathlib import Path

import pandas as pd
import pytest

from analysis.report import build_report
from analysis.report.document.model import Paragraph, Section
from analysis.report.sections.registry import SECTIONS, in_order, input_names
from attnlab.registry import registry
from tests.helpers.cell_fixtures import flat_config, result, write


def section_problems() -> tuple[list[str], list[str]]:
    """(the sections checked, what is wrong with any): a section's function takes exactly the inputs it declared,
    by name, and each is something a section may read."""
    problems = []
    for name in SECTIONS.names():
        declared = SECTIONS.declared(name)
        params = list(inspect.signature(SECTIONS.get(name)).parameters)
        if sorted(params) != sorted(declared.inputs):
            problems.append(f"{name}: declares {sorted(declared.inputs)} but takes {sorted(params)}")
        unknown = sorted(set(declared.inputs) - set(input_names()))
        if unknown:
            problems.append(f"{name}: inputs {unknown} are nothing a section can read")
    return SECTIONS.names(), problems


def tiny_sweep(root: Path) -> Path:
    """Two cells of two seeds and one failed run, in the training app's result.json shape."""
    for i, (attention, seed, acc) in enumerate([("multihead", 0, 0.5), ("multihead", 1, 0.6), ("local", 0, 0.7)]):
        config = flat_config("copy", attention, "sinusoidal", seed)
        write(root / f"run{i}", result(f"r{i}", config, {"test/token_acc": acc}))
    write(root / "bad", result("bad", flat_config("copy", "local", "sinusoidal", 1), status="failed"))
    return root


def headings(report: Path) -> list[str]:
    return [line for line in (report / "report.md").read_text().splitlines() if line.startswith("## ")]


def test_every_section_takes_exactly_the_inputs_it_declares():
    checked, problems = section_problems()
    assert problems == []
    assert {"overview", "confounds", "task details", "failures", "provenance"} <= set(checked)
    assert registry("report section") is SECTIONS
    # the reading order: the overview first, the provenance last
    assert in_order()[0] == "overview" and in_order()[-1] == "provenance"


@pytest.mark.filterwarnings("ignore:.*cost.step_ms")  # the fixture's runs record no step time
def test_a_throwaway_section_is_one_registered_function(tmp_path):
    @SECTIONS.register("throwaway", order=85, inputs=("frame", "paths"))
    def throwaway(frame: pd.DataFrame, paths: list[str]) -> Section:
        return Section("Throwaway", [Paragraph(f"{len(frame)} runs read from {len(paths)} folder(s).")])

    try:
        checked, problems = section_problems()
        assert "throwaway" in checked and problems == []
        out = build_report([tiny_sweep(tmp_path / "sweep")], tmp_path / "report")
        shown = headings(out.parent)
        # after the failures (order 50), before the provenance (90)
        assert shown.index("## Failed and diverged runs") < shown.index("## Throwaway") < shown.index("## Provenance")
        assert "4 runs read from 1 folder(s)." in (out.parent / "report.md").read_text()
    finally:
        SECTIONS.unregister("throwaway")
    assert "## Throwaway" not in headings(build_report([tmp_path / "sweep"], tmp_path / "again").parent)


def test_a_section_that_declares_what_its_function_does_not_take_is_found():
    @SECTIONS.register("misdeclared", order=99, inputs=("frame",))
    def misdeclared(runs: pd.DataFrame) -> None:
        return None

    try:
        assert section_problems()[1] == ["misdeclared: declares ['frame'] but takes ['runs']"]
    finally:
        SECTIONS.unregister("misdeclared")
