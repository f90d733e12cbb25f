"""Claims: a hypothesis written next to a sweep, tested on its results.

    python -m analysis.claims SWEEP_DIR [...] [--claims FILE]

A claim names a metric, two sides given as factor values and what it expects::

    claims:
      - name: ALiBi extrapolates better than sinusoidal positions
        metric: token_acc@32            # a metric column, or a per-length metric NAME@LENGTH
        a: {position: alibi}
        b: {position: sinusoidal}
        where: {task: copy}             # optional: pins keys for both sides
        expect: greater                 # greater | less | equivalent | ratio
        margin: 0.0
        source: Press et al. 2022       # optional: where the claim comes from
        paper: ...                      # optional: the number the paper reports

- ``greater`` / ``less``: mean(a) − mean(b) is above ``margin`` (below −``margin``):
  a one-sided Welch test of the difference against the margin.
- ``equivalent``: |mean(a) − mean(b)| < ``margin``: two one-sided Welch tests (TOST).
- ``ratio``: for side ``a`` alone, each run's metric at one length over its metric at
  the length ``over`` lies within ``bounds: [low, high]`` (either may be null):
  a one-sample t-test per bound (TOST when both are given).

A side is one cell: the runs whose factor values (or ``config.<key>`` values) match,
over seeds. A side that covers more than one cell is an error naming the keys
that still vary, never a pool. Claims come from the runs' own config (a preset's
``claims:`` key; tested on the runs that carry them) and from ``--claims FILE``
(tested on every run given).

Each claim is decided by two one-sided tests at its margin: the claim's own
(H1: the claim holds) and its negation. The smaller of the two p-values is the
claim's p; Holm's correction runs over the claims of one report; the verdict is
**supported** or **contradicted** by the direction of that p when its corrected
value is below alpha, else **inconclusive**, with what it lacked. The number of
seeds that would decide an inconclusive claim comes from the power of the test
that decides it (80%, at alpha / number of claims, Holm's strictest step), with
the observed difference and spread taken as the truth.

Exit codes: 0 every claim supported, 1 any contradicted or inconclusive, 2 bad input.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestIndPower, TTestPower
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW, ttest_ind, ttost_ind

from scipy import stats as sps

from analysis import stats
from analysis.document import Bullets, Paragraph, Section, Table, fmt, fmt_p
from analysis.errors import AnalysisError, run_cli
from analysis.outputs import check_out_file, writing

ALPHA = stats.ALPHA
POWER = 0.8
MAX_SEEDS = 10_000  # beyond this the power calculation says "more than"
EXPECTS = ("greater", "less", "equivalent", "ratio")
FIELDS = ("name", "metric", "a", "b", "where", "expect", "margin", "over", "bounds", "source", "paper")
IDENTITY_KEYS = ("task", "attention", "position", "arch")
CONFIG_KEY = "config.claims"
VERDICTS = ("supported", "contradicted", "inconclusive")
COLUMNS = ["claim", "metric", "expect", "a", "a_n", "a_mean", "a_ci", "b", "b_n", "b_mean", "b_ci", "diff",
           "diff_low", "diff_high", "test", "statistic", "df", "p", "p_holm", "verdict", "lacked", "seeds_needed",
           "source", "paper"]


class ClaimError(AnalysisError):
    """A claim that cannot be tested as written: one line naming the field."""


# ---------------------------------------------------------------- parsing

@dataclass(frozen=True)
class Claim:
    """One parsed claim; ``where`` says where it was written (``claims.yaml: claims[2]``)."""

    name: str
    metric: str
    expect: str
    a: tuple[tuple[str, Any], ...]
    b: tuple[tuple[str, Any], ...] | None
    filters: tuple[tuple[str, Any], ...] = ()
    margin: float = 0.0
    over: int | None = None
    bounds: tuple[float | None, float | None] | None = None
    source: str | None = None
    paper: str | None = None
    origin: str = "claims"

    @property
    def length(self) -> int | None:
        return split_metric(self.metric)[1]

    def key(self) -> str:
        """The claim's content, without where it was written: two copies of one claim are one claim."""
        content = {f: getattr(self, f) for f in ("name", "metric", "expect", "a", "b", "filters", "margin", "over",
                                                  "bounds", "source", "paper")}
        return json.dumps(content, sort_keys=True, default=str)


