"""Reliability: bad input caught up front, nothing lost on a crash, divergence recorded, reproducible runs."""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from experiments.app.preflight import PreflightError, preflight
from experiments.config.spec import build_spec
from experiments.training.single_run import train
from tests.helpers.cli import start_train
from tests.helpers.config import TINY, compose
from tests.helpers.env import environment
from tests.helpers.paths import ROOT
from tests.helpers.warm import run_module


def write_file(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# (id, overrides, substrings the one-line message must contain); files are made under tmp_path.
BAD_INPUTS = [
    ("unknown attention", ["attention=sofft"], ["attention=sofft", "multihead", "soft"]),
    ("unknown position", ["position=rotary"], ["position=rotary", "rope"]),
    ("unknown task", ["task=revers"], ["task=revers", "reverse"]),
    ("unknown model preset", ["model=huge"], ["model=huge", "small"]),
    ("unknown trainer preset", ["trainer=tpu"], ["trainer=tpu", "cpu"]),
    ("unknown logger", ["logger=mlflow"], ["logger=mlflow", "none"]),
    ("unknown experiment", ["experiment=abaltion"], ["experiment=abaltion", "did you mean 'ablation'"]),
    ("unknown hparams search", ["hparams_search=random"], ["hparams_search=random", "optuna"]),
    (
        "unknown variant parameter option",
        ["variant_param=local_window_3"],
        ["variant_param=local_window_3", "local_window_4"],
    ),
    ("unknown variant in a grid", ["-m", "attention=soft,sofft"], ["attention=sofft"]),
    ("negative learning rate", ["optim.lr=-0.001"], ["optim.lr=-0.001", "> 0"]),
    ("learning rate not a number", ["optim.lr=fast"], ["optim.lr=fast", "Float"]),
    ("zero steps", ["trainer.max_steps=0"], ["trainer.max_steps=0", "positive"]),
    ("dropout >= 1", ["model.dropout=1.0"], ["model.dropout=1.0", "[0, 1)"]),
    ("attention dropout >= 1", ["model.attention_dropout=1.5"], ["model.attention_dropout=1.5", "[0, 1)"]),
    ("negative warm-up", ["optim.warmup_steps=-5"], ["optim.warmup_steps=-5", ">= 0"]),
    ("negative gradient clip", ["optim.grad_clip=-1"], ["optim.grad_clip=-1", ">= 0"]),
    ("negative weight decay", ["optim.weight_decay=-0.1"], ["optim.weight_decay=-0.1", ">= 0"]),
    ("label smoothing 1", ["optim.label_smoothing=1.0"], ["optim.label_smoothing=1.0", "[0, 1)"]),
    ("model width 0", ["model.d_model=0"], ["model.d_model=0", "positive integer"]),
    ("no decoder layers", ["model.decoder_layers=0"], ["model.decoder_layers=0", "positive integer"]),
    ("validation interval 0", ["trainer.val_check_interval=0"], ["trainer.val_check_interval=0", "> 0"]),
    ("negative seed", ["seed=-1"], ["seed=-1", ">= 0"]),
    ("ensemble of no seeds", ["ensemble.seeds=0"], ["ensemble.seeds=0", ">= 1"]),
    (
        "ensemble member seeds not matching their number",
        ["ensemble.seeds=2", "ensemble.member_seeds=[0,1,2]"],
        ["ensemble.member_seeds=[0, 1, 2]", "ensemble.seeds=2"],
    ),
    ("ensemble member named twice", ["ensemble.seeds=2", "ensemble.member_dirs=[a,a]"], ["member_dirs", "twice"]),
    (
        "another composition error beside a Trainer keyword",
        ["trainer.max_steps=5", "model.d_modell=3"],
        ["model.d_modell"],
    ),
    (
        "unknown Trainer keyword",
        ["trainer.gradient_clip_vall=0.5"],
        ["trainer.gradient_clip_vall", "did you mean 'trainer.gradient_clip_val'"],
    ),
    ("unknown Trainer keyword added with +", ["+trainer.max_stepz=3"], ["trainer.max_stepz", "'trainer.max_steps'"]),
    ("Trainer keyword the config does not list", ["trainer.profiler=simple"], ["+trainer.profiler=simple"]),
    ("Trainer keyword of the wrong type", ["trainer.max_steps=abc"], ["trainer.max_steps='abc'", "int"]),
    ("Trainer keyword the run sets", ["trainer.logger=false"], ["trainer.logger", "logger=csv"]),
    ("unknown callbacks option", ["callbacks=early_stoping"], ["callbacks=early_stoping", "'early_stopping'"]),
    ("unknown own callback", ["own_callbacks=[progres]"], ["own_callbacks", "'progress'"]),
    (
        "best weights without a monitored checkpoint",
        ["eval.checkpoint=best"],
        ["eval.checkpoint=best", "callbacks=best_checkpoint"],
    ),
    ("unknown tested weights", ["eval.checkpoint=first"], ["eval.checkpoint=first", "'best'"]),
    ("a key that moved", ["logger.log_attention_maps=false"], ["wandb_uploads.attention_maps"]),
    (
        "attention statistics over 0 examples",
        ["eval.attention_stats_examples=0"],
        ["eval.attention_stats_examples=0", "positive integer"],
    ),
    ("unknown pooling", ["model.pooling=max"], ["model.pooling=max", "cls"]),
    ("unknown embedding", ["model.embedding=bert"], ["model.embedding=bert", "gpt2"]),
    ("window 0", ["attention=local", "attention.window=0"], ["window=0", "positive"]),
    ("heads not dividing width", ["attention.num_heads=3"], ["num_heads=3", "d_model=64", "allowed"]),
    ("negative max_distance", ["position=relative", "position.max_distance=-1"], ["max_distance=-1", ">= 0"]),
    (
        "gumbel temperature 0",
        ["attention=hard", "attention.estimator=gumbel", "attention.temperature=0"],
        ["temperature=0", "positive"],
    ),
    ("unknown score", ["attention=soft", "attention.score=cosine"], ["score='cosine'", "scaled_dot"]),
    ("unknown estimator", ["attention=hard", "attention.estimator=ppo"], ["estimator='ppo'", "reinforce"]),
    ("unknown local mode", ["attention=local", "attention.mode=fixed"], ["mode='fixed'", "monotonic"]),
    ("unknown attention parameter", ["+attention.windw=4"], ["windw", "accepted"]),
    ("unknown norm", ["model.norm=middle"], ["model.norm=middle", "post"]),
    ("unknown schedule", ["optim.schedule=linear"], ["optim.schedule=linear", "cosine"]),
    (
        "W&B mode typo",
        ["logger.wandb.mode=onlinee"],
        ["logger.wandb.mode=onlinee", "'offline', 'disabled'", "did you mean 'online'"],
    ),
    ("xformers on CPU", ["backend=xformers"], ["backend='xformers'", "CUDA"]),
    ("no GPU share", ["jobs_per_gpu=0"], ["jobs_per_gpu=0", ">= 1"]),
    ("hard attention with SDPA", ["attention=hard", "backend=sdpa"], ["backend='sdpa'", "hard"]),
    ("DDP with one device", ["trainer=ddp", "trainer.devices=1"], ["trainer.devices=1", "DDP"]),
    ("missing text path", ["task=charlm", "model.arch=decoder"], ["task.path", "required"]),
    ("encoder on a seq2seq task", ["model.arch=encoder"], ["model.arch=encoder", "allowed"]),
    ("learned positions too short", ["position=learned", "position.max_len=16"], ["position.max_len=16", ">= 25"]),
    ("inverted length range", ["task.train_lengths=[9,4]"], ["train_lengths", "9"]),
    ("too few symbols", ["task.num_symbols=1"], ["num_symbols", "1"]),
    ("listops depth 0", ["task=listops", "model.arch=encoder", "task.max_depth=0"], ["max_depth", "0"]),
    ("missing text file", ["task=charlm", "model.arch=decoder", "task.path={tmp}/nope.txt"], ["nope.txt"]),
    ("empty text file", ["task=charlm", "model.arch=decoder", "task.path={empty}"], ["empty.txt", "empty"]),
    ("binary text file", ["task=charlm", "model.arch=decoder", "task.path={binary}"], ["binary.bin"]),
    (
        "mismatched parallel files",
        [
            "task=translation",
            "task.train_src={src}",
            "task.train_tgt={tgt}",
            "task.val_src={src}",
            "task.val_tgt={src}",
        ],
        ["train.de", "train.en", "3", "2"],
    ),
    (
        "cosine decaying below 0",
        ["optim.schedule=cosine", "optim.min_lr_ratio=-1"],
        ["optim.min_lr_ratio=-1", "[0, 1]"],
    ),
    ("cosine rising above its peak", ["optim.min_lr_ratio=5"], ["optim.min_lr_ratio=5", "[0, 1]"]),
    ("infinite learning rate", ["optim.lr=inf"], ["optim.lr=inf", "finite"]),
    ("infinite weight decay", ["optim.weight_decay=inf"], ["optim.weight_decay=inf", "finite"]),
    ("infinite gradient clip", ["optim.grad_clip=inf"], ["optim.grad_clip=inf", "finite"]),
    ("NaN label smoothing", ["optim.label_smoothing=nan"], ["optim.label_smoothing=nan", "finite"]),
    (
        "compile mode without compiling",
        ["model.compile_mode=reduce-overhead"],
        ["model.compile_mode=reduce-overhead", "model.compile=true"],
    ),
    ("a second clipping key", ["trainer.gradient_clip_val=-1"], ["trainer.gradient_clip_val=-1", "optim.grad_clip"]),
    ("float16 autocast on the CPU", ["trainer.precision=16-mixed"], ["trainer.precision=16-mixed", "bf16-mixed"]),
    ("accumulating 0 batches", ["trainer.accumulate_grad_batches=0"], ["trainer.accumulate_grad_batches=0", ">= 1"]),
    ("logging every 0 steps", ["trainer.log_every_n_steps=0"], ["trainer.log_every_n_steps=0", ">= 1"]),
    ("0 nodes", ["trainer.num_nodes=0"], ["trainer.num_nodes=0", ">= 1"]),
    (
        "checkpoint every 0 steps",
        ["checkpoint_every_n_steps=0"],
        ["checkpoint_every_n_steps=0", ">= 1"],
    ),
    ("validation every 0 epochs", ["trainer.check_val_every_n_epoch=0"], ["trainer.check_val_every_n_epoch=0"]),
    (
        "negative reload interval",
        ["+trainer.reload_dataloaders_every_n_epochs=-1"],
        ["trainer.reload_dataloaders_every_n_epochs=-1", ">= 0"],
    ),
    ("sanity steps below -1", ["trainer.num_sanity_val_steps=-2"], ["trainer.num_sanity_val_steps=-2", ">= -1"]),
    ("epochs below -1", ["+trainer.max_epochs=-2"], ["trainer.max_epochs=-2", ">= -1"]),
    ("negative batch limit", ["trainer.limit_val_batches=-1"], ["trainer.limit_val_batches=-1", ">= 0"]),
    ("batch fraction above 1", ["trainer.limit_test_batches=1.5"], ["trainer.limit_test_batches=1.5", "[0, 1]"]),
    ("train batch limit", ["+trainer.limit_train_batches=-1"], ["trainer.limit_train_batches=-1"]),
    ("predict batch limit", ["+trainer.limit_predict_batches=-1"], ["trainer.limit_predict_batches=-1"]),
    ("0 devices", ["trainer.devices=0"], ["trainer.devices=0", ">= 1"]),
    ("more CPU devices than cores", ["trainer.devices=4096"], ["trainer.devices=4096", "cores"]),
    ("several CPU devices without DDP", ["trainer.devices=2", "num_threads=1"], ["trainer.devices=2", "ddp"]),
    (
        "best weights with no validation",
        ["eval.checkpoint=best", "callbacks=best_checkpoint", "trainer.limit_val_batches=0"],
        ["eval.checkpoint=best", "limit_val_batches=0"],
    ),
    (
        "early stopping on a metric the task never logs",
        ["callbacks=early_stopping", "callbacks.early_stopping.monitor=val/bleu"],
        ["callbacks.early_stopping.monitor=val/bleu", "val/token_acc"],
    ),
    ("negative threads", ["num_threads=-1"], ["num_threads=-1", "cores"]),
    ("more threads than cores", ["num_threads=4096"], ["num_threads=4096", "cores"]),
    (
        "a batch larger than the data",
        ["task.train_size=40", "task.batch_size=50"],
        ["task.batch_size=50", "40 training examples"],
    ),
    ("a name leaving outputs/", ["name=../../x"], ["name=../../x", ".."]),
    ("a run folder on a file", ["hydra.run.dir={empty}"], ["hydra.run.dir=", "is a file"]),
    ("a run folder under a file", ["hydra.run.dir={empty}/run"], ["hydra.run.dir=", "empty.txt is a file"]),
    ("0 parallel jobs", ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=0"], ["hydra.launcher.n_jobs=0"]),
    (
        "swept seeds inside an ensemble",
        ["-m", "seed=0,1", "ensemble.seeds=3"],
        ["seed=0,1", "seed 1 would train twice"],
    ),
    (
        "cache name escaping its folder",
        [
            "task=translation",
            "task.train_src={src}",
            "task.train_tgt={src}",
            "task.val_src={src}",
            "task.val_tgt={src}",
            "task.cache_name=../../escape",
        ],
        ["cache_name", ".."],
    ),
]


@pytest.fixture
def bad_files(tmp_path: Path) -> dict[str, str]:
    return {
        "tmp": str(tmp_path),
        "empty": str(write_file(tmp_path / "empty.txt", b"")),
        "binary": str(write_file(tmp_path / "binary.bin", bytes(range(256)) * 8)),
        "src": str(write_file(tmp_path / "train.de", b"ein hund\nzwei katzen\ndrei\n")),
        "tgt": str(write_file(tmp_path / "train.en", b"a dog\ntwo cats\n")),
    }


@pytest.mark.parametrize("overrides, expected", [(o, e) for _, o, e in BAD_INPUTS], ids=[i for i, _, _ in BAD_INPUTS])
def test_bad_input_fails_before_training_in_one_line(overrides, expected, bad_files, tmp_path: Path) -> None:
    overrides = [o.format(**bad_files) for o in overrides]
    start = time.perf_counter()
    try:
        preflight(overrides)
    except (PreflightError, ValueError) as err:
        message = str(err)
    else:  # errors that need the task's data: the run records them before any step
        args = [o for o in overrides if o != "-m"]
        small = [o for o in TINY if not o.startswith("task.")]  # file tasks have no size keys
        result = train(build_spec(compose([*small, *args])), tmp_path / "run", args)
        assert result["status"] == "failed" and result.get("user_error"), result
        assert result["cost"].get("steps", 0) == 0
        message = result["error"]
    elapsed = time.perf_counter() - start
    assert "\n" not in message, message
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"
    assert elapsed < 20, f"took {elapsed:.1f}s to report"


def test_bad_input_table_covers_every_check(monkeypatch) -> None:
    """Every config key check_config validates, and every config group, has a bad input above.

    The keys are those of the messages check_config builds on a default config (every ``require`` call of the
    checks and of the schema's validators they call, the failing ones and the passing ones), so a new check
    without a row here fails.
    """
    from experiments.app.preflight import GROUPS
    from experiments.config import checks, errors, schema

    messages: list[str] = []

    def spy(ok: bool, message: str) -> None:
        messages.append(message)
        errors.require(ok, message)

    monkeypatch.setattr(checks, "_require", spy)
    monkeypatch.setattr(schema, "require", spy)
    checks.check_config(compose(TINY))
    checked = {m.split("=", 1)[0] for m in messages if "=" in m.split(" ", 1)[0]}
    assert {"optim.lr", "model.dropout", "seed"} <= checked, checked  # the spy saw the checks
    named = {part.split("=", 1)[0] for _, _, parts in BAD_INPUTS for part in parts if "=" in part}
    assert sorted(checked - named) == [], "config checks without a bad input in BAD_INPUTS"
    assert sorted(set(GROUPS) - named) == [], "config groups without an unknown-choice row in BAD_INPUTS"


# -- nothing lost ------------------------------------------------------------------------------------
RESUME = [
    *TINY,
    "model.d_model=32",
    "model.dropout=0.1",
    "trainer.max_steps=60",
    "trainer.val_check_interval=60",
    "checkpoint_every_n_steps=10",
    "trainer.deterministic=true",
    "task.train_size=256",
    "task.batch_size=16",
    "seed=3",
]


def cli(overrides: list[str], run_dir: Path) -> subprocess.Popen:
    return start_train(*overrides, f"hydra.run.dir={run_dir}", env=environment(OMP_NUM_THREADS="1"))


@pytest.mark.slow
def test_sigkill_then_rerun_resumes_and_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    logged = [*RESUME, "trainer.log_every_n_steps=5"]  # rows before the checkpoints, to be kept
    straight = cli(logged, tmp_path / "straight")
    assert straight.wait(timeout=300) == 0, straight.stderr.read()

    killed_dir = tmp_path / "killed"
    victim = cli([*logged, "trainer.max_steps=60"], killed_dir)
    ckpt = killed_dir / "checkpoints" / "last.ckpt"
    deadline = time.time() + 300
    while not ckpt.exists() and time.time() < deadline and victim.poll() is None:
        time.sleep(0.05)
    assert ckpt.exists(), "no checkpoint appeared before the run ended"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    assert (
        not (killed_dir / "result.json").exists()
        or json.loads((killed_dir / "result.json").read_text())["status"] != "completed"
    )
    step_at_kill = torch.load(ckpt, weights_only=True)["global_step"]
    assert 0 < step_at_kill < 60
    killed_id = json.loads((killed_dir / "run_state.json").read_text())["run_id"]

    resumed = cli(logged, killed_dir)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()
    a = json.loads((tmp_path / "straight" / "result.json").read_text())
    b = json.loads((killed_dir / "result.json").read_text())
    assert b["status"] == "completed" and b["cost"]["steps"] == 60
    assert a["metrics"] == b["metrics"]
    assert a["by_length"] == b["by_length"]
    # The resumed run is the killed one (same id, so W&B resumes it); the other folder is another run.
    assert b["run_id"] == killed_id and a["run_id"] != b["run_id"]
    log = (killed_dir / "train.log").read_text()
    assert "resuming from" in log
    # The learning curve is the uninterrupted run's: the rows before the kill kept, each step once.
    assert csv_rows(killed_dir) == csv_rows(tmp_path / "straight")


def csv_rows(run_dir: Path) -> list[tuple[int, tuple[str, ...]]]:
    """(step, the metrics logged in that row) of each row of metrics.csv, in order."""
    with (run_dir / "csv" / "metrics.csv").open(newline="") as f:
        return [
            (int(row["step"]), tuple(k for k, v in row.items() if v and k not in ("step", "epoch")))
            for row in csv.DictReader(f)
        ]


@pytest.mark.slow
def test_ctrl_c_says_in_one_line_where_it_stopped_and_the_printed_command_resumes(tmp_path: Path) -> None:
    # 600 tiny steps: long enough that the run cannot finish between its first checkpoint (step 10) and the
    # signal when the test process waits for a core (200 once did, under `make test`'s two workers)
    run_dir, every, steps = tmp_path / "run", 5, 600
    overrides = [
        *TINY,
        f"trainer.max_steps={steps}",
        "trainer.val_check_interval=100",
        "checkpoint_every_n_steps=10",
        f"trainer.log_every_n_steps={every}",
    ]
    victim = cli(overrides, run_dir)
    ckpt, deadline = run_dir / "checkpoints" / "last.ckpt", time.time() + 300
    while not ckpt.exists() and time.time() < deadline and victim.poll() is None:
        time.sleep(0.05)
    assert ckpt.exists(), "no checkpoint appeared before the run ended"
    victim.send_signal(signal.SIGINT)
    assert victim.wait(timeout=60) == 130
    lines = victim.stderr.read().strip().splitlines()
    assert len(lines) == 1, lines
    kept = torch.load(ckpt, weights_only=True)["global_step"]
    assert re.match(
        rf"attnlab: interrupted by Ctrl-C \(SIGINT\) at step \d+/{steps}; its checkpoint of step {kept} "
        rf"is kept \({re.escape(str(ckpt))}\); resume: python -m experiments.train ",
        lines[0],
    ), lines[0]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and result["error"].startswith("interrupted by Ctrl-C"), result["error"]
    assert "SIGTERM" not in result["error"]

    command = shlex.split(lines[0].split("; resume: ", 1)[1])
    assert command[:3] == ["python", "-m", "experiments.train"] and f"hydra.run.dir={run_dir}" in command
    # the printed command as a user runs it, from a Python with the stack imported (tests.helpers.warm)
    resumed = run_module(command[2], *command[3:], cwd=ROOT, env=environment(OMP_NUM_THREADS="1"))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "result.json").read_text())["cost"]["steps"] == steps
    assert f"resuming from {ckpt}" in (run_dir / "train.log").read_text()
    train_steps = [step for step, metrics in csv_rows(run_dir) if "train/loss" in metrics]
    assert train_steps == list(range(every - 1, steps, every)), train_steps  # every logged step, once


