"""Sweeps end to end: one folder per cell under each launcher, failures, kill and resume, DDP,
Optuna, W&B runs per cell, and bad grids stopped before any cell starts.

Multiruns run as subprocesses (``python -m experiments.train -m ...``) into ``tmp_path``
with the tiny config, as a user would run them.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import OmegaConf

from experiments.config.spec import build_spec, grid_spec
from experiments.sweep.grid import (
    MAX_CELL_NAME,
    SweepConfigError,
    SweepSummary,
    available_cores,
    cell_dirname,
    check_grid,
    grid_values,
    threads_per_process,
)
from experiments.training.single_run import BAD_OBJECTIVE, objective
from tests.helpers.config import TINY
from tests.helpers.env import ENV
from tests.helpers.paths import CONF
from tests.helpers.results import RESULT_KEYS
from tests.helpers.sweeps import QUIET, cell_with, hydra_config, multirun, results
from tests.helpers.warm import run_module


def offline_runs(folder: Path) -> list[dict]:
    from analysis.data.wandb_offline import read_wandb_offline_run

    return [read_wandb_offline_run(p) for p in sorted(folder.rglob("offline-run-*")) if p.is_dir()]


def assert_one_folder_per_cell(sweep_dir: Path, found: dict[Path, dict], cells: int) -> None:
    assert len(found) == cells, sorted(p.name for p in found)
    assert all(folder.parent == sweep_dir for folder in found), "every cell directly under the one sweep dir"
    assert len({r["run_id"] for r in found.values()}) == cells
    for folder, result in found.items():
        assert RESULT_KEYS <= set(result) and result["schema"] == 1
        assert result["run_dir"] == str(folder)


# -- launchers ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_basic_launcher_grid_writes_one_valid_result_per_cell(tmp_path: Path) -> None:
    proc, sweep_dir = multirun(tmp_path, *QUIET, "attention=soft,local", "position=sinusoidal,learned")
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = results(sweep_dir)
    assert_one_folder_per_cell(sweep_dir, found, 4)
    assert {(r["attention"], r["position"]) for r in found.values()} == set(
        itertools.product(["soft", "local"], ["sinusoidal", "learned"])
    )
    for result in found.values():
        assert result["status"] == "completed", result["error"]
        assert f"attention={result['attention']}" in result["overrides"]
        assert result["config"]["attention.name"] == result["attention"]
        assert result["cost"]["steps"] == 2 and result["metrics"]["val/loss"] > 0


@pytest.mark.slow
def test_submitit_local_launcher_runs_the_same_grid(tmp_path: Path) -> None:
    proc, sweep_dir = multirun(
        tmp_path,
        *QUIET,
        # two cells: each is a job of its own process (about 6 s each on CPU); the basic launcher's
        # test covers a two-factor grid
        "attention=soft,local",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = results(sweep_dir)
    assert_one_folder_per_cell(sweep_dir, found, 2)
    assert all(r["status"] == "completed" for r in found.values())
    assert len(list((sweep_dir / ".submitit").glob("*/*_result.pkl"))) == 2, "each cell was a submitit job"


@pytest.mark.slow
def test_joblib_cells_get_their_own_wandb_run_group_tags_and_thread_share(tmp_path: Path) -> None:
    args = [
        *TINY,
        "logger=default",
        "name=ablation_demo",
        "logger.wandb.tags=[demo]",
        "attention=soft,local",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
    ]
    proc, sweep_dir = multirun(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = results(sweep_dir)
    assert_one_folder_per_cell(sweep_dir, found, 2)
    for folder, result in found.items():
        # two jobs at once share the cores instead of each taking all of them
        assert result["cost"]["threads"] == max(1, available_cores() // 2)
        (run,) = offline_runs(folder)  # one W&B run per job, finished by that job
        assert run["id"] == result["run_id"] and run["finished"]
        assert run["group"] == "ablation_demo" == result["sweep"]
        assert {"reverse", result["attention"], result["position"], "demo"} <= set(run["tags"])
        assert run["summary"]["status"] == "completed"


# -- survive and resume --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def failing_grid(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """A grid of two cells, the second failing (a negative learning rate): run once for the tests that read it."""
    return multirun(tmp_path_factory.mktemp("failing_grid"), *QUIET, "optim.lr=1e-3,-1")


@pytest.mark.slow
def test_a_failing_cell_is_recorded_and_the_others_complete(failing_grid) -> None:
    proc, sweep_dir = failing_grid
    assert proc.returncode == 1, "the exit code says a cell failed"
    by_lr = {r["config"]["optim.lr"]: r for r in results(sweep_dir).values()}
    assert set(by_lr) == {1e-3, -1}
    assert by_lr[1e-3]["status"] == "completed"
    assert by_lr[-1]["status"] == "failed" and "optim.lr" in by_lr[-1]["error"] and by_lr[-1]["user_error"]


LIGHTNING_BANNERS = ("GPU available", "TPU available", "litlogger", "`Trainer.fit` stopped", "was configured so")


@pytest.mark.slow
def test_a_multirun_is_quiet_and_ends_with_one_line_per_cell_and_the_report_command(failing_grid) -> None:
    proc, sweep_dir = failing_grid
    out = proc.stdout + proc.stderr
    assert not [line for line in out.splitlines() if any(b in line for b in LIGHTNING_BANNERS)]
    by_lr = {r["config"]["optim.lr"]: (folder, r) for folder, r in results(sweep_dir).items()}
    tail = proc.stdout.strip().splitlines()[-3:]
    ok_dir, ok = by_lr[1e-3]
    bad_dir, bad = by_lr[-1]
    expected = {
        # each cell named by the override in which the cells differ, then its folder
        f"completed  val/loss {ok['metrics']['val/loss']:.4f}  optim.lr=0.001  {ok_dir}",
        f"failed     {bad['error'][:80]}  optim.lr=-1  {bad_dir}",
    }
    assert set(tail[:2]) == expected, tail
    assert tail[2] == f"report  python -m analysis.report {sweep_dir} --out {sweep_dir / 'report'}"


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, "the sweep ended before the moment to kill it"
        assert time.monotonic() < deadline, "the sweep never reached the moment to kill it"
        time.sleep(0.05)


@pytest.mark.slow
def test_killed_sweep_rerun_finishes_only_what_was_missing(tmp_path: Path) -> None:
    """Cells: 3 steps (finished before the kill), 400 steps (killed mid-way), 4 steps (never started)."""
    base = [a for a in QUIET if not a.startswith(("trainer.max_steps", "trainer.val_check_interval", "logger="))]
    args = [
        *base,
        "logger=default",
        "trainer.val_check_interval=100",
        "checkpoint_every_n_steps=10",
        "trainer.max_steps=3,400,4",
    ]
    sweep_dir = tmp_path / "sweep"
    command = [sys.executable, "-m", "experiments.train", "-m", *args, f"hydra.sweep.dir={sweep_dir}"]
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(
            command, cwd=tmp_path, env=ENV, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            _wait_for(
                lambda: (
                    (cell_with(sweep_dir, "trainer.max_steps=400") or tmp_path / "none")
                    .joinpath("checkpoints", "last.ckpt")
                    .exists()
                ),
                first,
            )
        finally:
            os.killpg(first.pid, signal.SIGKILL)  # the sweep and everything it started
            first.wait()
    before = results(sweep_dir)
    assert [r["config"]["trainer.max_steps"] for r in before.values()] == [3], "killed after the first cell only"
    long_cell = cell_with(sweep_dir, "trainer.max_steps=400")
    run_id = json.loads((long_cell / "run_state.json").read_text())["run_id"]
    stamps = {folder: (folder / "result.json").stat().st_mtime_ns for folder in before}

    rerun = run_module(*command[2:], cwd=tmp_path, env=ENV, timeout=300)  # the same command, from the warm Python
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    out = rerun.stdout + rerun.stderr
    assert out.count("already completed") == 1, "only the finished cell is skipped"
    assert out.count("resuming from") == 1 and str(long_cell / "checkpoints") in out
    after = results(sweep_dir)
    assert len(after) == 3 and all(r["status"] == "completed" for r in after.values())
    assert all((folder / "result.json").stat().st_mtime_ns == stamps[folder] for folder in before)
    assert after[long_cell]["run_id"] == run_id and after[long_cell]["cost"]["steps"] == 400
    # the resumed cell continued its W&B run: two offline folders (killed, resumed), one run id
    assert [run["id"] for run in offline_runs(long_cell)] == [run_id, run_id]


# -- several processes ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_ddp_on_two_cpu_processes_writes_one_result(tmp_path: Path) -> None:
    args = [a for a in QUIET if not a.startswith(("logger=", "num_threads"))]
    # 3 test batches (one per length) on 2 ranks: a padding sampler would evaluate one twice.
    cell = [*args, "task.eval_lengths=[8,12,16]", "checkpoint_every_n_steps=2", "seed=0"]
    proc, sweep_dir = multirun(
        tmp_path, *cell, "logger=default", "trainer=ddp", "trainer.devices=2", "trainer.accelerator=cpu"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = list(tmp_path.rglob("result.json"))
    assert len(found) == 1, found
    folder = found[0].parent
    result = json.loads(found[0].read_text())
    assert result["status"] == "completed" and result["cost"]["world_size"] == 2
    assert (folder / "train_ddp_process_1.log").exists(), "rank 1 ran in the cell's own folder"
    assert not (tmp_path / "outputs").exists(), "no second output dir for rank 1"
    assert [run["id"] for run in offline_runs(tmp_path)] == [result["run_id"]], "rank 0's W&B run only"
    # The two ranks' test metrics equal one process testing the same final weights.
    from experiments.training.build import assemble
    from experiments.training.outcome import scalar_metrics
    from tests.helpers.config import compose

    parts = assemble(build_spec(compose([*cell, "logger=none"])), tmp_path / "single", run_id="single")
    single = scalar_metrics(
        parts.trainer.test(
            parts.module,
            datamodule=parts.datamodule,
            verbose=False,
            ckpt_path=str(folder / "checkpoints" / "last.ckpt"),
        )
    )
    for key in ("test/loss", "test/token_acc", "test/seq_acc"):
        assert result["metrics"][key] == pytest.approx(single[key], abs=1e-6), key
    by_length = parts.module.length_metrics()
    assert set(result["by_length"]) == set(by_length) == {"8", "12", "16"}
    for length, values in by_length.items():
        assert result["by_length"][length] == pytest.approx(values, abs=1e-6), length


# -- hyperparameter search ------------------------------------------------------------------------------
@pytest.mark.slow
def test_optuna_study_survives_a_failed_trial_and_reports_the_best(tmp_path: Path) -> None:
    proc, sweep_dir = multirun(tmp_path, *QUIET, "hparams_search=optuna_grid", "optim.lr=0.001,0.003,-1")
    assert proc.returncode == 1, "one trial failed, the study went on, the exit code says so"
    found = list(results(sweep_dir).values())
    assert sorted(r["config"]["optim.lr"] for r in found) == [-1, 0.001, 0.003]
    values = {r["config"]["optim.lr"]: objective(r) for r in found}
    assert values[-1] == BAD_OBJECTIVE
    best = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert best["best_value"] == pytest.approx(min(values.values()))
    assert values[best["best_params"]["optim.lr"]] == pytest.approx(best["best_value"])


def test_optuna_studies_are_per_variant_seeded_and_tune_lr_and_warmup() -> None:
    cfg = hydra_config(["hparams_search=optuna", "attention=local", "position=rope", "seed=3"])
    sweeper = cfg.hydra.sweeper
    assert cfg.hydra.sweep.dir == "multirun/default/optuna_reverse_local_rope"
    assert sweeper.study_name == "default_reverse_local_rope" and sweeper.sampler.seed == 3
    assert set(sweeper.params) == {"optim.lr", "optim.warmup_steps"} and sweeper.direction == "minimize"
    check_grid(grid_spec(cfg))  # Optuna's intervals and ranges pass the name check untouched


# -- bad input ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_unknown_variant_in_a_grid_fails_before_any_cell(tmp_path: Path) -> None:
    proc, sweep_dir = multirun(tmp_path, *QUIET, "attention=soft,sofft", timeout=120)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "sofft" in lines[0] and "did you mean 'soft'" in lines[0], proc.stderr
    assert not list(tmp_path.rglob("result.json")) and not list(tmp_path.rglob("run_state.json"))


def test_a_sweep_folder_that_cannot_be_written_stops_the_sweep_in_one_line(tmp_path: Path, capsys) -> None:
    """Checked when the multirun starts, before any launcher writes into it (the basic launcher's
    own mkdir would end in a traceback)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cfg = hydra_config([*QUIET, f"hydra.sweep.dir={blocker / 'sweep'}"], ["seed=0,1"])
    with pytest.raises(SystemExit) as stop:
        SweepSummary().on_multirun_start(cfg)
    assert stop.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "hydra.sweep.dir" in said[0] and "is a file, not a folder" in said[0], said
    assert blocker.read_text() == ""


