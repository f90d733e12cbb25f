"""Which way a metric is better, read off its name: ``val/loss`` lower, ``test/bleu`` higher.

Shared by the analysis (which side of a comparison wins) and the sweepers' checks (a study told to maximize a
loss would pick the worst setting), so the two never disagree on a metric.
"""

from __future__ import annotations

import re

HIGHER_IS_BETTER = {"acc", "accuracy", "bleu", "chrf", "f1", "exact", "em", "auc", "precision", "recall"}
LOWER_IS_BETTER = {"loss", "ppl", "perplexity", "bpc", "nll", "error", "err", "wer", "cer", "mse", "mae"}


def direction(metric: str) -> str | None:
    """``"higher"`` or ``"lower"`` is better for this metric; None when the name does not say."""
    tokens = set(re.split(r"[/_.\-\s]+", metric.lower()))
    if tokens & LOWER_IS_BETTER:
        return "lower"
    if tokens & HIGHER_IS_BETTER:
        return "higher"
    return None