def test_same_seed_twice_gives_identical_metrics(tmp_path: Path) -> None:
    overrides = [*TINY, "trainer.max_steps=8", "trainer.deterministic=true", "model.dropout=0.2", "seed=5"]
    a = train(build_spec(compose(overrides)), tmp_path / "a", overrides)
    b = train(build_spec(compose(overrides)), tmp_path / "b", overrides)
    assert a["status"] == b["status"] == "completed"
    assert a["metrics"] == b["metrics"] and a["by_length"] == b["by_length"]
    other = train(build_spec(compose([*overrides, "seed=6"])), tmp_path / "c", overrides)
    assert other["metrics"] != a["metrics"], "the seed must change data, initialisation and dropout"
    assert a["overrides"] == overrides and a["config"]["seed"] == 5 and a["env"]["packages"]["torch"]


def test_nan_loss_is_recorded_as_diverged_at_its_step(tmp_path: Path, monkeypatch) -> None:
    from experiments.training.module import TransformerModule

    original = TransformerModule._loss  # the training step's loss

    def poisoned(self, logits, targets, smoothing=0.0):
        loss = original(self, logits, targets, smoothing)
        return loss * float("inf") if self.training and self.global_step == 3 else loss

    monkeypatch.setattr(TransformerModule, "_loss", poisoned)
    overrides = [*TINY, "trainer.max_steps=10"]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "diverged" and result["diverged_at_step"] == 3
    assert "step 3" in result["error"]
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "diverged"


