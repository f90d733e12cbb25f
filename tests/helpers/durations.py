"""The order a run takes its tests in: the files whose selected tests took longest first, each file's tests in
their own order.

Under ``pytest -n 2`` a worker that starts a long test last runs it alone while the other waits; with the long
files first, the work that is left at the end is short. ``tests/durations.json`` holds the seconds
of each test as a run of the slow tier measured them (JUnit's ``time``: set-up, call and tear-down); a test it
does not name counts 0, so new tests run after the measured ones, in their collection order. Regenerate it from
a run's JUnit XML:

    .venv/bin/python -m pytest -n 2 --dist worksteal -m slow --junitxml=slow.xml
    .venv/bin/python -m tests.helpers.durations slow.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Protocol, TypeVar

from tests.helpers.paths import TESTS

RECORD = TESTS / "durations.json"


class HasNodeId(Protocol):
    nodeid: str


Item = TypeVar("Item", bound=HasNodeId)


def recorded(path: Path = RECORD) -> dict[str, float]:
    """{test id: seconds} as last measured; empty when the record is absent."""
    return json.loads(path.read_text()) if path.is_file() else {}


def longest_files_first(items: list[Item], seconds: dict[str, float]) -> list[Item]:
    """``items`` with the files in decreasing order of their tests' recorded seconds (a stable sort: a file's
    tests stay together and in order, so a module-scoped fixture is still built once per worker)."""
    per_file: dict[str, float] = {}
    for item in items:
        file = item.nodeid.split("::", 1)[0]
        per_file[file] = per_file.get(file, 0.0) + seconds.get(item.nodeid, 0.0)
    return sorted(items, key=lambda item: -per_file[item.nodeid.split("::", 1)[0]])


def from_junit(xml: Path) -> dict[str, float]:
    """{test id: seconds} of each test case of a JUnit XML report (classname ``tests.variants.test_x``:
    ``tests/variants/test_x.py``)."""
    seconds = {}
    for case in ET.parse(xml).iter("testcase"):
        file = case.get("classname", "").replace(".", "/") + ".py"
        seconds[f"{file}::{case.get('name')}"] = round(float(case.get("time", 0)), 1)
    return dict(sorted(seconds.items()))


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python -m tests.helpers.durations JUNIT_XML (a pytest --junitxml report)", file=sys.stderr)
        return 2
    RECORD.write_text(json.dumps(from_junit(Path(argv[0])), indent=0) + "\n")
    print(f"{RECORD}: {len(recorded())} tests")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
