"""Confounds: differences between compared runs that are not a factor the user asked for.

The rule (also in docs/sweeps.md, Ablations over any parameter):

- The factors the user asked for are the ``--factors`` given, else every
  varying config key in which two cells differ alone (a controlled comparison:
  ``analysis.report.plan.layout.asked_factors``), except budget and provenance keys
  (``analysis.data.cells.BUDGET_KEYS``, ``PROVENANCE_KEYS``: training steps, data
  sizes, device, kernels).
- Any other config key that varies within a task is a confound: a budget or
  provenance key, a factor not named with ``--factors``, or an uncontrolled
  difference (a learning rate changed in one cell only; two keys that always
  change together). Such runs are still separate cells, never pooled, but a
  comparison between two cells that differ in it carries the key in its row.
- A key nested under an asked factor (``attention.window`` under ``attention``)
  is no confound between cells whose asked factor differs: the window is part
  of what ``local`` means next to ``multihead``.
- The environment (``ENV_KEYS``: torch, python, device, code version and the
  package versions) is not part of a cell, but when it differs between two
  cells, or between the seeds of one cell, that is flagged the same way.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

import pandas as pd

from analysis.data.cells import BUDGET_KEYS, PROVENANCE_KEYS, factor_parent, format_value, is_missing, normalise

ENV_KEYS = ("env.torch", "env.python", "env.device", "env.git_sha")
PACKAGES_COLUMN = "env.packages"
CONFOUND_COLUMNS = ["task", "key", "kind", "values", "cells"]


def run_environment(row: Mapping[str, Any]) -> dict[str, str]:
    """The environment of one run as flat keys: ``env.torch``, ``env.packages.numpy`` ..."""
    env = {k: str(row[k]) for k in ENV_KEYS if k in row and not is_missing(row[k])}
    packages = row.get(PACKAGES_COLUMN)
    if isinstance(packages, Mapping):
        env.update({f"{PACKAGES_COLUMN}.{name}": str(v) for name, v in packages.items()})
    return env


def environments(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run (indexed like ``runs``), one column per environment key."""
    return pd.DataFrame([run_environment(r) for r in runs.to_dict("records")], index=runs.index)


def kind_of(key: str, named: bool = False) -> str:
    """environment, budget, provenance, not asked (with --factors) or uncontrolled (no two cells differ in it alone)."""
    if key.startswith("env."):
        return "environment"
    if key in BUDGET_KEYS:
        return "budget"
    if key in PROVENANCE_KEYS:
        return "provenance"
    return "not asked" if named else "uncontrolled"


def confound_keys(task_factors: Sequence[str], designed: Sequence[str]) -> list[str]:
    """The varying config keys of a task that are not factors the user asked for."""
    return [k for k in task_factors if k not in designed]


def explained(key: str, a: Mapping[str, Any], b: Mapping[str, Any], designed: Sequence[str]) -> bool:
    """True when ``key`` is nested under an asked factor whose value differs between cells a and b."""
    parent = factor_parent(key, designed)
    while parent is not None:
        if parent in designed and normalise(a.get(parent)) != normalise(b.get(parent)):
            return True
        parent = factor_parent(parent, designed)
    return False


class Confounds:
    """The confounds of one task: per key which cells differ, and the flag of any pair of its cells."""

    def __init__(
        self, task_runs: pd.DataFrame, task_factors: Sequence[str], designed: Sequence[str], named: bool = False
    ):
        self.designed = list(designed)
        self.named = named
        self.keys = confound_keys(task_factors, designed)
        first = task_runs.drop_duplicates("cell").set_index("cell")
        self.values = {c: r for c, r in zip(first.index, first.to_dict("records"))}
        env = environments(task_runs)
        env["cell"] = task_runs["cell"].to_numpy()
        self.env: dict[str, dict[str, frozenset]] = {}
        self.env_keys = []
        for key in [c for c in env.columns if c != "cell"]:
            per_cell = {
                c: frozenset(str(v) for v in g[key] if not is_missing(v)) for c, g in env.groupby("cell")[[key]]
            }
            if len(set().union(*per_cell.values())) > 1:
                self.env_keys.append(key)
                self.env[key] = per_cell
        self.labels = {c: r.get("cell_label") for c, r in self.values.items()}

    def between(self, a: str, b: str) -> list[str]:
        """The confound keys in which cells a and b differ (an environment key also when it varies inside one)."""
        va, vb = self.values.get(a, {}), self.values.get(b, {})
        flags = [
            k
            for k in self.keys
            if normalise(va.get(k)) != normalise(vb.get(k)) and not explained(k, va, vb, self.designed)
        ]
        for key in self.env_keys:
            sa, sb = self.env[key].get(a, frozenset()), self.env[key].get(b, frozenset())
            if sa != sb or len(sa) > 1 or len(sb) > 1:
                flags.append(key)
        return flags

    def table(self, task: str) -> pd.DataFrame:
        """One row per confound key: its kind, the values with their cell counts, and the cells."""
        rows = []
        for key in self.keys:
            counts = Counter(format_value(r.get(key)) for r in self.values.values())
            rows.append(
                {
                    "task": task,
                    "key": key,
                    "kind": kind_of(key, self.named),
                    "values": ", ".join(f"{v} ({n} cells)" for v, n in sorted(counts.items())),
                    "cells": "; ".join(
                        sorted(f"{self.labels[c]} [{format_value(r.get(key))}]" for c, r in self.values.items())
                    ),
                }
            )
        for key in self.env_keys:
            per_cell = self.env[key]
            counts = Counter(v for vs in per_cell.values() for v in vs)
            within = sorted(self.labels[c] for c, vs in per_cell.items() if len(vs) > 1)
            text = "; ".join(sorted(f"{self.labels[c]} [{', '.join(sorted(vs)) or '—'}]" for c, vs in per_cell.items()))
            if within:
                text += f" (varies between the seeds of: {'; '.join(within)})"
            rows.append(
                {
                    "task": task,
                    "key": key,
                    "kind": kind_of(key),
                    "values": ", ".join(f"{v} ({n} cells)" for v, n in sorted(counts.items())),
                    "cells": text,
                }
            )
        return pd.DataFrame(rows, columns=CONFOUND_COLUMNS)