def _poison_step(monkeypatch, bad_step: int, stop_step: int | None = None) -> None:
    """The training loss becomes inf at ``bad_step``; at ``stop_step`` the step asks the fit to stop, as a
    callback's stop (Lightning's Timer for max_time) does."""
    from experiments.training.module import TransformerModule

    original = TransformerModule._loss

    def poisoned(self, logits, targets, smoothing=0.0):
        loss = original(self, logits, targets, smoothing)
        if self.training and self.global_step == stop_step:
            self.trainer.should_stop = True
        return loss * float("inf") if self.training and self.global_step == bad_step else loss

    monkeypatch.setattr(TransformerModule, "_loss", poisoned)


def test_a_divergence_before_a_stop_between_two_reads_is_recorded(tmp_path: Path, monkeypatch) -> None:
    """The losses are read every 10 steps here; the fit diverges at step 3 and is stopped at step 5: the
    run is diverged at step 3, not completed with non-finite weights."""
    _poison_step(monkeypatch, bad_step=3, stop_step=5)
    # no validation during the fit: Lightning validates at a stop, which reads the losses too
    overrides = [*TINY, "trainer.max_steps=20", "trainer.log_every_n_steps=10", "trainer.limit_val_batches=0"]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "diverged" and result["diverged_at_step"] == 3, (result["status"], result["error"])


