"""Grids of runs: the grid, SLURM, GPU sharing, Optuna and tuned studies, adaptive seeds, pruning."""
