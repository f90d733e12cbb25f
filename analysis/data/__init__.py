"""Results read from files into one frame: result.json and W&B offline runs (collect, wandb_offline),
cells of seeds (cells), per-length ranges (ranges) and the confounds that differ between cells (confounds)."""