def test_no_validation_judges_weights_of_a_divergence_not_read_yet(tmp_path: Path, monkeypatch) -> None:
    """Validation every 5 steps, losses read every 10: the divergence at step 3 is read before the validation
    at step 5, which early stopping, a pruner or the best checkpoint would otherwise judge by a NaN."""
    _poison_step(monkeypatch, bad_step=3)
    overrides = [*TINY, "trainer.max_steps=20", "trainer.log_every_n_steps=10", "trainer.val_check_interval=5"]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "diverged" and result["diverged_at_step"] == 3, (result["status"], result["error"])
    logged = list((tmp_path / "csv").glob("**/metrics.csv"))
    rows = [row for path in logged for row in csv.DictReader(path.open())]
    assert not [row for row in rows if row.get("val/loss")], rows


def test_wandb_failing_to_start_leaves_a_completed_result(tmp_path: Path, monkeypatch, caplog) -> None:
    import wandb

    def broken(*args, **kwargs):
        raise wandb.errors.CommError("quota exceeded")

    monkeypatch.setattr(wandb, "init", broken)
    overrides = [*TINY, "logger=default", "trainer.max_steps=3"]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    assert sum("W&B could not start" in r.getMessage() for r in caplog.records) == 1


def test_wandb_failing_mid_run_warns_once_and_the_run_completes(tmp_path: Path, monkeypatch, caplog) -> None:
    from lightning.pytorch.loggers import WandbLogger

    from experiments.record.loggers import SafeWandbLogger

    def broken(self, metrics, step=None):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(WandbLogger, "log_metrics", broken)
    overrides = [*TINY, "logger=default", "trainer.max_steps=4", "trainer.log_every_n_steps=1"]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    assert sum("W&B failed while logging metrics" in r.getMessage() for r in caplog.records) == 1
    assert SafeWandbLogger.broken is False, "the class default stays; only the failing instance is switched off"


