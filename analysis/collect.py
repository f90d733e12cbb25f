"""``from analysis.collect import collect``: the public import printed in the README; the code is in
analysis.data.collect."""

from analysis.data.collect import Runs, collect, learning_curves

__all__ = ["Runs", "collect", "learning_curves"]
