"""attnlab installed as a user installs it: ``pip install`` of the project (not editable) into a new environment,
then used from another folder, one holding a clashing ``common.py`` and a Hydra ``conf/`` package.

The new environment sees the test environment's third-party packages (torch, Lightning, Hydra, ...) through a
``.pth`` line, so nothing is downloaded; that line adds the folder alone, so the editable install there stays off
and attnlab comes only from the new environment's own site-packages. The project is copied first, because pip
builds a local folder in place.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.helpers.config import TINY
from tests.helpers.paths import ROOT
from tests.hydra_plugins.test_plugins_plain_app import FORBIDDEN, run_app
from tests.project.test_library_user_folder import user_folder

# what the copy leaves out: environments, caches and outputs (the wheel's contents come from the package folders)
LEFT_OUT = shutil.ignore_patterns(
    ".venv", ".git", "__pycache__", "*.egg-info", "build", "outputs", "multirun", "wandb", ".*_cache", "mutants"
)


def new_environment(where: Path) -> Path:
    """A new venv whose site-packages also reads this environment's (as a plain path, its .pth files unread)."""
    venv.EnvBuilder(with_pip=False).create(where)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "test_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.mark.slow
def test_a_pip_installed_attnlab_trains_and_reports_from_a_users_folder(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=LEFT_OUT)
    python = new_environment(tmp_path / "env")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"WANDB_MODE": "offline", "OMP_NUM_THREADS": "1", "PIP_NO_INDEX": "1"}
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    shutil.rmtree(source)  # nothing may come from the source tree any more
    bin_dir = python.parent
    folder = user_folder(tmp_path / "notebook", conf_package=True)

    def command(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=300)

    where = command(str(python), "-c", "import experiments, attnlab; print(experiments.__file__, attnlab.__version__)")
    assert where.returncode == 0 and where.stdout.startswith(str(tmp_path / "env")), where.stdout + where.stderr

    run_dir = folder / "runs" / "tiny"
    train = command(str(bin_dir / "attnlab-train"), *TINY, f"hydra.run.dir={run_dir}")
    assert train.returncode == 0, train.stdout[-2000:] + train.stderr[-2000:]
    assert json.loads((run_dir / "result.json").read_text())["status"] == "completed"
    assert f"attnlab-report {run_dir} --out {run_dir / 'report'}" in train.stdout  # the form that was typed

    report = command(str(bin_dir / "attnlab-report"), str(run_dir), "--out", str(run_dir / "report"), "--no-paper")
    assert report.returncode == 0, report.stderr[-2000:]
    assert (run_dir / "report" / "report.html").is_file()

    if (bin_dir / "attnlab-evaluate").is_file():
        out = folder / "evaluated"
        evaluate = command(str(bin_dir / "attnlab-evaluate"), f"ckpt_path={run_dir}", f"out={out}")
        assert evaluate.returncode == 0, evaluate.stderr[-2000:]
        assert list(out.rglob("*.json")), "the evaluation wrote no JSON"

    # a plain Hydra app with its own experiments/ package, in this environment: no warning, nothing of attnlab
    app = tmp_path / "plain_app"
    (app / "experiments").mkdir(parents=True)
    (app / "experiments" / "__init__.py").write_text("")
    done, modules = run_app(app, python=str(python))
    assert done.returncode == 0 and "Error importing" not in done.stderr, done.stderr[-2000:]
    assert any(m.startswith("hydra_plugins.attnlab_") for m in modules)
    assert not [m for m in modules if m.split(".")[0] in FORBIDDEN]