def split_metric(metric: str) -> tuple[str, int | None]:
    """``token_acc@16`` -> (``token_acc``, 16); ``test/bleu`` -> (``test/bleu``, None)."""
    name, at, length = metric.rpartition("@")
    if not at:
        return metric, None
    return name, int(length)


def _number(value: Any, field_name: str, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ClaimError(f"{field_name}={value!r} is not allowed; it must be {allowed}")
    return float(value)


def _side(value: Any, field_name: str) -> tuple[tuple[str, Any], ...]:
    if not isinstance(value, Mapping) or not value:
        raise ClaimError(f"{field_name}={value!r} is not allowed; it must be a mapping of factor values, "
                         "e.g. {position: alibi}")
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ClaimError(f"{field_name} has the key {key!r}; keys are factor or config names, e.g. position")
        if isinstance(item, (Mapping, list, tuple)) or item is None:
            raise ClaimError(f"{field_name}.{key}={item!r} is not allowed; a factor value is a string, "
                             "number or boolean")
    return tuple(sorted(value.items()))


def _text(value: Any, field_name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ClaimError(f"{field_name}={value!r} is not allowed; it must be text")
    return str(value)


def parse_claim(raw: Any, origin: str) -> Claim:
    """One claim from its YAML mapping; a bad field raises ClaimError naming ``origin.field``."""
    if not isinstance(raw, Mapping):
        raise ClaimError(f"{origin}={raw!r} is not a claim; a claim is a mapping with metric, a, b and expect")
    unknown = [k for k in raw if k not in FIELDS]
    if unknown:
        raise ClaimError(f"{origin}.{unknown[0]} is not a claim field; fields: {', '.join(FIELDS)}")
    for required in ("metric", "a", "expect"):
        if raw.get(required) is None:
            raise ClaimError(f"{origin}.{required} is missing; a claim needs metric, a, b (except a ratio) and expect")
    expect = raw["expect"]
    if expect not in EXPECTS:
        raise ClaimError(f"{origin}.expect={expect!r} is not allowed; choose one of {list(EXPECTS)}")
    metric = raw["metric"]
    if not isinstance(metric, str) or not re.fullmatch(r"[^@\s]+(@\d+)?", metric):
        raise ClaimError(f"{origin}.metric={metric!r} is not allowed; give a metric name (test/bleu) or a "
                         "per-length one, NAME@LENGTH (token_acc@16)")
    a = _side(raw["a"], f"{origin}.a")
    filters = _side(raw["where"], f"{origin}.where") if raw.get("where") is not None else ()
    for key, _ in filters:
        if key in dict(a) or (isinstance(raw.get("b"), Mapping) and key in raw["b"]):
            raise ClaimError(f"{origin}.where.{key} is also set on a side; a key is pinned in where or on the sides")
    over = bounds = b = None
    margin = 0.0
    if expect == "ratio":
        for misplaced in ("b", "margin"):
            if raw.get(misplaced) is not None:
                raise ClaimError(f"{origin}.{misplaced} is not used by expect=ratio; a ratio claim tests side a "
                                 "against bounds")
        if split_metric(metric)[1] is None:
            raise ClaimError(f"{origin}.metric={metric!r} is not allowed for expect=ratio; give the length, "
                             "NAME@LENGTH (token_acc@32)")
        over = raw.get("over")
        if isinstance(over, bool) or not isinstance(over, int) or over <= 0:
            raise ClaimError(f"{origin}.over={over!r} is not allowed; expect=ratio needs the length whose value "
                             "is the denominator, a positive integer")
        if over == split_metric(metric)[1]:
            raise ClaimError(f"{origin}.over={over} is the metric's own length; a ratio needs two lengths")
        raw_bounds = raw.get("bounds")
        if not isinstance(raw_bounds, (list, tuple)) or len(raw_bounds) != 2 or raw_bounds == [None, None]:
            raise ClaimError(f"{origin}.bounds={raw_bounds!r} is not allowed; expect=ratio needs [low, high], "
                             "either may be null, e.g. [0.9, null]")
        low, high = (None if v is None else _number(v, f"{origin}.bounds", "a pair of numbers or nulls")
                     for v in raw_bounds)
        if low is not None and high is not None and not low < high:
            raise ClaimError(f"{origin}.bounds={list(raw_bounds)} is not allowed; low must be below high")
        bounds = (low, high)
    else:
        for misplaced in ("over", "bounds"):
            if raw.get(misplaced) is not None:
                raise ClaimError(f"{origin}.{misplaced} is only used by expect=ratio")
        if raw.get("b") is None:
            raise ClaimError(f"{origin}.b is missing; expect={expect} compares side a with side b")
        b = _side(raw["b"], f"{origin}.b")
        if expect == "equivalent":
            margin = _number(raw.get("margin"), f"{origin}.margin", "a number > 0 for expect=equivalent")
            if margin <= 0:
                raise ClaimError(f"{origin}.margin={raw.get('margin')!r} is not allowed; expect=equivalent needs "
                                 "a margin > 0 (the largest difference that still counts as equal)")
        else:
            margin = _number(raw.get("margin", 0.0), f"{origin}.margin", "a number (0: any difference)")
    name = _text(raw.get("name"), f"{origin}.name") or origin
    return Claim(name=name, metric=metric, expect=expect, a=a, b=b, filters=filters, margin=margin, over=over,
                 bounds=bounds, source=_text(raw.get("source"), f"{origin}.source"),
                 paper=_text(raw.get("paper"), f"{origin}.paper"), origin=origin)


def parse_claims(raw: Any, origin: str = "claims") -> list[Claim]:
    """A list of claims (``claims:`` in a preset or a file); ``origin`` prefixes every error."""
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise ClaimError(f"{origin}={raw!r} is not allowed; claims is a list of claims")
    return [parse_claim(item, f"{origin}[{i}]") for i, item in enumerate(raw)]


def load_claims_file(path: str | Path) -> list[Claim]:
    """Claims from a YAML file: a list, or a mapping with a ``claims:`` key (a preset file works too)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ClaimError(f"--claims {path}: cannot be read ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise ClaimError(f"--claims {path}: not valid YAML ({' '.join(str(err).split())})") from None
    if isinstance(data, Mapping):
        if "claims" not in data:
            raise ClaimError(f"--claims {path}: no 'claims' key; the file holds a list of claims or claims: [...]")
        data = data["claims"]
    claims = parse_claims(data, f"{path.name}: claims")
    if not claims:
        raise ClaimError(f"--claims {path}: the claims list is empty")
    return claims


# ---------------------------------------------------------------- which claims apply to which runs

def _carried(value: Any) -> list:
    """The claims list a run's config carries (a list, or its JSON text after a round trip)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return list(value) if isinstance(value, (list, tuple)) else []


def claims_in_runs(frame: pd.DataFrame) -> list[tuple[Claim, set[str]]]:
    """Every distinct claim carried in the runs' configs, with the run ids that carry it."""
    if CONFIG_KEY not in frame.columns:
        return []
    found: dict[str, tuple[Claim, set[str]]] = {}
    for run_id, sweep, value in zip(frame["run_id"], frame["sweep"], frame[CONFIG_KEY]):
        for claim in parse_claims(_carried(value), f"claims of sweep {sweep}") if _carried(value) else []:
            found.setdefault(claim.key(), (claim, set()))[1].add(run_id)
    return list(found.values())


def gather_claims(runs, claims_file: str | Path | None = None) -> list[tuple[Claim, set[str] | None]]:
    """Claims to test and their scope: the run ids carrying a preset's claim, or None (every run) for a file's."""
    gathered: list[tuple[Claim, set[str] | None]] = list(claims_in_runs(runs.runs))
    if claims_file is not None:
        seen = {c.key() for c, _ in gathered}
        gathered += [(c, None) for c in load_claims_file(claims_file) if c.key() not in seen]
    return gathered


# ---------------------------------------------------------------- sides

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


def _factors(runs) -> list[str]:
    return list(getattr(runs, "factors", None) or [])


def _column(frame: pd.DataFrame, factors: Sequence[str], key: str, field_name: str) -> str:
    """The frame column holding a side's key: the factor itself, a result column, or ``config.<key>``."""
    if (key in factors or key in IDENTITY_KEYS) and key in frame.columns:
        return key
    if f"config.{key}" in frame.columns:
        return f"config.{key}"
    known = sorted(set(factors) | {k for k in IDENTITY_KEYS if k in frame.columns})
    raise ClaimError(f"{field_name}.{key} is not a factor or config key of these runs; factors: "
                     f"{', '.join(known) or 'none'}; any config key works too (optim.lr, attention.window)")


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
    return [c[len("config."):] for c in rows.columns if c.startswith("config.") and c not in skip and differs(c)]


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
            raise ClaimError(f"{field_name}={{{_describe(pairs)}}}{pinned} matches no run: {key}={wanted!r} is not "
                             f"among {', '.join(taken) or 'no values'}")
        mask &= hit
    rows = frame[mask]
    cells = rows["cell"].unique() if "cell" in rows.columns else [None]
    if len(cells) > 1:
        extra = [k for k in _varying(rows, factors) if k not in dict(pairs) and k not in dict(claim.filters)]
        raise ClaimError(f"{field_name}={{{_describe(pairs)}}} covers {len(cells)} cells that differ in "
                         f"{', '.join(extra) or 'their config'}; pin {'them' if len(extra) > 1 else 'it'} in the "
                         f"claim's where (runs of different cells are never pooled)")
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
        raise ClaimError(f"{claim.origin}: {no_completed_run(scope)}, so no claim about {claim.metric} can be "
                         "tested; the errors are in each run's result.json")
    lengths = runs.by_length[runs.by_length["run_id"].isin(set(scope["run_id"]))]
    per_length = sorted(lengths["metric"].unique())
    if length is None:
        if name not in runs.metrics or name not in scope.columns:
            hint = f"; per-length metrics (NAME@LENGTH): {', '.join(per_length)}" if per_length else ""
            raise ClaimError(f"{claim.origin}.metric={claim.metric!r} is unknown; metrics found: "
                             f"{', '.join(runs.metrics) or 'none'}{hint}")
        return
    if name not in per_length:
        raise ClaimError(f"{claim.origin}.metric={claim.metric!r} is unknown; per-length metrics found: "
                         f"{', '.join(per_length) or 'none (no run evaluated per length)'}")
    found = sorted(lengths.loc[lengths["metric"] == name, "length"].unique())
    for field_name, wanted in (("metric", length), ("over", claim.over)):
        if wanted is not None and wanted not in found:
            raise ClaimError(f"{claim.origin}.{field_name}: length {wanted} is not evaluated; {name} lengths found: "
                             f"{', '.join(str(x) for x in found)}")


# ---------------------------------------------------------------- tests

@dataclass
class Evidence:
    """A claim's two one-sided tests, for the claim and against it, on one statistic."""

    test: str
    statistic: float = math.nan
    df: float = math.nan
    p_for: float = math.nan
    p_against: float = math.nan
    estimate: float = math.nan      # mean difference a − b, or mean ratio
    low: float = math.nan           # its (1 − 2 alpha) interval: the one the one-sided tests at alpha agree with
    high: float = math.nan
    distance: float = math.nan      # how far the estimate is from the boundary that decides (power analysis)
    spread: float = math.nan        # the standard deviation that goes with it


def _one_sided(t: float, df: float) -> tuple[float, float]:
    """P(T >= t), P(T <= t) for Student's t with df degrees of freedom."""
    return float(sps.t.sf(t, df)), float(sps.t.cdf(t, df))


def _certain(evidence: Evidence, holds: bool, fails: bool) -> Evidence:
    """Every seed gave the same value on each side: the estimate decides outright (or not at all, on the boundary)."""
    evidence.low = evidence.high = evidence.estimate
    if holds or fails:
        evidence.statistic = math.inf if holds else -math.inf
        evidence.p_for, evidence.p_against = (0.0, 1.0) if holds else (1.0, 0.0)
    return evidence


def _two_sample(a: np.ndarray, b: np.ndarray, claim: Claim) -> Evidence:
    d = float(a.mean() - b.mean())
    spread = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    m = claim.margin
    if claim.expect == "equivalent":
        evidence = Evidence("TOST (Welch)", estimate=d, distance=abs(m - abs(d)), spread=spread)
        if spread == 0:
            return _certain(evidence, abs(d) < m, abs(d) > m)
        p, (t1, p1, df1), (t2, p2, df2) = ttost_ind(a, b, -m, m, usevar="unequal")
        # The binding test is the one with the larger p; the claim fails when d is beyond either margin.
        evidence.statistic, evidence.df = (t1, df1) if p1 >= p2 else (t2, df2)
        evidence.p_for, evidence.p_against = float(p), min(_one_sided(t1, df1)[1], _one_sided(t2, df2)[0])
    else:
        # greater: H1 d > margin; less: H1 d < −margin. The test against is the same t read the other way.
        boundary = m if claim.expect == "greater" else -m
        evidence = Evidence("Welch one-sided", estimate=d, distance=abs(d - boundary), spread=spread)
        if spread == 0:
            above, below = d > boundary, d < boundary
            return _certain(evidence, above if claim.expect == "greater" else below,
                            below if claim.expect == "greater" else above)
        alternative = "larger" if claim.expect == "greater" else "smaller"
        t, p_for, df = ttest_ind(a, b, alternative=alternative, usevar="unequal", value=boundary)
        upper, lower = _one_sided(t, df)
        evidence.statistic, evidence.df, evidence.p_for = float(t), float(df), float(p_for)
        evidence.p_against = lower if claim.expect == "greater" else upper
    low, high = CompareMeans(DescrStatsW(a), DescrStatsW(b)).tconfint_diff(alpha=2 * ALPHA, usevar="unequal")
    evidence.low, evidence.high = float(low), float(high)
    return evidence


def _ratio(r: np.ndarray, claim: Claim) -> Evidence:
    low_bound, high_bound = claim.bounds
    mean, spread = float(r.mean()), float(r.std(ddof=1))
    edges = [e for e in claim.bounds if e is not None]
    distance = min(abs(mean - e) for e in edges)
    evidence = Evidence("one-sample TOST" if len(edges) == 2 else "one-sample t", estimate=mean, distance=distance,
                        spread=spread)
    if spread == 0:
        holds = (low_bound is None or mean > low_bound) and (high_bound is None or mean < high_bound)
        fails = (low_bound is not None and mean < low_bound) or (high_bound is not None and mean > high_bound)
        return _certain(evidence, holds, fails)
    described = DescrStatsW(r)
    if len(edges) == 2:
        p, (t1, p1, df1), (t2, p2, df2) = described.ttost_mean(low_bound, high_bound)
        evidence.statistic, evidence.df = (t1, df1) if p1 >= p2 else (t2, df2)
        evidence.p_for, evidence.p_against = float(p), min(_one_sided(t1, df1)[1], _one_sided(t2, df2)[0])
    else:
        bound, alternative = (low_bound, "larger") if low_bound is not None else (high_bound, "smaller")
        t, p_for, df = described.ttest_mean(value=bound, alternative=alternative)
        upper, lower = _one_sided(t, df)
        evidence.statistic, evidence.df, evidence.p_for = float(t), float(df), float(p_for)
        evidence.p_against = lower if alternative == "larger" else upper
    low, high = described.tconfint_mean(alpha=2 * ALPHA)
    evidence.low, evidence.high = float(low), float(high)
    return evidence


def seeds_needed(test: Evidence, paired: bool, alpha: float) -> int | None:
    """Seeds per side for 80% power of the deciding one-sided test, the observed difference and spread taken as true.

    Two samples: statsmodels' TTestIndPower at effect size distance / spread, with
    spread the root mean square of the two sides' standard deviations. One sample
    (ratio): TTestPower. None when there is no spread or no distance to decide by.
    """
    if not (math.isfinite(test.distance) and math.isfinite(test.spread)) or test.spread == 0 or test.distance == 0:
        return None
    effect = test.distance / test.spread
    power = TTestPower() if paired else TTestIndPower()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n = float(power.solve_power(effect_size=effect, alpha=alpha, power=POWER, alternative="larger"))
    except (ValueError, RuntimeError, ZeroDivisionError):
        return MAX_SEEDS + 1
    if not math.isfinite(n):
        return MAX_SEEDS + 1
    return max(2, min(MAX_SEEDS + 1, math.ceil(n)))


# ---------------------------------------------------------------- evaluation

def _g(x: float) -> str:
    """A number the user wrote (a margin, a bound), as written: 0, 0.05, 1.5."""
    return f"{x:g}".replace("-", "−")


def _expectation(claim: Claim) -> str:
    if claim.expect == "greater":
        return f"a − b > {_g(claim.margin)}"
    if claim.expect == "less":
        return f"a − b < {_g(-claim.margin)}" if claim.margin else "a − b < 0"
    if claim.expect == "equivalent":
        return f"|a − b| < {_g(claim.margin)}"
    low, high = claim.bounds
    ratio = f"a@{claim.length} / a@{claim.over}"
    if low is None:
        return f"{ratio} < {_g(high)}"
    return f"{ratio} > {_g(low)}" if high is None else f"{ratio} in [{_g(low)}, {_g(high)}]"


def _mean_ci(values: np.ndarray) -> tuple[float, float]:
    mean, half, _ = stats.mean_ci(values)
    return mean, half


def evaluate_claim(runs, claim: Claim, scope: set[str] | None) -> dict[str, Any]:
    """The claim's row before Holm's correction: both sides, the test, and p for and against."""
    frame = runs.runs if scope is None else runs.runs[runs.runs["run_id"].isin(scope)]
    factors = _factors(runs)
    check_metric(runs, frame, claim)
    a = select_side(frame, factors, claim, "a")
    row: dict[str, Any] = {c: math.nan for c in COLUMNS}
    row.update(claim=claim.name, metric=claim.metric, expect=_expectation(claim), source=claim.source,
               paper=claim.paper, a=a.label, b=None, lacked="", seeds_needed=None, test=None)
    if claim.expect == "ratio":
        top = metric_values(a.runs, runs.by_length, claim.metric)
        name, _ = split_metric(claim.metric)
        bottom = metric_values(a.runs, runs.by_length, f"{name}@{claim.over}")
        joined = pd.concat([top.rename("top"), bottom.rename("bottom")], axis=1, join="inner")
        zero = int((joined["bottom"] == 0).sum())
        if zero:
            a.dropped = f"{zero} with {name}@{claim.over} = 0, no ratio"
        joined = joined[joined["bottom"] != 0]
        a.values = (joined["top"] / joined["bottom"]).to_numpy(float)
        sides = [("a", a)]
    else:
        b = select_side(frame, factors, claim, "b")
        if "cell" in frame.columns and len(a.runs) and len(b.runs) and a.runs["cell"].iloc[0] == b.runs["cell"].iloc[0]:
            raise ClaimError(f"{claim.origin}: a and b are the same cell ({a.label}); the sides must differ")
        a.values = metric_values(a.runs, runs.by_length, claim.metric).to_numpy(float)
        b.values = metric_values(b.runs, runs.by_length, claim.metric).to_numpy(float)
        row["b"] = b.label
        sides = [("a", a), ("b", b)]
    for tag, side in sides:
        row[f"{tag}_n"] = side.n
        row[f"{tag}_mean"], row[f"{tag}_ci"] = _mean_ci(side.values)
    short = [(tag, side) for tag, side in sides if side.n < 2]
    if short:
        row["test"] = "—"
        row["lacked"] = "; ".join(
            f"fewer than 2 seeds on side {tag} ({side.n} with a value of {len(side.runs)} runs"
            f"{': ' + side.missing() if side.missing() else ''})" for tag, side in short)
        return row
    test = _ratio(a.values, claim) if claim.expect == "ratio" else _two_sample(a.values, b.values, claim)
    row.update(test=test.test, statistic=test.statistic, df=test.df, diff=test.estimate, diff_low=test.low,
               diff_high=test.high, p_for=test.p_for, p_against=test.p_against, _test=test)
    return row


def _straddle(row: Mapping[str, Any], claim: Claim) -> str:
    level = f"{100 * (1 - 2 * ALPHA):.0f}%"
    interval = f"[{fmt(row['diff_low'])}, {fmt(row['diff_high'])}]"
    if claim.expect == "ratio":
        edges = " and ".join(_g(e) for e in claim.bounds if e is not None)
        return f"the {level} interval of the ratio {interval} reaches the bound {edges}"
    edge = {"greater": _g(claim.margin), "less": _g(-claim.margin)}.get(claim.expect, f"±{_g(claim.margin)}")
    return f"the {level} interval of a − b {interval} straddles the margin {edge}"


def decide(rows: list[dict[str, Any]], claims: Sequence[Claim], alpha: float = ALPHA) -> pd.DataFrame:
    """Holm over the claims' decisive p-values (the smaller of for and against), then verdicts."""
    decisive = [min(r.get("p_for", math.nan), r.get("p_against", math.nan)) for r in rows]
    tested = [i for i, p in enumerate(decisive) if math.isfinite(p)]
    adjusted = np.full(len(rows), math.nan)
    if tested:
        adjusted[tested] = multipletests([decisive[i] for i in tested], alpha=alpha, method="holm")[1]
    k = max(1, len(tested))
    for row, claim, p, p_holm in zip(rows, claims, decisive, adjusted):
        row["p"], row["p_holm"] = p, float(p_holm)
        test = row.pop("_test", None)
        if not math.isfinite(p_holm):
            row["verdict"] = "inconclusive"
            if not row["lacked"]:
                row["lacked"] = "the estimate sits exactly on the margin"
            continue
        if p_holm < alpha:
            row["verdict"] = "supported" if row["p_for"] <= row["p_against"] else "contradicted"
            continue
        row["verdict"] = "inconclusive"
        if p < alpha:
            row["lacked"] = (f"significant alone (p={fmt_p(p)}) but not after Holm's correction over {k} claims")
        else:
            row["lacked"] = _straddle(row, claim)
        if test is not None:
            row["seeds_needed"] = seeds_needed(test, claim.expect == "ratio", alpha / k)
            n = row["seeds_needed"]
            if n is None:
                row["lacked"] += "; no number of seeds decides it at this estimate"
            else:
                per = "seeds" if claim.expect == "ratio" else "seeds per side"
                count = f"more than {MAX_SEEDS}" if n > MAX_SEEDS else f"about {n}"
                row["lacked"] += f"; {count} {per} would decide it at the observed difference and spread"
    for row in rows:
        row.pop("_test", None)
    return pd.DataFrame(rows, columns=COLUMNS)


def evaluate(runs, claims_file: str | Path | None = None, alpha: float = ALPHA) -> pd.DataFrame:
    """Every claim carried by the runs or given in ``claims_file``: one row each, Holm-corrected together."""
    gathered = gather_claims(runs, claims_file)
    rows = [evaluate_claim(runs, claim, scope) for claim, scope in gathered]
    return decide(rows, [c for c, _ in gathered], alpha)


# ---------------------------------------------------------------- tables

def _side_text(mean: float, ci: float, n: Any) -> str:
    if not isinstance(n, (int, np.integer)) and not (isinstance(n, float) and math.isfinite(n)):
        return "—"
    if int(n) == 0:
        return "no value (n=0)"
    spread = f" ± {fmt(ci)}" if math.isfinite(ci) else ""
    return f"{fmt(mean)}{spread} (n={int(n)})"


def _statistic_text(row: Mapping[str, Any]) -> str:
    if not isinstance(row["test"], str) or row["test"] == "—":
        return "—"
    df = f", df {row['df']:.1f}" if math.isfinite(row["df"]) else ""
    return f"t = {fmt(row['statistic'])}{df}"


def _str(value: Any) -> str:
    """Text for a table cell: "—" for a missing value (None, or NaN once it went through a frame)."""
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) or value == "" else str(value)


def claims_table(results: pd.DataFrame) -> Table:
    header = ["claim", "metric", "expected", "a: mean ± CI", "b: mean ± CI", "test", "statistic", "p (Holm)",
              "verdict", "source"]
    rows = []
    for r in results.to_dict("records"):
        verdict = r["verdict"] + (f": {r['lacked']}" if _str(r["lacked"]) != "—" else "")
        b = "—" if _str(r["b"]) == "—" else f"{r['b']}: {_side_text(r['b_mean'], r['b_ci'], r['b_n'])}"
        ratio = "ratio " if "/ a@" in r["expect"] else ""
        rows.append([r["claim"], r["metric"], r["expect"],
                     f"{r['a']}: {ratio}{_side_text(r['a_mean'], r['a_ci'], r['a_n'])}",
                     b, _str(r["test"]), _statistic_text(r), fmt_p(r["p_holm"]), verdict, _str(r["source"])])
    return Table(header, rows, caption=METHOD)


METHOD = (f"Each claim: two one-sided tests at its margin (Welch for two sides, TOST for equivalence, one-sample t "
          f"on per-run ratios), the smaller p decides; Holm's correction over the claims; verdict at α = {ALPHA}. "
          f"Means ± 95% t-intervals over completed seeds. Seeds needed: {POWER:.0%} power at α / claims.")


def claims_section(runs, claims_file: str | Path | None = None) -> Section | None:
    """The report's "Claims" section, or None when the runs carry no claim and no file is given.

    A claim carried by the runs that does not fit them becomes a note in the section (the rest
    of the report still stands); with ``claims_file`` the user asked for claims, so it is an error.
    """
    return report_claims(runs, claims_file)[0]


def report_claims(runs, claims_file: str | Path | None = None) -> tuple[Section | None, pd.DataFrame | None]:
    """The "Claims" section (as ``claims_section``) and the results behind it (None when none were tested)."""
    try:
        results = evaluate(runs, claims_file)
    except ClaimError as err:
        if claims_file is not None:
            raise
        return Section("Claims", [Paragraph(f"The claims these runs carry cannot be tested: {err}",
                                            kind="note")]), None
    if results.empty:
        return None, None
    return _section(results), results


def _section(results: pd.DataFrame) -> Section:
    counts = results["verdict"].value_counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts)
    section = Section("Claims", [Paragraph(f"{len(results)} claim(s): {summary}.")])
    section.add(claims_table(results))
    papers = [f"{r['claim']}: {r['paper']}" for r in results.to_dict("records") if _str(r["paper"]) != "—"]
    if papers:
        section.add(Paragraph("What the papers report:"), Bullets(papers))
    return section