@pytest.mark.parametrize(
    "overrides, sweep, params, named",
    [
        ([], ["position=rope,learnd"], None, "position='learnd'"),
        ([], ["task=copy,revers"], None, "task='revers'"),
        ([], ["model=small,tiny"], None, "model='tiny'"),
        ([], ["attention.name=soft,sofft"], None, "attention.name='sofft'"),
        ([], ["model.cross_attention=hard,hrad"], None, "model.cross_attention='hrad'"),
        (["experiment=quick"], [], {"attention": "soft,local,multihed"}, "attention='multihed'"),
        ([], ["attention=choice(soft,softer)"], None, "attention='softer'"),
    ],
)
def test_grid_check_names_the_bad_value(overrides, sweep, params, named) -> None:
    with pytest.raises(SweepConfigError, match=".*".join(map(str, [named, "choose one of"]))) as err:
        check_grid(grid_spec(hydra_config(overrides, sweep, params)))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("sweep, named", [(["seed=0,1,0"], "seed=0,1,0"), (["attention=soft,soft"], "'soft'")])
def test_grid_check_refuses_a_value_listed_twice(sweep, named) -> None:
    with pytest.raises(SweepConfigError, match=f"{named}.*more than once") as err:
        check_grid(grid_spec(hydra_config([], sweep)))
    assert "\n" not in str(err.value)


