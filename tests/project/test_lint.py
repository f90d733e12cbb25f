"""``make lint`` catches what it is there for: its ruff commands, run in a folder holding the project's
pyproject.toml, fail on a planted unused import and on an unformatted file, and mypy with the project's configuration
fails on a planted type error; the same file without the plant passes each, so the failure is the plant's.
``.ci/run`` runs ``make lint`` before the tests."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

CONFIG = ROOT / "pyproject.toml"

CLEAN = 'import os\n\n\ndef home() -> str:\n    return os.environ.get("HOME", "")\n'
UNUSED_IMPORT = "import json\n" + CLEAN
UNFORMATTED = "import os\n\n\ndef home( )->str:\n    return os.environ.get('HOME',\"\")\n"
# one error where the function is annotated, one in an unannotated body (found only with check_untyped_defs)
TYPE_ERRORS = 'def count(text: str) -> int:\n    return text\n\n\ndef untyped():\n    n: int = "one"\n    return n\n'
TYPED = "def count(text: str) -> int:\n    return len(text)\n\n\ndef untyped():\n    n: int = 1\n    return n\n"


def tool(name: str, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install 'attnlab[dev]', or make lint)")
    return subprocess.run(
        [sys.executable, "-m", name, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def plant(tmp_path: Path, text: str) -> Path:
    """A folder like the project's root: its pyproject.toml and one module, ``planted.py``, holding ``text``."""
    (tmp_path / "pyproject.toml").write_text(CONFIG.read_text())
    path = tmp_path / "planted.py"
    path.write_text(text)
    return path


def test_ruff_check_fails_on_an_unused_import(tmp_path: Path) -> None:
    plant(tmp_path, CLEAN)
    assert tool("ruff", "check", ".", cwd=tmp_path).returncode == 0
    plant(tmp_path, UNUSED_IMPORT)
    found = tool("ruff", "check", ".", cwd=tmp_path)
    assert found.returncode == 1, found.stdout + found.stderr
    assert "F401" in found.stdout and "json" in found.stdout


def test_ruff_format_check_fails_on_an_unformatted_file(tmp_path: Path) -> None:
    plant(tmp_path, CLEAN)
    assert tool("ruff", "format", "--check", ".", cwd=tmp_path).returncode == 0
    plant(tmp_path, UNFORMATTED)
    found = tool("ruff", "format", "--check", ".", cwd=tmp_path)
    assert found.returncode == 1, found.stdout + found.stderr
    assert "planted.py" in found.stdout + found.stderr


def test_mypy_fails_on_a_planted_type_error(tmp_path: Path) -> None:
    clean = tool("mypy", "--config-file", CONFIG, plant(tmp_path, TYPED), cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    found = tool("mypy", "--config-file", CONFIG, plant(tmp_path, TYPE_ERRORS), cwd=tmp_path)
    assert found.returncode == 1, found.stdout + found.stderr
    assert re.search(r"planted\.py:2: error: .*\[return-value\]", found.stdout), found.stdout
    assert re.search(r"planted\.py:6: error: .*\[assignment\]", found.stdout), found.stdout


def test_make_lint_runs_every_check_and_ci_runs_it_before_the_tests() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "the Makefile has no lint target"
    for check in ("-m ruff check .", "-m ruff format --check .", "-m mypy"):
        assert check in recipe.group(1), f"make lint does not run {check!r}"
    lines = (ROOT / ".ci" / "run").read_text().splitlines()

    def runs(target: str) -> int:
        """The first line of .ci/run running ``make <target>`` (not in a comment; not ``make <target>-slow``)."""
        found = [i for i, line in enumerate(lines) if re.search(rf"(^|\s)make {target}(\s|$)", line.split("#")[0])]
        assert found, f".ci/run does not run make {target}"
        return found[0]

    assert runs("lint") < runs("test") and runs("lint") < runs("test-slow")
