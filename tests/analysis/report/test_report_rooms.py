"""analysis/report/'s rooms, read with ``ast`` (tests/project/test_imports.py's graph; nothing is imported).

Lowest first: ``document`` (the document model) <- ``plan`` (what is compared) <- ``figures`` <- ``sections`` <-
``front`` (the lead) <- the top (build, its exports and the commands). A module imports from its own room and
the rooms below it, never from one above, so the rooms stand in no circle; every import counts, a deferred one
too. Sections register themselves and the registry scans ``analysis.report.sections`` only, so every section
lives there.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.project.test_imports import graph, modules

REPORT = "analysis.report"
ROOMS = ("document", "plan", "figures", "sections", "front")  # lowest first
# the top: the package's front door, the commands and what assembles and publishes the report
TOP = {"__init__", "__main__", "build", "exports", "inputs", "timing", "tuned", "wandb_artifact"}


def rank(module: str) -> int | None:
    """The height of a module's room (0: document); the top's modules stand above every room; None outside."""
    parts = module.split(".")
    if parts[:2] != REPORT.split(".") or len(parts) < 3:
        return None
    if parts[2] in ROOMS:
        return ROOMS.index(parts[2])
    return len(ROOMS) if parts[2] in TOP else None


def upward(edges: dict[str, set[str]]) -> set[str]:
    """Every import from a room into one above it."""
    return {
        f"{n} -> {m}"
        for n, targets in edges.items()
        for m in targets
        if rank(n) is not None and rank(m) is not None and rank(m) > rank(n)  # type: ignore[operator]
    }


def test_rooms_import_one_way() -> None:
    found = sorted(upward(graph()))
    assert not found, "imports up the report's rooms " + " < ".join(ROOMS) + " < top: " + "; ".join(found)


def test_a_planted_upward_import_is_found() -> None:
    edges = {
        "analysis.report.plan.summary": {"analysis.report.figures.summary_figure", "analysis.report.document.model"},
        "analysis.report.sections.frontier": {"analysis.report.plan.summary", "analysis.report.figures.plots"},
        "analysis.report.document.model": {"analysis.report.build"},
        "analysis.report.build": {"analysis.report.front.lead", "analysis.data.runs"},
        "analysis.claims.render": {"analysis.report.document.model"},
    }
    assert upward(edges) == {
        "analysis.report.plan.summary -> analysis.report.figures.summary_figure",
        "analysis.report.document.model -> analysis.report.build",
    }


def test_every_report_module_lives_in_a_room_or_at_the_top() -> None:
    report = [n for n in modules() if n.startswith(REPORT + ".")]
    loose = sorted(n for n in report if rank(n) is None and n.rpartition(".")[2] not in ROOMS)
    top = {n.split(".")[2] for n in report if n.count(".") == 2} - set(ROOMS)
    assert not loose, f"report modules outside the rooms {ROOMS}: {loose}"
    assert top == TOP - {"__init__"}, f"analysis/report/ holds at its top {sorted(top)}; the rest goes in a room"


def registered(path: Path) -> list[str]:
    """The names a module registers with ``@SECTIONS.register("name", ...)``, read from its syntax tree."""
    return [
        decorator.args[0].value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
        for decorator in node.decorator_list
        if isinstance(decorator, ast.Call)
        and ast.unparse(decorator.func) == "SECTIONS.register"
        and isinstance(decorator.args[0], ast.Constant)
    ]


def test_every_registered_section_lives_where_the_registry_scans() -> None:
    """The names registered in the source (read as text) are those the registry's scan finds."""
    from analysis.report.sections.registry import SECTIONS

    written = {name: registered(path) for name, path in modules().items() if name.startswith(REPORT + ".")}
    outside = sorted(n for n, names in written.items() if names and not n.startswith(REPORT + ".sections."))
    assert not outside, f"sections registered outside analysis/report/sections/, which the registry scans: {outside}"
    assert SECTIONS.package == REPORT + ".sections"
    assert sorted(SECTIONS.names()) == sorted(n for names in written.values() for n in names)
