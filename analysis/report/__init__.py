"""The report of a sweep (``python -m analysis.report``), in rooms, lowest first: ``document`` (the document model
and its renderers), ``plan`` (the cells laid out in tables, the baseline, the ranking), ``figures``, ``sections``
(one module a section, registered) and ``front`` (the lead); at the top ``build`` puts them together, ``exports``
writes the files and ``tuned`` and ``timing`` are commands of their own. A room imports only the rooms below it.

``from analysis.report import build_report`` and ``main`` stay the public import; they load ``build`` on first use,
so that a module of this package (``document.model``, ``figures.plots``) can be imported without the whole report.
"""

from __future__ import annotations

from typing import Any

PUBLIC = ("build_report", "main", "ReportError")


def __getattr__(name: str) -> Any:
    if name in PUBLIC:
        from analysis.report import build

        return getattr(build, name)
    raise AttributeError(f"module 'analysis.report' has no attribute {name!r}")
