"""The README is a front door: short enough to read at one sitting, and every page of docs/ is reachable from it
by links (directly, or through a page the README links to), so nothing moved out of the README is lost."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.paths import ROOT

README = ROOT / "README.md"
MAX_LINES = 400


def linked_pages(doc: Path) -> set[Path]:
    """The Markdown files of the repository a doc links to, outside its code blocks, resolved from its folder."""
    text = re.sub(r"^ *```.*?^ *```", "", doc.read_text(), flags=re.S | re.M)
    found = set()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        file = target.partition("#")[0]
        if file.endswith(".md") and not re.match(r"[a-z]+:", file):
            found.add((doc.parent / file).resolve())
    return found


def reachable(start: Path) -> set[Path]:
    """Every Markdown file reached from ``start`` by following links, ``start`` included."""
    seen, todo = set(), [start.resolve()]
    while todo:
        page = todo.pop()
        if page in seen or not page.exists():
            continue
        seen.add(page)
        todo += sorted(linked_pages(page) - seen)
    return seen


def test_the_readme_fits_its_limit() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines, over {MAX_LINES}: move reference text into docs/"


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    pages = {p.resolve() for p in (ROOT / "docs").glob("*.md")}
    missing = sorted(str(p.relative_to(ROOT)) for p in pages - reachable(README))
    assert not missing, f"docs pages no link leads to from README.md: {missing}"


def test_a_page_linked_only_through_another_page_counts(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("See [a](docs/a.md#x).\n```\n[hidden](docs/c.md)\n```\n")
    (tmp_path / "docs" / "a.md").write_text("# x\nThen [b](b.md) and [web](https://example.org/d.md).\n")
    (tmp_path / "docs" / "b.md").write_text("# b\n")
    (tmp_path / "docs" / "c.md").write_text("# c\n")
    found = {p.name for p in reachable(tmp_path / "README.md")}
    assert found == {"README.md", "a.md", "b.md"}  # c.md is named only inside a code block
