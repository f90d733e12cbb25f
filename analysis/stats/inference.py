"""Statistics over seeds: mean and t-interval, effects, Welch tests against a baseline cell, Holm correction.

Tests and intervals come from statsmodels (as the claims' do, analysis.stats.claims), Holm's correction from its
formula (``holm``); scipy only gives the t quantile of the mean's interval.

Everything here takes plain frames (one row per run, a metric column) and uses
completed runs only: a diverged or failed run has no trustworthy metric, and the
report lists those runs separately so that nothing is dropped silently.

Runs are grouped by cell (``analysis.data.cells``: a configuration minus the seed),
never by a hand-picked subset of factors: seeds of one cell are the only values
ever averaged together.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW, ttest_ind

from analysis.stats.comparison_tests import TESTS, comparison_test
from attnlab import metric_scale
from attnlab.metric_scale import direction, metric_range  # noqa: F401  (direction: the report reads it here)

CONFIDENCE = 0.95
ALPHA = 0.05
FACTORS = ("attention", "position")
CELL_KEYS = ("task", "cell")
CARRIED = ("cell_label", "attention", "position")  # descriptive columns copied from the runs onto each cell


def worst_value(metric: str) -> float:
    """The worst value ``metric`` can take, which a diverged run scores (``attnlab.metric_scale.worst_value``: an
    accuracy's or BLEU's floor 0, a loss's +inf); NaN, a number the claims' arrays can hold, where the name says
    neither its direction nor its range."""
    worst = metric_scale.worst_value(metric)
    return math.nan if worst is None else worst


def band(mean: np.ndarray, half: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) edges of mean ± half drawn within the metric's range (``metric_range``)."""
    low, high = metric_range(metric)
    mean, half = np.asarray(mean, dtype=float), np.asarray(half, dtype=float)
    return np.clip(mean - half, low, high), np.clip(mean + half, low, high)


def mean_ci(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float, float, int]:
    """(mean, half-width of the t-interval, n) over the finite values; the half-width is NaN for n < 2."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, 0
    mean = float(x.mean())
    if n < 2:
        return mean, math.nan, 1
    sem = float(x.std(ddof=1)) / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + confidence / 2, df=n - 1)) * sem
    return mean, half, n


def completed(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Completed runs with a finite value for ``metric``."""
    if metric not in runs.columns:
        return runs.iloc[0:0]
    ok = (runs["status"] == "completed") & np.isfinite(runs[metric].astype(float))
    return runs[ok]


def cell_summary(
    runs: pd.DataFrame, metric: str, by: Sequence[str] | None = None, confidence: float = CONFIDENCE
) -> pd.DataFrame:
    """Per cell: n, mean, std, ci_half, ci_low, ci_high of ``metric`` over seeds of completed runs.

    ``by`` defaults to (task, cell) when the runs have cells (``analysis.collect``
    gives them), else (task, attention, position) for a frame of one grid.
    """
    by = list(by) if by is not None else list(CELL_KEYS if "cell" in runs.columns else ("task", *FACTORS))
    carried = [c for c in CARRIED if c in runs.columns and c not in by]
    rows = []
    for key, group in completed(runs, metric).groupby(by, sort=True):
        mean, half, n = mean_ci(group[metric], confidence)
        std = float(group[metric].std(ddof=1)) if n > 1 else math.nan
        rows.append(
            {
                **dict(zip(by, key)),
                **{c: group[c].iloc[0] for c in carried},
                "metric": metric,
                "n": n,
                "mean": mean,
                "std": std,
                "ci_half": half,
                "ci_low": mean - half,
                "ci_high": mean + half,
            }
        )
    return pd.DataFrame(rows, columns=[*by, *carried, "metric", "n", "mean", "std", "ci_half", "ci_low", "ci_high"])


def effects(cells: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.DataFrame, float]:
    """Row means, column means, interaction and grand mean of a rows × columns table of cell means.

    Each cell counts once (the mean of its seeds), so a cell with more seeds does
    not pull the marginals. Interaction = cell − row mean − column mean + grand
    mean; with every cell present its rows and columns sum to zero. With cells
    missing (NaN) the marginals are over the cells present.
    """
    cells = cells.astype(float)
    row_means = cells.mean(axis=1)
    col_means = cells.mean(axis=0)
    values = cells.to_numpy()
    grand = float(values[np.isfinite(values)].mean()) if np.isfinite(values).any() else math.nan
    interaction = cells.sub(row_means, axis=0).sub(col_means, axis=1) + grand
    return row_means, col_means, interaction, grand


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error); NaN stays NaN and is not counted in the family.

    The i-th smallest of m p-values is multiplied by m − i + 1, the products are made non-decreasing in that order
    (a running maximum) and capped at 1. Written out rather than taken from statsmodels' ``multipletests``, whose
    Holm branch runs a full ``gc.collect()`` on every call: 0.16 s in a process that holds pandas and scipy, for a
    few multiplications, once per table and claim set of a report. The tests hold it equal to ``multipletests``.
    """
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full_like(p, np.nan)
    valid = np.flatnonzero(np.isfinite(p))
    order = valid[np.argsort(p[valid], kind="stable")]  # indices of the finite p-values, smallest first
    steps = np.arange(len(order), 0, -1)  # m, m − 1, ..., 1
    adjusted[order] = np.minimum(np.maximum.accumulate(p[order] * steps), 1.0)
    return adjusted


def cohens_d(a: Sequence[float], b: Sequence[float]) -> float:
    """(mean a − mean b) / pooled SD; ±inf when both samples are constant but differ, NaN when equal."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return math.nan
    pooled = math.sqrt(((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / (na + nb - 2))
    diff = float(a.mean() - b.mean())
    if pooled == 0.0:
        return math.nan if diff == 0.0 else math.copysign(math.inf, diff)
    return diff / pooled


@TESTS.register("welch", estimand="difference of means")
def welch(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> dict[str, float]:
    """Welch's t-test of a vs b: t, p, and the CI of mean(a) − mean(b) on Welch's degrees of freedom."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = float(a.mean() - b.mean()) if len(a) and len(b) else math.nan
    if len(a) < 2 or len(b) < 2:
        return {"diff": diff, "diff_low": math.nan, "diff_high": math.nan, "t": math.nan, "p": math.nan}
    if a.var() == 0 and b.var() == 0:
        # No spread on either side: the difference is exact, so it either differs (p = 0) or says nothing.
        t = math.nan if diff == 0 else math.copysign(math.inf, diff)
        return {"diff": diff, "diff_low": diff, "diff_high": diff, "t": t, "p": math.nan if diff == 0 else 0.0}
    t, p, _ = ttest_ind(a, b, usevar="unequal")
    low, high = CompareMeans(DescrStatsW(a), DescrStatsW(b)).tconfint_diff(alpha=1 - confidence, usevar="unequal")
    return {"diff": diff, "diff_low": float(low), "diff_high": float(high), "t": float(t), "p": float(p)}


COMPARISON_COLUMNS = [
    "task",
    "metric",
    "attention",
    "position",
    "n",
    "baseline_n",
    "mean",
    "baseline_mean",
    "diff",
    "diff_low",
    "diff_high",
    "t",
    "p",
    "p_holm",
    "d",
    "verdict",
]
CELL_COMPARISON_COLUMNS = [*COMPARISON_COLUMNS, "cell", "cell_label", "baseline_cell", "baseline_label"]


def _verdict(diff: float, p_holm: float, better: str | None, alpha: float) -> str:
    if not np.isfinite(p_holm):
        return "untested"
    if p_holm >= alpha:
        return "n.s."
    if better is None:
        return "differs"
    improved = diff > 0 if better == "higher" else diff < 0
    return "better" if improved else "worse"


def compare_cells(
    runs: pd.DataFrame,
    metric: str,
    baseline_cell: str,
    cells: Sequence[str],
    alpha: float = ALPHA,
    confidence: float = CONFIDENCE,
    test: str = "welch",
) -> pd.DataFrame:
    """Each of ``cells`` against ``baseline_cell`` (cell ids of one task): ``test`` over seeds (a name in
    ``analysis.stats.comparison_tests.TESTS``, Welch's by default), Holm over this family.

    A side with fewer than two completed seeds gets no test (p NaN, verdict "untested").
    """
    better = direction(metric)
    compare = comparison_test(test, metric)
    done = completed(runs, metric)
    by_cell = {c: g for c, g in done.groupby("cell", sort=False)}
    if baseline_cell not in by_cell:
        return pd.DataFrame(columns=CELL_COMPARISON_COLUMNS)
    base_runs = by_cell[baseline_cell]
    base = base_runs[metric].to_numpy(float)
    family = []
    for cell in cells:
        if cell == baseline_cell or cell not in by_cell:
            continue
        group = by_cell[cell]
        values = group[metric].to_numpy(float)
        first = group.iloc[0]
        family.append(
            {
                "task": first["task"],
                "metric": metric,
                "attention": first.get("attention"),
                "position": first.get("position"),
                "n": len(values),
                "baseline_n": len(base),
                "mean": float(values.mean()),
                "baseline_mean": float(base.mean()),
                **compare(values, base, confidence),
                "d": cohens_d(values, base),
                "cell": cell,
                "cell_label": first.get("cell_label"),
                "baseline_cell": baseline_cell,
                "baseline_label": base_runs.iloc[0].get("cell_label"),
            }
        )
    adjusted = holm([r["p"] for r in family])
    for row, p_adj in zip(family, adjusted):
        row["p_holm"] = float(p_adj)
        row["verdict"] = _verdict(row["diff"], row["p_holm"], better, alpha)
    return pd.DataFrame(family, columns=CELL_COMPARISON_COLUMNS)
