"""The report of a sweep (``python -m analysis.report``): a document model (document), the grid of cells (layout,
baseline), sections, summary, figures, the attention and cost sections, put together by build.

``from analysis.report import build_report`` and ``main`` stay the public import; they load ``build`` on first use,
so that a module of this package (``document``, ``figures``) can be imported without the whole report.
"""

from __future__ import annotations

from typing import Any

PUBLIC = ("build_report", "main", "ReportError")


def __getattr__(name: str) -> Any:
    if name in PUBLIC:
        from analysis.report import build

        return getattr(build, name)
    raise AttributeError(f"module 'analysis.report' has no attribute {name!r}")
