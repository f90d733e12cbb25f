"""The two sides of a claim: the runs of one cell each (never a pool of cells), and their metric values."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from analysis.claims.scope import CONFIG_KEY
from attnlab.claims import Claim, ClaimError, split_metric

IDENTITY_KEYS = ("task", "attention", "position", "arch")
OUTCOMES = ("completed", "diverged", "failed")  # shown per side beside every verdict (and pruned, where any)


def _plain(value: Any) -> Any:
    """Comparable form of a frame or YAML value: integral floats as ints, numpy scalars as Python ones."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def _same(found: Any, wanted: Any) -> bool:
    found, wanted = _plain(found), _plain(wanted)
    if isinstance(found, bool) or isinstance(wanted, bool):
        return str(found).lower() == str(wanted).lower()
    if isinstance(found, (int, float)) and isinstance(wanted, (int, float)):
        return math.isclose(found, wanted, rel_tol=1e-9, abs_tol=0.0)
    return found is not None and str(found) == str(wanted)


def run_factors(runs) -> list[str]:
    """The factors the runs were collected with (none for a plain frame)."""
    return list(getattr(runs, "factors", None) or [])


def _column(frame: pd.DataFrame, factors: Sequence[str], key: str, field_name: str) -> str:
    """The frame column holding a side's key: the factor itself, a result column, or ``config.<key>``."""
    if (key in factors or key in IDENTITY_KEYS) and key in frame.columns:
        return key
    if f"config.{key}" in frame.columns:
        return f"config.{key}"
    known = sorted(set(factors) | {k for k in IDENTITY_KEYS if k in frame.columns})
    raise ClaimError(
        f"{field_name}.{key} is not a factor or config key of these runs; factors: "
        f"{', '.join(known) or 'none'}; any config key works too (optim.lr, attention.window)"
    )


