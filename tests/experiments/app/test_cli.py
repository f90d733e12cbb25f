"""The command line as its peers have it: attnlab's --help and --version, the one-line checks under any
Hydra flag, console scripts that name themselves, and the Python API giving the command line's result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from experiments.app.preflight import overrides_of
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY
from tests.helpers.env import ENV
from tests.helpers.paths import CONF, ROOT


def test_help_is_attnlabs_own_with_every_group_and_its_options() -> None:
    proc = train_cli("--help")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "powered by Hydra" not in text and "fail_at_step" not in text
    groups = sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name != "hydra" and not p.name.startswith("_"))
    for group in groups:
        options = sorted(x.stem for x in (CONF / group).glob("*.yaml"))
        assert f"{group}: {', '.join(options)}" in text, group
    assert text.count("  attnlab-train ") == 3  # three examples
    assert "== Presets ==" in text


def test_version_is_attnlabs() -> None:
    proc = train_cli("--version")
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert proc.returncode == 0 and proc.stdout.startswith(f"attnlab {expected}"), proc.stdout


@pytest.mark.parametrize(
    "flags",
    [["--cfg", "job"], ["--cfg=job"], ["--info"], ["--info", "defaults"], ["-m"], ["--resolve", "--cfg", "all"]],
)
def test_one_line_checks_run_under_any_flag(flags: list[str]) -> None:
    proc = train_cli(*flags, "attention=sofft")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "attention=sofft" in lines[0] and "'soft'" in lines[0]


def test_cfg_job_prints_the_config_of_good_overrides() -> None:
    proc = train_cli("--cfg", "job", "attention=local", "+trainer.profiler=simple")
    assert proc.returncode == 0, proc.stderr
    assert "profiler: simple" in proc.stdout and "name: local" in proc.stdout


def test_hydra_flags_are_told_from_overrides() -> None:
    assert overrides_of(["--cfg", "job", "a=1", "-m", "b=2", "--info", "plugins", "c=3", "--resolve"]) == [
        "a=1",
        "b=2",
        "c=3",
    ]
    assert overrides_of(["--info", "a=1"]) == ["a=1"]  # --info's topic is optional
    assert overrides_of(["a=1", "--help"]) is None
    assert overrides_of(["-cn", "other", "a=1"]) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, module", [("attnlab-report", "analysis.report"), ("attnlab-bench", "experiments.bench")]
)
def test_console_scripts_name_themselves(script: str, module: str, tmp_path: Path) -> None:
    """Run as the console script (a file named like it), --help says its name; run as a module, the module."""
    launcher = tmp_path / script
    entry = {
        "analysis.report": "from analysis.report import main",
        "experiments.bench": "from experiments.bench import main",
    }[module]
    launcher.write_text(f"import sys\n{entry}\nsys.exit(main())\n")
    as_script = subprocess.run([sys.executable, str(launcher), "--help"], env=ENV, text=True, capture_output=True)
    as_module = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, env=ENV, text=True, capture_output=True
    )
    assert as_script.stdout.startswith(f"usage: {script} "), as_script.stdout + as_script.stderr
    assert as_module.stdout.startswith(f"usage: python -m {module} "), as_module.stdout


@pytest.mark.slow
def test_python_api_gives_the_command_lines_result(tmp_path: Path) -> None:
    from experiments import run

    overrides = [*TINY, "task=reverse", "attention=local", "num_threads=1", "seed=3"]
    proc = train_cli(*overrides, f"hydra.run.dir={tmp_path / 'cli'}")
    assert proc.returncode == 0, proc.stderr
    cli = json.loads((tmp_path / "cli" / "result.json").read_text())
    api = run(overrides, run_dir=tmp_path / "api")
    assert api == json.loads((tmp_path / "api" / "result.json").read_text())
    assert api["status"] == cli["status"] == "completed"
    assert api["config_hash"] == cli["config_hash"] and api["overrides"] == cli["overrides"]
    assert api["metrics"] == pytest.approx(cli["metrics"], rel=1e-6)
    assert api["cost"]["params"] == cli["cost"]["params"]


def test_python_api_refuses_a_bad_override_in_one_line(tmp_path: Path) -> None:
    from experiments import run
    from experiments.app.preflight import PreflightError

    with pytest.raises(PreflightError, match=r"did you mean 'soft'"):
        run(["attention=sofft"], run_dir=tmp_path)


# ``python -m experiments.train ARGS`` run through runpy in a fresh process; after its exit, its exit code and
# which of the heavy modules (seconds to import) the process holds
HEAVY = ("torch", "torch._dynamo", "lightning")
# the modules are read by an exit handler: the command ends its process itself (experiments.app.quick_exit)
IMPORTED = f"""
import atexit, json, runpy, sys
sys.argv = ["experiments.train", *sys.argv[1:]]
atexit.register(lambda: print(json.dumps({{"imported": sorted(m for m in {HEAVY!r} if m in sys.modules)}})))
runpy.run_module("experiments.train", run_name="__main__", alter_sys=True)
"""


def imported_by(*args: str) -> tuple[int, list[str], str]:
    """(exit code, heavy modules imported, stderr) of ``python -m experiments.train *args``."""
    proc = subprocess.run([sys.executable, "-c", IMPORTED, *args], cwd=ROOT, env=ENV, text=True, capture_output=True)
    assert proc.stdout.strip(), proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    return proc.returncode, seen["imported"], proc.stderr


@pytest.mark.parametrize(
    "args, code, says",
    [
        (["--version"], 0, ""),
        (["--help"], 0, ""),
        (["attention=sofft"], 2, "did you mean 'soft'?"),  # a variant's name, mistyped
        (["trainer.max_stepz=3"], 2, "did you mean 'trainer.max_steps'?"),  # an unknown Trainer keyword
    ],
)
def test_answers_without_training_import_neither_torch_nor_lightning(args: list[str], code: int, says: str) -> None:
    exit_code, imported, stderr = imported_by(*args)
    assert (exit_code, imported) == (code, []), stderr
    assert says in stderr


def test_value_and_run_folder_refusals_do_not_import_lightning(tmp_path: Path) -> None:
    """A value refused in the composed config, and a run folder holding another computation: both need the
    variants (torch) but not the task or the Trainer (Lightning)."""
    code, imported, stderr = imported_by("optim.lr=-1")
    assert code == 2 and "optim.lr=-1.0 is not allowed" in stderr, stderr
    assert "lightning" not in imported and "torch" in imported
    (tmp_path / "result.json").write_text(json.dumps({"status": "completed", "config": {"seed": 99}}))
    code, imported, stderr = imported_by(f"hydra.run.dir={tmp_path}")
    assert code == 2 and f"{tmp_path} holds another computation (result.json)" in stderr, stderr
    assert "lightning" not in imported and "torch" in imported


def test_the_entry_module_still_names_what_it_imported_from_the_run() -> None:
    """What experiments.app.train imported at its top before the run's modules moved into its functions."""
    import experiments.app.train as app
    from experiments.sweep import gpu_share
    from experiments.training import single_run

    for name in ("BAD_OBJECTIVE", "RESULT", "is_rank_zero", "objective", "resume_command", "train", "train_in_child"):
        assert getattr(app, name) is getattr(single_run, name), name
    assert app.shared_gpu is gpu_share.shared_gpu
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        app.trian  # noqa: B018
