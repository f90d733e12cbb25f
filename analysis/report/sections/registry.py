"""The report-section registry: each section after the report's lead is one entry, registered beside its code.

    from analysis.report.sections.registry import SECTIONS

    @SECTIONS.register("failures", order=50, inputs=("frame",))
    def failures(frame: pd.DataFrame) -> Section | None: ...

An entry declares its place in the reading order (``order``, lower first) and its ``inputs``: the names of what
it reads, which are its function's parameters, each a field of the report's ``ReportContext`` (``frame``,
``plans``, ``paths``, ``figures_dir``, ...) or one of ``EXTRA_INPUTS``. The function returns a ``Section``, a
list of them, or None when it has nothing to show. The registry scans ``analysis.report.sections``
(attnlab/registry.py), so a new module there with a registered function is a new section with no list to edit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from analysis.report.document.model import Section
from analysis.report.sections.context import ReportContext
from attnlab.registry import Registry

if TYPE_CHECKING:
    from analysis.report.plan.bench_cells import CellBench
    from analysis.report.plan.summary import TaskSummary


@dataclass(frozen=True)
class SectionEntry:
    """What a section declares: where it goes (``order``, lower first) and what it reads (``inputs``)."""

    order: int
    inputs: tuple[str, ...]


SectionFunction = Callable[..., "Section | list[Section] | None"]
SECTIONS: Registry[SectionFunction] = Registry("report section", SectionEntry, package="analysis.report.sections")

# What a section may read besides the context's fields: the whole context (a section that reads most of it), the
# lead's per-task summaries, the cells measured at long T (--bench without a file) and the benchmark JSON read or
# measured (None without --bench).
EXTRA_INPUTS = ("ctx", "task_summaries", "measured", "bench")


def input_names() -> list[str]:
    """Every name a section may declare among its inputs."""
    return sorted({*(f.name for f in dataclasses.fields(ReportContext)), "frame", *EXTRA_INPUTS})


@dataclass(frozen=True)
class SectionInputs:
    """One report's inputs as the sections read them: the context, and what the lead and --bench made."""

    ctx: ReportContext
    task_summaries: dict[str, TaskSummary]
    measured: CellBench | None
    bench: dict[str, Any] | None

    def get(self, name: str) -> Any:
        if name in EXTRA_INPUTS:
            return getattr(self, name)
        if name not in input_names():
            raise ValueError(f"report section input {name!r} is unknown; choose one of {input_names()}")
        return getattr(self.ctx, name)


def in_order() -> list[str]:
    """The section names in reading order (by ``order``, then name)."""
    return sorted(SECTIONS.names(), key=lambda name: (SECTIONS.declared(name).order, name))


def build_sections(inputs: SectionInputs) -> dict[str, list[Section]]:
    """Every registered section, in reading order, each called with exactly the inputs it declared."""
    built: dict[str, list[Section]] = {}
    for name in in_order():
        made = SECTIONS.get(name)(**{key: inputs.get(key) for key in SECTIONS.declared(name).inputs})
        built[name] = [] if made is None else [made] if isinstance(made, Section) else list(made)
    return built
