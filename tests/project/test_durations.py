"""The run order of tests/durations.py: files by their tests' recorded seconds, longest first, each file whole."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.helpers.durations import from_junit, longest_files_first


@dataclass
class Item:
    nodeid: str


def test_files_run_longest_first_each_whole_and_in_its_own_order() -> None:
    collected = [
        Item("tests/test_a.py::one"),  # 1 s in all
        Item("tests/test_a.py::two"),
        Item("tests/test_b.py::one[x]"),  # 3 + 4 = 7 s: its longest test alone (5 s in c) is shorter than c's
        Item("tests/test_b.py::one[y]"),
        Item("tests/test_c.py::slow"),  # 5 + 0.5 = 5.5 s
        Item("tests/test_c.py::fast"),
        Item("tests/test_new.py::unmeasured"),  # 0 s: after the measured files
        Item("tests/test_d.py::left"),  # 0 s: d's other test was not selected
    ]
    seconds = {
        "tests/test_a.py::one": 0.4,
        "tests/test_a.py::two": 0.6,
        "tests/test_b.py::one[x]": 3.0,
        "tests/test_b.py::one[y]": 4.0,
        "tests/test_c.py::slow": 5.0,
        "tests/test_c.py::fast": 0.5,
        "tests/test_d.py::not_selected": 50.0,
    }
    ordered = [item.nodeid for item in longest_files_first(collected, seconds)]
    assert ordered == [
        "tests/test_b.py::one[x]",
        "tests/test_b.py::one[y]",
        "tests/test_c.py::slow",
        "tests/test_c.py::fast",
        "tests/test_a.py::one",
        "tests/test_a.py::two",
        "tests/test_new.py::unmeasured",
        "tests/test_d.py::left",
    ]


def test_a_junit_report_gives_each_test_id_its_seconds(tmp_path: Path) -> None:
    xml = tmp_path / "run.xml"
    xml.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">'
        '<testcase classname="tests.test_a" name="test_one" time="12.345" />'
        '<testcase classname="tests.cluster.test_b" name="test_two[grid]" time="0.04" />'
        "</testsuite></testsuites>"
    )
    assert from_junit(xml) == {
        "tests/cluster/test_b.py::test_two[grid]": 0.0,
        "tests/test_a.py::test_one": 12.3,
    }
