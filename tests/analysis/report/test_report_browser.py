"""The report in a real browser: headless Chromium lays report.html out at 1280 and 400 px wide.

Each width is an iframe of exactly that size (a browser window cannot be made
narrower than about 500 px, an iframe can): a script in the page waits for the
frames to load, measures them, and writes the numbers into the DOM, which
``--dump-dom`` prints. Checked: the summary's answer and table are on the first
screen (the table whole at 1280 px), the table fits the width without scrolling,
and the page never scrolls sideways, with the details folded or all opened; the same
for a report that opens with a "Left out" section listing a run folder with a long path.
Skipped when no Chromium is installed (``apt-get install chromium``).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from analysis.report.build import build_report
from tests.analysis.report.test_summary import (
    report,  # noqa: F401  (the fixture: one report for both test files)
    write_sweep,
)
from tests.helpers.results import result_dict, write_result

SCREENS = {"wide": (1280, 800), "narrow": (400, 800)}  # (width, height of the first screen) in CSS px
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

MEASURE = """
<script>
function measure(doc, win) {
  const box = (el) => { const r = el.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, right: r.right}; };
  // the summary's section: a "Left out" section may come before it in the lead
  const lead = [...doc.querySelectorAll("section.lead")].find((s) => s.querySelector(".answer"));
  const table = lead.querySelector("table");
  const m = {width: win.innerWidth, height: win.innerHeight, answer: box(lead.querySelector(".answer")),
             table: box(table), tableScroll: table.parentElement.scrollWidth - table.parentElement.clientWidth,
             figure: lead.querySelector("figure img") ? box(lead.querySelector("figure img")) : null,
             overflow: doc.documentElement.scrollWidth - win.innerWidth,
             first: doc.querySelector("section.lead h2").textContent};
  doc.querySelectorAll("details").forEach((d) => { d.open = true; });
  m.openDetails = doc.querySelectorAll("details").length;
  m.overflowOpen = doc.documentElement.scrollWidth - win.innerWidth;
  const wide = [...doc.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right > win.innerWidth + 1
      && !el.closest(".scroll"));  // inside a scroll box an element may be wider: the box scrolls, not the page
  m.outside = wide.slice(0, 5).map((el) => el.tagName + "." + el.className);
  return m;
}
window.addEventListener("load", () => {
  const out = {};
  document.querySelectorAll("iframe").forEach((f) => { out[f.id] = measure(f.contentDocument, f.contentWindow); });
  const pre = document.createElement("pre");
  pre.id = "measurements";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def measure_in_browser(report_html: Path, browser: str) -> dict:
    """Lay the report out in one iframe per screen size and return the page's own measurements."""
    # Every non-ASCII character as a character reference, so no encoding guess can change the text.
    source = html.escape(report_html.read_text(encoding="utf-8"), quote=True)
    source = source.encode("ascii", "xmlcharrefreplace").decode("ascii")
    frames = "".join(
        f'<iframe id="{name}" width="{w}" height="{h}" style="border:0;display:block" srcdoc="{source}"></iframe>'
        for name, (w, h) in SCREENS.items()
    )
    page = report_html.parent / "measure.html"
    # The wrapper names its encoding: without it Chromium guesses from the locale (windows-1252 under
    # LANG=C), and the report's "—" reaches the frames as "â€”".
    head = '<head><meta charset="utf-8"></head>'
    page.write_text(
        f'<!DOCTYPE html><html>{head}<body style="margin:0">{frames}{MEASURE}</body></html>', encoding="utf-8"
    )
    width = max(w for w, _ in SCREENS.values()) + 40
    height = sum(h for _, h in SCREENS.values()) + 200
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                browser,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=120,
        )
    found = re.search(r'<pre id="measurements">(.*?)</pre>', done.stdout, flags=re.S)
    assert found, f"no measurements in Chromium's DOM (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


# A failed run in a folder whose path, with no space in it, is wider than a phone (about 1650 px at 14 px).
LONG_FOLDER = (
    "a_long_cell_folder_name_" * 6,
    "task=copy,attention=multihead,position=learned,seed=9,overrides=0123abcd",
)


@pytest.fixture(scope="module")
def left_out_report(tmp_path_factory) -> Path:
    """The summary's sweep and one failed run in a long folder: the report opens with a "Left out" section."""
    root = tmp_path_factory.mktemp("left_out")
    write_sweep(root / "runs")
    failed = result_dict("copy", "multihead", "learned", 9, status="failed", error="boom", train_lengths=[2, 12])
    write_result(root.joinpath("runs", *LONG_FOLDER), failed)
    return build_report([root / "runs"], root / "report", paper_files=False)


@pytest.fixture(scope="module", params=["summary first", "left out first"])
def measured(request) -> dict:
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium found (apt-get install chromium); the report's layout is checked in a browser only")
    if request.param == "summary first":
        page = request.getfixturevalue("report")[0] / "report.html"
    else:
        page = request.getfixturevalue("left_out_report")
    return {"page": request.param, **measure_in_browser(page, browser)}


@pytest.mark.parametrize("screen", list(SCREENS))
def test_summary_is_on_the_first_screen(measured, screen):
    m = measured[screen]
    width, height = SCREENS[screen]
    assert (m["width"], m["height"]) == (width, height)
    assert 0 <= m["answer"]["top"] and m["answer"]["bottom"] <= height
    assert m["table"]["top"] < height
    if screen == "wide":
        assert m["table"]["bottom"] <= height, "the whole summary table fits the first screen at 1280 px"
        assert m["figure"] is not None and m["figure"]["top"] < m["table"]["bottom"], "the figure sits beside it"
    assert m["table"]["right"] <= width and m["tableScroll"] <= 0, "the summary table fits without scrolling"


@pytest.mark.parametrize("screen", list(SCREENS))
def test_nothing_overflows_horizontally(measured, screen):
    m = measured[screen]
    assert m["overflow"] <= 0, m
    assert m["openDetails"] > 0 and m["overflowOpen"] <= 0, m
    assert m["outside"] == [], m


@pytest.mark.parametrize("screen", list(SCREENS))
def test_the_summary_is_found_behind_a_left_out_section(measured, screen):
    """The lead's first section is "Left out" when something is left out; the summary is measured all the same."""
    m = measured[screen]
    assert m["first"] == ("Left out" if measured["page"] == "left out first" else "Summary — copy"), m
    assert m["answer"]["bottom"] > m["answer"]["top"] and m["table"]["bottom"] > m["table"]["top"], m
