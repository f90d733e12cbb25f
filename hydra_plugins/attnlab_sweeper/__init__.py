"""attnlab's Hydra sweeper: hydra/sweeper=optuna (optuna_sweeper.py)."""
