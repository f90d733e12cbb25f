"""The t-mixture rule (``boundary=t_mixture``, the default): Lai's confidence sequence for a Gaussian mean with
unknown variance, its math in attnlab.sequential (``intervals``, ``widened``). It decides on completed seeds only;
on a bounded metric its interval also spans the divergence rates the seeds leave possible, unless the claim
declares ``assume: no_divergence``."""

from __future__ import annotations

from typing import Sequence

from attnlab import sequential
from attnlab.metric_scale import span
from attnlab.rules import RULES, Look, mean

ASSUMPTION = (
    "assumes independent Gaussian per-seed differences (or ratios); simulated, its error rate stayed at or below "
    "alpha for skewed (log-normal), heavy-tailed (t, 3 dof) and bounded (Beta accuracy) metrics and exceeded it "
    "when one cell's seeds sometimes diverge far from the rest (docs/adaptive_seeds.md): check the seeds for outliers; "
    "on a bounded metric its interval also spans the divergence rates its seeds have not excluded, unless the claim "
    "declares assume: no_divergence"
)


@RULES.register(
    "t_mixture",
    estimand="mean",
    order=10,
    text=sequential.RULE,
    assumption=ASSUMPTION,
    label="anytime CS (Lai t-mixture)",
    survivors=True,
)
class TMixture:
    @staticmethod
    def intervals(values: Sequence[float], alpha: float, look: Look) -> list[tuple[float, float]]:
        # a difference of a bounded metric is decided on the scored means, unless no divergence is assumed
        width = span(look.metric) if look.expect != "ratio" and not look.assumed else None
        if width is None:
            return sequential.intervals(values, alpha, look.mixture)
        return sequential.widened(
            sequential.intervals(values, alpha * (1 - sequential.SHARE), look.mixture), alpha, width
        )

    @staticmethod
    def center(values: Sequence[float]) -> float:
        return mean(values)

    @staticmethod
    def undecided(values: Sequence[float]) -> str:
        return sequential.NO_SPREAD.format(n=len(values)) if len(values) > 1 and len(set(values)) == 1 else ""

    @staticmethod
    def settings(mixture: float, bounds: tuple[float, float] | None) -> str:
        return f"boundary t_mixture, mixture c = {mixture:g}"
