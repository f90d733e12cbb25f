"""What a run leaves: result.json, files written atomically, loggers, the W&B run and its tables."""