def _describe(pairs: Iterable[tuple[str, Any]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in pairs)


def _varying(rows: pd.DataFrame, factors: Sequence[str]) -> list[str]:
    """The keys whose values differ among these runs: factors and task first, else any config key."""

    def differs(column: str) -> bool:
        return len({json.dumps(_plain(v), default=str) for v in rows[column]}) > 1

    keys = [k for k in ("task", *factors) if k in rows.columns and differs(k)]
    if keys:
        return list(dict.fromkeys(keys))
    skip = {"config.seed", CONFIG_KEY}
    return [c[len("config.") :] for c in rows.columns if c.startswith("config.") and c not in skip and differs(c)]


@dataclass
class Side:
    """The runs of one side of a claim: one cell, its completed seeds and their metric values."""

    label: str
    runs: pd.DataFrame
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dropped: str = ""  # completed runs left out, and why (a ratio over zero)

    @property
    def n(self) -> int:
        return len(self.values)

    def count(self, status: str) -> int:
        return int((self.runs["status"] == status).sum())

    def outcomes(self, scored: str = "") -> str:
        """``7 completed, 3 diverged (scored 0), 0 failed``: every run of the side, whatever became of it."""
        shown = [*OUTCOMES, *(["pruned"] if self.count("pruned") else [])]
        diverged = f" ({scored})" if scored and self.count("diverged") else ""
        return ", ".join(f"{self.count(s)} {s}{diverged if s == 'diverged' else ''}" for s in shown)

    def missing(self) -> str:
        """Why runs of this side have no value: the statuses of those that did not complete."""
        bad = self.runs[self.runs["status"] != "completed"]["status"].value_counts()
        return ", ".join([f"{n} {s}" for s, n in bad.items()] + ([self.dropped] if self.dropped else []))


def select_side(frame: pd.DataFrame, factors: Sequence[str], claim: Claim, side: str) -> Side:
    """The runs of side ``a`` or ``b`` (with the claim's where); exactly one cell or a ClaimError."""
    pairs = (claim.a if side == "a" else claim.b) or ()
    field_name = f"{claim.origin}.{side}"
    mask = np.ones(len(frame), dtype=bool)
    for key, wanted in (*claim.filters, *pairs):
        column = _column(frame, factors, key, field_name if (key, wanted) in pairs else f"{claim.origin}.where")
        hit = np.array([_same(v, wanted) for v in frame[column]], dtype=bool)
        if not (mask & hit).any():
            taken = sorted({str(_plain(v)) for v in frame.loc[mask, column] if v is not None})
            pinned = f" (with where {_describe(claim.filters)})" if claim.filters else ""
            raise ClaimError(
                f"{field_name}={{{_describe(pairs)}}}{pinned} matches no run: {key}={wanted!r} is not "
                f"among {', '.join(taken) or 'no values'}"
            )
        mask &= hit
    rows = frame[mask]
    cells = rows["cell"].unique() if "cell" in rows.columns else [None]
    if len(cells) > 1:
        extra = [k for k in _varying(rows, factors) if k not in dict(pairs) and k not in dict(claim.filters)]
        raise ClaimError(
            f"{field_name}={{{_describe(pairs)}}} covers {len(cells)} cells that differ in "
            f"{', '.join(extra) or 'their config'}; pin {'them' if len(extra) > 1 else 'it'} in the "
            f"claim's where (runs of different cells are never pooled)"
        )
    label = _describe(pairs)
    if "cell_label" in rows.columns and len(rows):
        label = f"{label} ({rows['cell_label'].iloc[0]})" if rows["cell_label"].iloc[0] != label else label
    return Side(label, rows)


def metric_values(rows: pd.DataFrame, by_length: pd.DataFrame, metric: str) -> pd.Series:
    """The metric per completed run (indexed by run_id), NaN where a run has no finite value."""
    done = rows[rows["status"] == "completed"]
    name, length = split_metric(metric)
    if length is None:
        values = done.set_index("run_id")[name].astype(float)
    else:
        picked = by_length[(by_length["metric"] == name) & (by_length["length"] == length)]
        values = picked.set_index("run_id")["value"].reindex(done["run_id"]).astype(float)
    return values[np.isfinite(values.to_numpy(float))]


def no_completed_run(scope: pd.DataFrame) -> str:
    """``every run failed (3 runs)``, or ``no run completed (2 failed, 1 diverged)``."""
    counts = scope["status"].value_counts()
    if set(counts.index) == {"failed"}:
        return f"every run failed ({len(scope)} run{'s' if len(scope) != 1 else ''})"
    return "no run completed (" + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + ")"


def check_metric(runs, scope: pd.DataFrame, claim: Claim) -> None:
    """An unknown metric or length is an error listing what the runs do report."""
    name, length = split_metric(claim.metric)
    if len(scope) and not (scope["status"] == "completed").any():
        raise ClaimError(
            f"{claim.origin}: {no_completed_run(scope)}, so no claim about {claim.metric} can be "
            "tested; the errors are in each run's result.json"
        )
    lengths = runs.by_length[runs.by_length["run_id"].isin(set(scope["run_id"]))]
    per_length = sorted(lengths["metric"].unique())
    if length is None:
        if name not in runs.metrics or name not in scope.columns:
            hint = f"; per-length metrics (NAME@LENGTH): {', '.join(per_length)}" if per_length else ""
            raise ClaimError(
                f"{claim.origin}.metric={claim.metric!r} is unknown; metrics found: "
                f"{', '.join(runs.metrics) or 'none'}{hint}"
            )
        return
    if name not in per_length:
        raise ClaimError(
            f"{claim.origin}.metric={claim.metric!r} is unknown; per-length metrics found: "
            f"{', '.join(per_length) or 'none (no run evaluated per length)'}"
        )
    found = sorted(lengths.loc[lengths["metric"] == name, "length"].unique())
    for field_name, wanted in (("metric", length), ("over", claim.over)):
        if wanted is not None and wanted not in found:
            raise ClaimError(
                f"{claim.origin}.{field_name}: length {wanted} is not evaluated; {name} lengths found: "
                f"{', '.join(str(x) for x in found)}"
            )
