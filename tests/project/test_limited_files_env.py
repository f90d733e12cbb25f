"""A Python the tests start under a file-size limit leaves no cut bytecode cache behind (``LIMITED_FILES_ENV``)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.env import LIMITED_FILES_ENV

LIMIT = 8 * 1024


def import_under_the_limit(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))

    return subprocess.run(
        [sys.executable, "-c", "import big"], cwd=folder, env=env, capture_output=True, text=True, preexec_fn=limit
    )


@pytest.mark.parametrize("env_name", ["limited", "plain"])
def test_a_module_imported_under_a_file_size_limit_imports_again(tmp_path: Path, env_name: str) -> None:
    (tmp_path / "big.py").write_text("".join(f"x{i} = {i}\n" for i in range(3000)))  # its cache: ~30 KB
    env = dict(LIMITED_FILES_ENV)
    if env_name == "plain":
        del env["PYTHONDONTWRITEBYTECODE"]
    assert import_under_the_limit(tmp_path, env).returncode == 0
    again = subprocess.run([sys.executable, "-c", "import big"], cwd=tmp_path, capture_output=True, text=True)
    caches = [p.stat().st_size for p in tmp_path.glob("__pycache__/big.*.pyc")]
    if env_name == "limited":
        assert again.returncode == 0 and caches != [LIMIT], again.stderr
    else:  # the hazard itself, shown: the cache is cut at the limit and the next import fails
        assert caches == [LIMIT] and "EOFError" in again.stderr
