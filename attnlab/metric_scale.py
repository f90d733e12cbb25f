"""What a metric's name says of its values: which way is better, the range it lies in, and so its worst value.

``test/token_acc`` -> tokens {"test", "token", "acc"}: higher is better, a fraction in [0, 1], worst 0; ``val/loss``:
lower is better, in [0, inf), worst +inf. A name that says neither has no direction and no worst value.

Standard library only: the adaptive sweeper (experiments) scores a diverged seed at its metric's worst value, and the
analysis reads ranges and directions from the same tables.
"""

from __future__ import annotations

import math
import re

# Metric direction by name token.
HIGHER_IS_BETTER = {"acc", "accuracy", "bleu", "chrf", "f1", "exact", "em", "auc", "precision", "recall"}
LOWER_IS_BETTER = {"loss", "ppl", "perplexity", "bpc", "nll", "error", "err", "wer", "cer", "mse", "mae"}


# The values a metric can take, by name token: accuracies are fractions, BLEU and chrF percentages,
# losses and perplexities non-negative. A t-interval knows none of this (n=2 reaches far below 0).
FRACTIONS = {"acc", "accuracy", "f1", "exact", "em", "auc", "precision", "recall"}
PERCENTAGES = {"bleu", "chrf"}


def _tokens(metric: str) -> set[str]:
    # a claim's per-length metric (token_acc@32) is the metric token_acc, read at length 32
    return set(re.split(r"[/_.\-\s]+", metric.lower().split("@")[0]))


def metric_range(metric: str) -> tuple[float, float]:
    """(lowest, highest) value ``metric`` can take; (-inf, inf) when the name does not say."""
    tokens = _tokens(metric)
    if tokens & FRACTIONS:
        return 0.0, 1.0
    if tokens & PERCENTAGES:
        return 0.0, 100.0
    if tokens & LOWER_IS_BETTER:
        return 0.0, math.inf
    return -math.inf, math.inf


def direction(metric: str) -> str | None:
    """``"higher"`` or ``"lower"`` is better for this metric; None when the name does not say."""
    tokens = _tokens(metric)
    if tokens & LOWER_IS_BETTER:
        return "lower"
    if tokens & HIGHER_IS_BETTER:
        return "higher"
    return None


def worst_value(metric: str, bounds: tuple[float, float] | None = None) -> float | None:
    """The value a run that produced none (diverged or failed) is scored at: the bad end of the declared ``bounds``,
    else of the metric's range (an accuracy's 0, a loss's +inf); None when the name says not which way is better."""
    better = direction(metric)
    if better is None:
        return None
    lo, hi = bounds if bounds is not None else metric_range(metric)
    return lo if better == "higher" else hi


def span(metric: str) -> float | None:
    """The width of a bounded metric's range, best minus worst (an accuracy's 1, a BLEU's 100); None where either
    end is infinite (a loss) or the name says not which way is better: there a mean has no bounded worst case."""
    lo, hi = metric_range(metric)
    if direction(metric) is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return hi - lo
