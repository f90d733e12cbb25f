"""The environment a test gives a child process: W&B offline, this checkout first on the import path."""

from __future__ import annotations

import os

from tests.helpers.paths import ROOT

# The environment as the test process started, before any test ran: a run trained inside the test process leaves
# variables behind (Lightning's PL_GLOBAL_SEED and PL_SEED_WORKERS, W&B's WANDB_SERVICE, CUBLAS_WORKSPACE_CONFIG),
# which a user's shell would not pass to a command, and which would give each later command an environment of its
# own (and so a warm Python of its own, tests/helpers/warm.py).
AT_START = dict(os.environ)


def environment(**extra: str) -> dict[str, str]:
    """This process's environment as it started, W&B offline and this checkout importable, then ``extra``."""
    return {**AT_START, "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT), **extra}


# the command line as a user meets it: no W&B chatter, Hydra's one-line errors
ENV = environment(WANDB_SILENT="true", HYDRA_FULL_ERROR="0")
# one intra-op thread per training process: the tests may run two at a time on two cores
ONE_THREAD_ENV = environment(OMP_NUM_THREADS="1")
# attnlab as an installed library sees it: imported from site-packages, never from this checkout
INSTALLED_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
    "WANDB_MODE": "offline",
    "OMP_NUM_THREADS": "1",
}
# a Python under a file-size limit (ulimit -f): it would write its bytecode caches cut at the limit (one write,
# the short count unchecked, SIGXFSZ ignored), and every later import of such a module fails (EOFError)
LIMITED_FILES_ENV = ENV | {"PYTHONDONTWRITEBYTECODE": "1"}
