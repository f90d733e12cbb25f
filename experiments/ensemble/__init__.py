"""The seeds of one cell trained together as one batched model (``ensemble.seeds=N``); see ``run``."""

from experiments.ensemble.capability import ensemble_problem
from experiments.ensemble.run import ensemble_entry, train_ensemble

__all__ = ["ensemble_entry", "ensemble_problem", "train_ensemble"]
