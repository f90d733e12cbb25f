"""The report's figures: how they look (``figure_style``), the canvas they are drawn on and saved from
(``figure_canvas``), the drawings (``plots``, ``summary_figure``, ``frontier_figure``, ``study_plots``) and
the figures of one table of a task (``report_figures``). Imports the plan and the document model below it.

``from analysis.report import figures`` gives the notebook helpers of ``plots`` (``figures.learning_curves``,
``figures.length_generalisation``, ...: docs/configuration.md), loaded on first use, so that importing one module
of this room does not load the others.
"""

from __future__ import annotations

from typing import Any

NOTEBOOK = ("length_generalisation", "learning_curves", "parameter_curve", "attention_maps", "bench_scaling")


def __getattr__(name: str) -> Any:
    if name in NOTEBOOK:
        from analysis.report.figures import plots

        return getattr(plots, name)
    raise AttributeError(f"module 'analysis.report.figures' has no attribute {name!r}; choose one of {NOTEBOOK}")
