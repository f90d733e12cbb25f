"""The statistical-test registry of the report's fixed-n comparisons: each cell against its table's baseline cell
over their seeds (``analysis.stats.inference.compare_cells``), Holm-corrected over the table.

A test is a function ``(a, b, confidence) -> {"diff", "diff_low", "diff_high", "t", "p"}``: the estimate of
``a`` against ``b``, its interval at ``confidence``, the statistic and the two-sided p-value. It registers with
what it estimates and the metrics it accepts (none named: every metric):

    @TESTS.register("welch", estimand="difference of means", metrics=())
    def welch(a, b, confidence=0.95) -> dict[str, float]: ...

The registry scans ``analysis.stats`` (attnlab/registry.py), so a new test is one module there. The claims'
tests (analysis/stats/claims.py) and the adaptive-seed rules (attnlab/sequential.py) are not on it yet
(docs/architecture.md says how they would move).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from attnlab.registry import Registry

ComparisonTest = Callable[[Sequence[float], Sequence[float], float], "dict[str, float]"]
RESULT_KEYS = ("diff", "diff_low", "diff_high", "t", "p")


@dataclass(frozen=True)
class StatTestEntry:
    """What a test declares: its estimand, and the metrics it accepts (empty: every metric)."""

    estimand: str
    metrics: tuple[str, ...] = ()


TESTS: Registry[ComparisonTest] = Registry("statistical test", StatTestEntry, package="analysis.stats")


def comparison_test(name: str, metric: str) -> ComparisonTest:
    """The test ``name`` for ``metric``; one that does not accept the metric is a one-line error."""
    accepted = TESTS.declared(name).metrics
    if accepted and metric not in accepted:
        raise ValueError(f"statistical test={name!r} does not accept metric={metric!r}; it accepts {list(accepted)}")
    return TESTS.get(name)
