"""attnlab from a user's own folder: a ``common.py``, an ``attnlab_*.py`` and a Hydra user's ``conf/`` (a package
or a plain folder) beside their notebook change nothing of what attnlab runs.

``python -m`` and ``python -c`` put the current folder first on sys.path, so these are the commands a clash would
break; each runs as a child process in such a folder, on the installed packages (no PYTHONPATH).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import installed_python
from tests.helpers.config import TINY


def user_folder(root: Path, conf_package: bool) -> Path:
    """A notebook's folder holding modules and a config folder whose names attnlab's modules once took."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "common.py").write_text("raise ImportError('the user common.py was imported')\n")
    (root / "attnlab_helpers.py").write_text("raise ImportError('the user attnlab_helpers.py was imported')\n")
    conf = root / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text("db:\n  driver: mysql\n")  # a Hydra tutorial's primary config
    if conf_package:
        (conf / "__init__.py").write_text("")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("conf_package", [True, False], ids=["conf-package", "conf-folder"])
def test_the_train_command_composes_attnlabs_config_beside_a_users_conf(tmp_path: Path, conf_package: bool) -> None:
    folder = user_folder(tmp_path / "notebook", conf_package)
    version = installed_python(folder, "-m", "experiments.train", "--version")
    assert version.returncode == 0 and version.stdout.startswith("attnlab "), version.stderr
    job = installed_python(folder, "-m", "experiments.train", "--cfg", "job", "attention=local", "attention.window=3")
    assert job.returncode == 0, job.stdout + job.stderr
    assert "mysql" not in job.stdout  # the user's config.yaml was not the primary config
    assert "name: local" in job.stdout and "window: 3" in job.stdout


def test_the_console_script_and_the_front_door_beside_a_users_modules(tmp_path: Path) -> None:
    folder = user_folder(tmp_path / "notebook", conf_package=True)
    script = Path(sys.executable).parent / "attnlab-train"
    if not script.is_file():
        pytest.skip("attnlab-train is not installed beside this Python (pip install -e .)")
    # the script file run by this Python: its shebang may name another environment's
    version = installed_python(folder, str(script), "--version")
    assert version.returncode == 0 and version.stdout.startswith("attnlab "), version.stderr
    composed = installed_python(
        folder, "-c", "import attnlab; print(attnlab.compose(['attention=local']).attention.name)"
    )
    assert composed.returncode == 0 and composed.stdout.strip() == "local", composed.stderr


@pytest.mark.slow
def test_a_tiny_run_and_its_collection_beside_a_users_modules(tmp_path: Path) -> None:
    folder = user_folder(tmp_path / "notebook", conf_package=True)
    run_dir = tmp_path / "run"
    done = installed_python(folder, "-m", "experiments.train", *TINY, f"hydra.run.dir={run_dir}", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((run_dir / "result.json").read_text())["status"] == "completed"
    read = installed_python(folder, "-c", f"import attnlab; print(len(attnlab.collect([{str(run_dir)!r}]).runs))")
    assert read.returncode == 0 and read.stdout.strip() == "1", read.stderr
