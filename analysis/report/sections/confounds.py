"""The report's "Confounds" section: the rule that makes a confound and the confounds of every task (the same
table goes to confounds.csv)."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from analysis.data.confounds import CONFOUND_COLUMNS
from analysis.report.document.model import Paragraph, Section, Table
from analysis.report.plan.task_plan import TaskPlan
from analysis.report.sections.registry import SECTIONS


def confounds_section(plans: list[TaskPlan], asked: Sequence[str] | None) -> tuple[Section, pd.DataFrame]:
    """The rule that makes a confound, and the confounds of every task (also written to confounds.csv)."""
    rule = (
        "A confound is a difference between runs that is not a factor asked for: "
        + (
            f"the factors asked for are {', '.join(asked)} (--factors); "
            if asked
            else "by default every varying config key in which two cells differ alone (a controlled comparison), "
            "except budget and provenance keys (training steps, data sizes, device, kernels); "
        )
        + "the environment (torch, python, device, code version, package versions) counts too. Confounded "
        "runs stay separate cells, and every comparison between cells that differ in one carries ⚠."
    )
    table = pd.concat(
        [p.confounds.table(p.task) for p in plans] or [pd.DataFrame(columns=CONFOUND_COLUMNS)], ignore_index=True
    )
    section = Section("Confounds", [Paragraph(rule)])
    if table.empty:
        section.add(
            Paragraph("None: within each task the cells differ only in the factors asked for, on one environment.")
        )
    else:
        rows = [[r.task, r.key, r.kind, r.values, r.cells] for r in table.itertuples(index=False)]
        section.add(
            Table(
                ["task", "key", "kind", "values", "cells [value]"],
                rows,
                caption="Keys that differ between the compared runs but are not factors asked for",
            )
        )
    return section, table


@SECTIONS.register("confounds", order=20, inputs=("plans", "factors"))
def confounds(plans: list[TaskPlan], factors: Sequence[str] | None) -> Section:
    """The report's "Confounds" section (its table also goes to confounds.csv, ``confounds_section``)."""
    return confounds_section(plans, factors)[0]
