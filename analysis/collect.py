"""``from analysis.collect import collect``: the public import printed in docs/sweeps.md; the code is in
analysis.data (collect, runs, curves, evaluations)."""

from analysis.data.collect import collect
from analysis.data.curves import learning_curves
from analysis.data.evaluations import Evaluations, collect_evaluations
from analysis.data.runs import Runs

__all__ = ["Evaluations", "Runs", "collect", "collect_evaluations", "learning_curves"]
