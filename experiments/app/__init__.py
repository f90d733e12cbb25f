"""The entry points: the Hydra command (train), the Python API, preflight, the closing summary."""
