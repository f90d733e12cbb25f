"""The README's way in from Python names only what ``import attnlab`` offers, and ``import attnlab`` costs the
standard library only (Hydra scans ``hydra_plugins``, a notebook imports it first)."""

from __future__ import annotations

import re
import subprocess
import sys

import attnlab
from tests.docs.test_docs import code_blocks
from tests.helpers.paths import ROOT


def test_every_attnlab_name_the_readme_uses_is_public() -> None:
    used = {
        name
        for block in code_blocks((ROOT / "README.md").read_text(), "python")
        for name in re.findall(r"\battnlab\.(\w+)", block)
    }
    assert {"run", "sweep", "compose", "collect", "report"} <= used, sorted(used)
    assert used <= set(attnlab.__all__), sorted(used - set(attnlab.__all__))


def test_import_attnlab_loads_no_third_party_module() -> None:
    code = (
        "import sys; before = set(sys.modules); import attnlab; new = set(sys.modules) - before; "
        "print(' '.join(sorted(m for m in new if m.split('.')[0] not in sys.stdlib_module_names)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["attnlab"], done.stdout