def test_grid_check_accepts_good_grids_and_reads_every_value() -> None:
    cfg = hydra_config(["experiment=quick", "task=copy"], ["seed=range(0,3)", "optim.lr=interval(1e-4,1e-2)"])
    check_grid(grid_spec(cfg))
    found = dict(grid_values(grid_spec(cfg)))
    assert found["attention"] == ["soft", "hard", "local", "multihead"] and found["seed"] == ["0", "1", "2"]
    assert "optim.lr" not in found, "an interval has no names to check"


def test_slurm_launcher_without_sbatch_says_so_in_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    cfg = hydra_config(["hydra/launcher=slurm"])
    assert cfg.hydra.launcher.tasks_per_node == cfg.trainer.devices and cfg.hydra.launcher.max_num_timeout > 0
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit) as stop:
        SweepSummary().on_multirun_start(cfg)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sbatch" in err and "submitit_slurm" in err


def test_slurm_ddp_needs_one_task_per_device(tmp_path: Path, monkeypatch) -> None:
    sbatch = tmp_path / "sbatch"
    sbatch.write_text("#!/bin/sh\nexit 0\n")
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    check_grid(grid_spec(hydra_config(["hydra/launcher=slurm", "trainer=ddp", "trainer.devices=4"])))
    with pytest.raises(SweepConfigError, match="tasks_per_node=1 with trainer.devices=4"):
        check_grid(
            grid_spec(
                hydra_config(
                    ["hydra/launcher=slurm", "trainer=ddp", "trainer.devices=4", "hydra.launcher.tasks_per_node=1"]
                )
            )
        )