def test_a_resumed_run_logs_each_step_to_wandb_once(tmp_path: Path, monkeypatch) -> None:
    """The resumed attempt continues the same W&B run, whose history already has the steps up to the
    failure: those after the checkpoint are not logged a second time."""
    from lightning.pytorch.loggers import WandbLogger

    logged: list[tuple[int, tuple[str, ...]]] = []
    monkeypatch.setattr(
        WandbLogger, "log_metrics", lambda self, metrics, step=None: logged.append((step, tuple(sorted(metrics))))
    )
    overrides = [
        *TINY,
        "logger=default",
        "trainer.max_steps=12",
        "trainer.log_every_n_steps=1",
        "checkpoint_every_n_steps=5",
        "trainer.val_check_interval=12",
    ]
    failed = train(build_spec(compose([*overrides, "fail_at_step=8"])), tmp_path, overrides)
    assert failed["status"] == "failed" and max(step for step, _ in logged) == 7
    resumed = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert resumed["status"] == "completed" and resumed["run_id"] == failed["run_id"]
    train_steps = [step for step, keys in logged if "train/loss" in keys]
    assert train_steps == list(range(12)), train_steps


def test_full_disk_while_checkpointing_fails_clearly_and_keeps_the_previous_checkpoint(
    tmp_path: Path, monkeypatch
) -> None:
    import experiments.training.checkpointing as ckpt_io

    real_save, calls = torch.save, {"n": 0}

    def save(obj, f, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] >= 2:
            f.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(ckpt_io.torch, "save", save)
    overrides = [*TINY, "trainer.max_steps=6", "checkpoint_every_n_steps=2"]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    monkeypatch.setattr(ckpt_io.torch, "save", real_save)
    assert result["status"] == "failed"
    assert result["error"] == f"{tmp_path / 'checkpoints' / 'last.ckpt'}: no space left on the device"
    last = tmp_path / "checkpoints" / "last.ckpt"
    state = torch.load(last, weights_only=True)
    assert state["global_step"] == 2
    assert not list((tmp_path / "checkpoints").glob(".*.tmp")), "no half-written file left behind"