def format_text(results: pd.DataFrame) -> str:
    """The claims table for a terminal: one block per claim."""
    lines = []
    for i, r in enumerate(results.to_dict("records"), 1):
        lines.append(f"[{r['verdict'].upper()}] {r['claim']}")
        lines.append(f"    {r['metric']}: {r['expect']}")
        ratio = "ratio " if "/ a@" in r["expect"] else ""
        lines.append(f"    a  {r['a']}: {ratio}{_side_text(r['a_mean'], r['a_ci'], r['a_n'])}")
        if _str(r["b"]) != "—":
            lines.append(f"    b  {r['b']}: {_side_text(r['b_mean'], r['b_ci'], r['b_n'])}")
        if isinstance(r["test"], str) and r["test"] != "—":
            what = "ratio" if "sample" in r["test"] else "a − b"
            lines.append(f"    {r['test']}: {_statistic_text(r)}, {what} {fmt(r['diff'])} "
                         f"[{fmt(r['diff_low'])}, {fmt(r['diff_high'])}], p {fmt_p(r['p'])}, Holm {fmt_p(r['p_holm'])}")
        for label in ("lacked", "source", "paper"):
            if _str(r[label]) != "—":
                lines.append(f"    {label}: {r[label]}")
    counts = results["verdict"].value_counts()
    lines.append(f"{len(results)} claim(s): " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts))
    return "\n".join(lines)


