"""The report's ``references.bib``: the papers behind every variant, task, metric and statistical test it shows.

Variants and tasks declare their papers at registration (``register(name,
references=BIBTEX)``); each run records those of the variants it used in its
result.json (``references``), so the report reads them from files like everything
else and a variant loaded from a plugin brings its own. The statistical tests and
metrics the analysis itself uses are declared here. Entries are kept once per key,
in the order first met (variants, tasks, metrics, statistics).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pandas as pd

STUDENT_1908 = r"""@article{student1908probable,
  author    = {{Student}},
  title     = {The Probable Error of a Mean},
  journal   = {Biometrika},
  volume    = {6},
  number    = {1},
  pages     = {1--25},
  year      = {1908}
}"""

WELCH_1947 = r"""@article{welch1947generalization,
  author    = {Welch, Bernard L.},
  title     = {The Generalization of `{Student's}' Problem when Several Different Population Variances are Involved},
  journal   = {Biometrika},
  volume    = {34},
  number    = {1--2},
  pages     = {28--35},
  year      = {1947}
}"""

HOLM_1979 = r"""@article{holm1979simple,
  author    = {Holm, Sture},
  title     = {A Simple Sequentially Rejective Multiple Test Procedure},
  journal   = {Scandinavian Journal of Statistics},
  volume    = {6},
  number    = {2},
  pages     = {65--70},
  year      = {1979}
}"""

SCHUIRMANN_1987 = r"""@article{schuirmann1987comparison,
  author    = {Schuirmann, Donald J.},
  title     = {A Comparison of the Two One-Sided Tests Procedure and the Power Approach for Assessing the
               Equivalence of Average Bioavailability},
  journal   = {Journal of Pharmacokinetics and Biopharmaceutics},
  volume    = {15},
  number    = {6},
  pages     = {657--680},
  year      = {1987}
}"""

COHEN_1988 = r"""@book{cohen1988statistical,
  author    = {Cohen, Jacob},
  title     = {Statistical Power Analysis for the Behavioral Sciences},
  edition   = {2nd},
  publisher = {Lawrence Erlbaum Associates},
  year      = {1988}
}"""

PAPINENI_2002 = r"""@inproceedings{papineni2002bleu,
  author    = {Papineni, Kishore and Roukos, Salim and Ward, Todd and Zhu, Wei-Jing},
  title     = {{BLEU}: a Method for Automatic Evaluation of Machine Translation},
  booktitle = {Proceedings of the 40th Annual Meeting of the Association for Computational Linguistics},
  pages     = {311--318},
  year      = {2002}
}"""

POPOVIC_2015 = r"""@inproceedings{popovic2015chrf,
  author    = {Popovi{\'c}, Maja},
  title     = {{chrF}: character n-gram {F}-score for automatic {MT} evaluation},
  booktitle = {Proceedings of the Tenth Workshop on Statistical Machine Translation},
  pages     = {392--395},
  year      = {2015}
}"""

POST_2018 = r"""@inproceedings{post2018call,
  author    = {Post, Matt},
  title     = {A Call for Clarity in Reporting {BLEU} Scores},
  booktitle = {Proceedings of the Third Conference on Machine Translation: Research Papers},
  pages     = {186--191},
  year      = {2018}
}"""

# The model every run trains (the same entry as variants.papers.VASWANI_2017, which the analysis does not import).
TRANSFORMER = r"""@inproceedings{vaswani2017attention,
  author    = {Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and
               Gomez, Aidan N. and Kaiser, {\L}ukasz and Polosukhin, Illia},
  title     = {Attention Is All You Need},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {30},
  year      = {2017}
}"""
ARCHITECTURE = "architecture: Transformer"

# What the analysis computes, by the name the report uses for it.
STATISTICS = {
    "t-interval": STUDENT_1908,   # mean ± 95% t-interval over seeds
    "welch": WELCH_1947,          # Welch's t-test (unequal variances), against the best or the baseline cell
    "holm": HOLM_1979,            # Holm's step-down correction of each family of tests
    "tost": SCHUIRMANN_1987,      # two one-sided tests, equivalence claims
    "cohen-d": COHEN_1988,        # Cohen's d in the comparisons; power analysis of claims
}
# Metrics computed by a library that asks to be cited (sacreBLEU: BLEU and chrF, with its signature).
METRICS = {"bleu": (PAPINENI_2002, POST_2018), "chrf": (POPOVIC_2015, POST_2018)}

_HEAD = re.compile(r"^\s*@\s*([A-Za-z]+)\s*\{\s*([^,\s{}]+)\s*,", re.S)


def entry_key(bibtex: str) -> str:
    """The citation key of one BibTeX entry (``@article{holm1979simple, ...}`` -> ``holm1979simple``)."""
    found = _HEAD.match(bibtex)
    if found is None:
        raise ValueError(f"not a BibTeX entry (expected '@type{{key,'): {bibtex[:60]!r}")
    return found.group(2)


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
                self.notes.append(f"{origin} declares {key} differently from {', '.join(self.cited_by[key])}; "
                                  "the first is kept")
            self.entries.setdefault(key, entry.strip())
            if origin not in self.cited_by.setdefault(key, []):
                self.cited_by[key].append(origin)
            keys.append(key)
        return keys

    def keys_of(self, origin: str) -> list[str]:
        return [k for k, origins in self.cited_by.items() if origin in origins]

    def text(self) -> str:
        header = ("% The papers behind the variants, tasks, metrics and statistics of this report (attnlab).\n"
                  "% Each entry is cited by: " + "; ".join(f"{k}: {', '.join(v)}"
                                                          for k, v in self.cited_by.items()) + "\n"
                  + "".join(f"% Note: {note}\n" for note in self.notes))
        return header + "\n" + "\n\n".join(self.entries.values()) + "\n"

    def write(self, path: Path) -> Path:
        path.write_text(self.text(), encoding="utf-8")
        return path


def _normal(entry: str) -> str:
    return re.sub(r"\s+", " ", entry).strip()


def variant_origin(registry: str, name: str) -> str:
    """How a variant is named in the bibliography: ``attention=local``."""
    return f"{registry}={name}"


def statistics_used(summaries: Iterable, comparisons: Iterable[pd.DataFrame], claims: pd.DataFrame | None,
                    cells: pd.DataFrame) -> list[str]:
    """The names in STATISTICS of the procedures whose results the report shows.

    ``summaries``: the per-task rankings (``analysis.report.summary.TaskSummary``); ``comparisons``:
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
        bib.notes.append("no reference recorded for " + ", ".join(sorted(missing)) + " (runs written before "
                         "result.json carried references, or variants registered without any): add their papers "
                         "by hand")
    if len(frame):
        bib.add(TRANSFORMER, ARCHITECTURE)
    for metric in metrics:
        name = metric.rsplit("/", 1)[-1]
        if name in METRICS:
            bib.add(METRICS[name], f"metric {name}")
    for name in statistics:
        bib.add(STATISTICS[name], f"statistics: {name}")
    return bib


def _column(frame: pd.DataFrame, name: str) -> list:
    return list(frame[name]) if name in frame.columns else [None] * len(frame)