# -- presets and cell folders -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "preset, extra, sweep_dir, cells",
    [
        ("quick", [], "multirun/quick", 4 * 3),
        ("demo", [], "multirun/demo", 3),  # 3 cells, each training its 3 seeds as one ensemble
        ("ablation", ["task=copy"], "multirun/ablation_copy", 4 * 3 * 3),
        ("length_generalization", [], "multirun/length_generalization", 3 * 9 * 3),
    ],
)
def test_presets_expand_to_their_grids_and_every_value_composes(preset, extra, sweep_dir, cells) -> None:
    from experiments.config.checks import check_config

    cfg = hydra_config([f"experiment={preset}", *extra])
    assert cfg.hydra.sweep.dir == sweep_dir
    grid = dict(grid_values(grid_spec(cfg)))
    assert len(list(itertools.product(*grid.values()))) == cells
    # each value of each key once, with the preset's other settings (cells differ only in these)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for key, values in grid.items():
            for value in values:
                cell = hydra_compose(config_name="config", overrides=[f"experiment={preset}", *extra, f"{key}={value}"])
                check_config(cell)
                if key != "experiment":
                    field = f"{key}.name" if key in ("task", "attention", "position") else key
                    assert str(OmegaConf.select(cell, field)) == value
                if preset == "length_generalization":
                    assert max(cell.task.eval_lengths) == 4 * max(cell.task.train_lengths)


def test_cell_folders_are_stable_distinct_and_safe() -> None:
    short = "attention=soft,position=rope"
    assert cell_dirname(short) == short == cell_dirname(short)
    long = ",".join([f"model.d_model={d}" for d in range(30)] + ["attention=soft", "seed=3"])
    other = long.replace("model.d_model=7,", "model.d_model=8,")
    assert cell_dirname(long) == cell_dirname(long) != cell_dirname(other)
    assert len(cell_dirname(long)) <= MAX_CELL_NAME and cell_dirname(long).startswith("attention=soft,seed=3,")
    assert "/" not in cell_dirname("task.path=/data/a.txt,attention=soft")
    assert cell_dirname("task.path=/data/a.txt") != cell_dirname("task.path=/data/b.txt")


def test_threads_are_shared_among_parallel_jobs_and_ddp_ranks() -> None:
    joblib = {"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", "n_jobs": 2}
    slurm = {"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher", "cpus_per_task": 6}
    cpu = {"strategy": "auto", "accelerator": "cpu", "devices": 1}
    ddp = {"strategy": "ddp", "accelerator": "cpu", "devices": 2}
    assert threads_per_process(None, cpu, cores=16) == 16
    assert threads_per_process(joblib, cpu, cores=16) == 8
    assert threads_per_process({**joblib, "n_jobs": -1}, cpu, cores=16) == 1
    assert threads_per_process(joblib, ddp, cores=16) == 4
    assert threads_per_process(joblib, cpu, cores=2) == 1
    assert threads_per_process(slurm, ddp, cores=32) == 6, "a SLURM task owns its cpus_per_task"
    assert threads_per_process(joblib, cpu, requested=3, cores=16) == 3