# ---------------------------------------------------------------- command line

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analysis.claims", description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", metavar="SWEEP", help="sweep folders, result.json files or globs")
    parser.add_argument("--claims", default=None, type=Path, metavar="FILE",
                        help="YAML file of claims (a list, or a claims: key), tested beside those the runs carry")
    parser.add_argument("--csv", default=None, type=Path, help="also write the table as CSV")
    return parser


def _write_csv(results: pd.DataFrame, path: Path) -> None:
    with writing(path):
        results.to_csv(path, index=False)


def main(argv: Sequence[str] | None = None) -> int:
    from analysis.collect import collect

    args = _parser().parse_args(argv)

    def evaluate_sweeps() -> pd.DataFrame:
        if args.csv is not None:
            check_out_file(args.csv, "--csv")  # a bad place fails before any result is read
        if args.claims is not None:
            load_claims_file(args.claims)  # a malformed file fails before any result is read
        runs = collect(args.paths)
        if runs.runs.empty:
            raise ClaimError(f"no readable result.json under {', '.join(args.paths)}")
        results = evaluate(runs, args.claims)
        if results.empty:
            raise ClaimError("no claims: the runs carry none (a preset's claims: key) and no --claims FILE "
                             "was given")
        return results

    results, code = run_cli(evaluate_sweeps)
    if code != 0:
        return code
    print(format_text(results))
    if args.csv is not None:
        _, code = run_cli(lambda: _write_csv(results, args.csv))
        if code != 0:
            return code
    return 0 if (results["verdict"] == "supported").all() else 1


if __name__ == "__main__":
    sys.exit(main())
