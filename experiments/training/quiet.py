"""Third-party warnings that say nothing about the user's run, filtered once, here.

Each entry is a warning a library raises about its own code or about this machine,
whatever the run's config; anything that could concern the run stays visible.
"""

from __future__ import annotations

import warnings

NOISE = (
    # Lightning's pytree helper calls a torch API that torch has deprecated.
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
    # Lightning on a machine that has srun but runs this process without it (a login node,
    # a workstation with SLURM tools); under srun the SLURM environment is used as it should.
    r"The `srun` command is available on your system but is not used",
    # Runs are counted in steps and logged every log_every_n_steps global steps, across epochs:
    # an epoch shorter than the interval loses nothing.
    r"The number of training batches \(\d+\) is smaller than the logging interval",
)


def quiet_library_warnings() -> None:
    """Ignore the warnings in ``NOISE`` in this process (idempotent; each launcher job calls it)."""
    for message in NOISE:
        warnings.filterwarnings("ignore", message=message)


# Lightning's info lines (GPU/TPU available, a "litlogger" tip, "`Trainer.fit` stopped: max_steps
# reached", "limit_val_batches=1.0 was configured"): the run's own lines say what matters. Its
# warnings go through the warnings module and stay.
LIGHTNING_INFO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


def quiet_lightning_info() -> None:
    """Drop Lightning's info lines, in single runs and in every cell of a sweep alike."""
    import logging

    for name in LIGHTNING_INFO_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
