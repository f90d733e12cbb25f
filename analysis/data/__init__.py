"""Results read from files into one frame: result.json and W&B offline runs (collect, wandb_offline), each result's
row (rows), the frames of runs (runs), learning curves from CSV logs (curves), cells of seeds (cells), per-length
ranges (ranges) and the confounds that differ between cells (confounds)."""