def test_result_write_interrupted_keeps_the_old_file(tmp_path: Path, monkeypatch) -> None:
    import experiments.record.result as result_mod

    path = tmp_path / "result.json"
    result_mod.write_json_atomic(path, {"status": "completed", "metrics": {"a": 1.0}})

    def exploding_dump(obj, f, **kwargs):
        f.write('{"status": "comp')
        raise KeyboardInterrupt

    monkeypatch.setattr(result_mod.json, "dump", exploding_dump)
    with pytest.raises(KeyboardInterrupt):
        result_mod.write_json_atomic(path, {"status": "failed"})
    assert json.loads(path.read_text())["status"] == "completed"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_checkpoints_load_without_unpickling_code(tmp_path: Path) -> None:
    from experiments.training.checkpointing import AtomicCheckpointIO

    class Payload:
        def __reduce__(self):
            return (os.system, ("echo pwned > /dev/null",))

    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "hook": Payload()}, evil)
    with pytest.raises(Exception, match="(?i)weights_only|unsupported|global"):
        AtomicCheckpointIO().load_checkpoint(evil)
    good = tmp_path / "good.ckpt"
    AtomicCheckpointIO().save_checkpoint({"state_dict": {"w": torch.ones(2)}, "global_step": 4}, good)
    assert AtomicCheckpointIO().load_checkpoint(good)["global_step"] == 4
