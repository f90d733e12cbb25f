"""The name a command is run by, for its --help: the console script's, or ``python -m <module>``."""

from __future__ import annotations

import sys
from pathlib import Path


def prog_name(module: str) -> str:
    """``attnlab-report`` when run as that console script, ``python -m analysis.report`` when run as a module."""
    invoked = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if not invoked or invoked.endswith(".py") or invoked in ("-c", "-m", "python", "python3"):
        return f"python -m {module}"
    return invoked


def command(module: str, script: str) -> list[str]:
    """Another attnlab command in the form this process was started by, for a line that tells the user what to run
    next: its console script ``script`` after an ``attnlab-*`` script (``attnlab-report`` after ``attnlab-train``),
    else ``python -m <module>`` (after ``python -m experiments.train``, and from a notebook or a test)."""
    invoked = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return [script] if invoked.startswith("attnlab-") else ["python", "-m", module]
