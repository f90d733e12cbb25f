"""Whether a benchmark measured anything: a bench whose every case errored has no result to report.

A command that times cases (points, targets, paths) records each with a
``status``; ``ok`` is a measurement, anything else (``error``, ``oom``,
``skipped``) is not. When no case is ``ok`` the command prints one line saying
so, writes its JSON with ``"complete": false`` and exits 1, so a script that
runs the bench never reads an empty table as a finished one.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any, Mapping, Sequence

from attnlab.prog import prog_name

NOTHING_MEASURED_EXIT = 1


def nothing_measured(records: Sequence[Mapping[str, Any]]) -> str | None:
    """None when at least one case measured; otherwise the line that says why none did (counts and first error)."""
    if any(r.get("status") == "ok" for r in records):
        return None
    if not records:
        return "no case was measured: the options selected no case"
    counts = ", ".join(f"{n} {status}" for status, n in sorted(Counter(str(r.get("status")) for r in records).items()))
    first = next((str(r["error"]).splitlines()[0] for r in records if r.get("error")), None)
    return f"no case was measured ({counts})" + (f"; first error: {first}" if first else "")


def report_nothing_measured(command: str, line: str) -> int:
    """Print the line on stderr and return the exit status of a bench that measured nothing."""
    print(f"{prog_name('experiments.bench')} {command}: {line}", file=sys.stderr)
    return NOTHING_MEASURED_EXIT
