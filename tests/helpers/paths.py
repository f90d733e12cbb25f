"""Where things are: the checkout, its config folder, the tests, and the shared corpora beside the checkout."""

from __future__ import annotations

from pathlib import Path

# tests/helpers/paths.py: two folders below the checkout, wherever a test file sits
ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
TESTS = ROOT / "tests"
SHARED_DATA = ROOT.parent / "shared" / "data"
