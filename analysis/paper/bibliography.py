"""The report's ``references.bib``: the papers behind every variant, task, metric and statistical test it shows.

Variants and tasks declare their papers at registration, as keys into the one
bibliography (``attnlab/bibliography.py``); each run records the BibTeX of the variants
it used in its result.json (``references``), so the report reads them from files like
everything else. The statistical tests and metrics the analysis itself uses are named
here by key. Entries are kept once per key, in the order first met (variants, tasks,
metrics, statistics).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pandas as pd

from attnlab.bibliography import BIBLIOGRAPHY, entry_key

# The model every run trains.
TRANSFORMER = "vaswani2017attention"
ARCHITECTURE = "architecture: Transformer"

# What the analysis computes, by the name the report uses for it -> the citation key.
STATISTICS = {
    "t-interval": "student1908probable",  # mean ± 95% t-interval over seeds
    "welch": "welch1947generalization",  # Welch's t-test (unequal variances), against the best or the baseline
    "holm": "holm1979simple",  # Holm's step-down correction of each family of tests
    "tost": "schuirmann1987comparison",  # two one-sided tests, equivalence claims
    "cohen-d": "cohen1988statistical",  # Cohen's d in the comparisons; power analysis of claims
}
# Metrics computed by a library that asks to be cited (sacreBLEU: BLEU and chrF, with its signature).
METRICS = {"bleu": ("papineni2002bleu", "post2018call"), "chrf": ("popovic2015chrf", "post2018call")}


@dataclass
class Bibliography:
    """BibTeX entries by key, first met first; ``cited_by`` says what brought each key in."""

    entries: dict[str, str] = field(default_factory=dict)
    cited_by: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, bibtex: Iterable[str] | str, origin: str) -> list[str]:
        """Add entries (a duplicate key keeps the first text); returns their keys."""
        keys = []
        for entry in [bibtex] if isinstance(bibtex, str) else bibtex:
            key = entry_key(entry)
            if key in self.entries and _normal(self.entries[key]) != _normal(entry):
                self.notes.append(
                    f"{origin} declares {key} differently from {', '.join(self.cited_by[key])}; the first is kept"
                )
            self.entries.setdefault(key, entry.strip())
            if origin not in self.cited_by.setdefault(key, []):
                self.cited_by[key].append(origin)
            keys.append(key)
        return keys

    def keys_of(self, origin: str) -> list[str]:
        return [k for k, origins in self.cited_by.items() if origin in origins]

    def text(self) -> str:
        header = (
            "% The papers behind the variants, tasks, metrics and statistics of this report (attnlab).\n"
            "% Each entry is cited by: "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in self.cited_by.items())
            + "\n"
            + "".join(f"% Note: {note}\n" for note in self.notes)
        )
        return header + "\n" + "\n\n".join(self.entries.values()) + "\n"

    def write(self, path: Path) -> Path:
        path.write_text(self.text(), encoding="utf-8")
        return path


def _normal(entry: str) -> str:
    return re.sub(r"\s+", " ", entry).strip()


def variant_origin(registry: str, name: str) -> str:
    """How a variant is named in the bibliography: ``attention=local``."""
    return f"{registry}={name}"


def statistics_used(
    summaries: Iterable, comparisons: Iterable[pd.DataFrame], claims: pd.DataFrame | None, cells: pd.DataFrame
) -> list[str]:
    """The names in STATISTICS of the procedures whose results the report shows.

    ``summaries``: the per-task rankings (``analysis.report.plan.summary.TaskSummary``); ``comparisons``:
    the frames of tests against the baseline; ``claims``: the claims' results; ``cells``: the
    per-cell summaries (an interval exists where a cell has two seeds or more).
    """
    used = []
    if len(cells) and (pd.to_numeric(cells["n"], errors="coerce") >= 2).any():
        used.append("t-interval")
    tested = any(math.isfinite(p) for s in summaries for c in s.columns for p in c.ranking["p"].astype(float))
    compared = [c for c in comparisons if len(c) and pd.to_numeric(c["p"], errors="coerce").notna().any()]
    if tested or compared:
        used += ["welch", "holm"]
    if compared:
        used.append("cohen-d")
    if claims is not None and len(claims):
        tests = [str(t) for t in claims["test"] if isinstance(t, str) and t != "—"]
        if any("TOST" in t for t in tests):
            used.append("tost")
        if any("Welch" in t for t in tests):
            used.append("welch")
        if tests:
            used += ["holm", "cohen-d"]  # Holm over the claims; the seeds needed come from a power analysis
    return list(dict.fromkeys(used))


def report_bibliography(frame: pd.DataFrame, metrics: Iterable[str], statistics: Iterable[str]) -> Bibliography:
    """The entries for the runs in ``frame`` (its ``references`` column), the metrics shown and the statistics used.

    A run recorded without references (written before runs recorded them) leaves its variants
    uncited; the bibliography's notes name them.
    """
    bib = Bibliography()
    missing = set()
    for refs, row in zip(_column(frame, "references"), frame.to_dict("records")):
        if not isinstance(refs, list):
            missing.update({f"attention={row['attention']}", f"position={row['position']}", f"task={row['task']}"})
            continue
        for ref in refs:
            bib.add(ref.get("bibtex") or [], variant_origin(ref["registry"], ref["name"]))
            if not ref.get("bibtex"):
                missing.add(variant_origin(ref["registry"], ref["name"]))
    if missing:
        bib.notes.append(
            "no reference recorded for " + ", ".join(sorted(missing)) + " (runs written before "
            "result.json carried references, or variants registered without any): add their papers "
            "by hand"
        )
    if len(frame):
        bib.add(BIBLIOGRAPHY[TRANSFORMER], ARCHITECTURE)
    for metric in metrics:
        name = metric.rsplit("/", 1)[-1]
        if name in METRICS:
            bib.add([BIBLIOGRAPHY[key] for key in METRICS[name]], f"metric {name}")
    for name in statistics:
        bib.add(BIBLIOGRAPHY[STATISTICS[name]], f"statistics: {name}")
    return bib


def _column(frame: pd.DataFrame, name: str) -> list:
    return list(frame[name]) if name in frame.columns else [None] * len(frame)
