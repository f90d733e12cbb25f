"""What a run's loggers hold: TensorBoard's ``hp_metric`` is the run's objective, beside the hyper-parameters,
in the one event file of the run; ``throughput/*`` reaches every logger at the logging steps and at no other.
Read back with tensorboard's EventAccumulator and the CSV logger's metrics.csv."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from experiments.record.throughput import BATCHES_PER_SEC, STEP_MS, TOKENS_PER_SEC, window_metrics
from tests.helpers.config import TINY

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402
from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: E402

LOG_EVERY, STEPS = 2, 6
THROUGHPUT = {STEP_MS, BATCHES_PER_SEC, TOKENS_PER_SEC}


def event_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("events.out.tfevents.*"))


def accumulate(path: Path) -> ea.EventAccumulator:
    acc = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    return acc


def hparams_of(acc: ea.EventAccumulator) -> tuple[set[str], list[str]]:
    """(the hyper-parameter names, the metric names) of the HParams record in an event file."""
    content = acc.PluginTagToContent("hparams")["_hparams_/experiment"]
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content).experiment
    return {h.name for h in experiment.hparam_infos}, [m.name.tag for m in experiment.metric_infos]


def test_window_rates_by_hand() -> None:
    # two steps of 10 and 30 ms that saw 80 tokens: 40 ms in all
    assert window_metrics([10.0, 30.0], 80) == {STEP_MS: 20.0, BATCHES_PER_SEC: 50.0, TOKENS_PER_SEC: 2000.0}
    assert window_metrics([10.0], None) == {STEP_MS: 10.0, BATCHES_PER_SEC: 100.0}
    assert window_metrics([], 5) == {}


def test_the_objective_joins_the_hparams_in_the_file_of_the_curves(tmp_path: Path) -> None:
    from experiments.record.tensorboard_logger import RunTensorBoardLogger, record_objective

    logger = RunTensorBoardLogger(save_dir=str(tmp_path), name="tb", version="")
    logger.log_hyperparams({"optim.lr": 0.01})
    logger.log_metrics({"train/loss": 2.0}, step=1)
    logger.finalize("success")  # the end of fit
    logger.log_metrics({"test/loss": 1.5}, step=1)  # the test, after it
    logger.finalize("success")
    record_objective([logger], {"val/loss": 1.25, "test/loss": 1.5}, "val/loss", step=1)
    [events] = event_files(tmp_path / "tb")
    acc = accumulate(events)
    assert [s.value for s in acc.Scalars("hp_metric")] == [1.25]
    assert {"train/loss", "test/loss"} <= set(acc.Tags()["scalars"])
    assert hparams_of(acc) == ({"optim.lr"}, ["hp_metric"])


def test_a_diverged_objective_writes_no_hp_metric(tmp_path: Path) -> None:
    from experiments.record.tensorboard_logger import RunTensorBoardLogger, record_objective

    logger = RunTensorBoardLogger(save_dir=str(tmp_path), name="tb", version="")
    logger.log_hyperparams({"optim.lr": 0.01})
    logger.log_metrics({"train/loss": float("nan")}, step=1)
    record_objective([logger], {"val/loss": float("nan")}, "val/loss", step=1)
    logger.finalize("success")
    assert "hp_metric" not in accumulate(event_files(tmp_path / "tb")[0]).Tags()["scalars"]


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory) -> tuple[dict, Path]:
    from experiments import run

    folder = tmp_path_factory.mktemp("run")
    overrides = [o for o in TINY if o != "logger=csv"]
    overrides += ["logger=[csv,tensorboard]", f"trainer.log_every_n_steps={LOG_EVERY}", f"trainer.max_steps={STEPS}"]
    return run(overrides, run_dir=folder), folder


@pytest.mark.slow
def test_hp_metric_is_the_objective_in_the_one_event_file(logged_run) -> None:
    result, folder = logged_run
    assert result["status"] == "completed"
    [events] = event_files(folder / "tensorboard")  # Lightning closed its writer after fit: the test made a second
    acc = accumulate(events)
    objective = result["config"]["objective"]
    assert [s.value for s in acc.Scalars("hp_metric")] == [pytest.approx(result["metrics"][objective])]
    names, metrics = hparams_of(acc)
    assert metrics == ["hp_metric"] and {"attention.name", "optim.lr", "seed"} <= names
    assert {"train/loss", "val/loss", "test/loss", *THROUGHPUT} <= set(acc.Tags()["scalars"])


@pytest.mark.slow
def test_throughput_is_in_metrics_csv_at_the_logging_steps_only(logged_run) -> None:
    _, folder = logged_run
    with (folder / "csv" / "metrics.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    # Lightning writes its loggers after the steps whose count is a multiple of log_every_n_steps
    logging_steps = [s for s in range(STEPS) if (s + 1) % LOG_EVERY == 0]
    with_throughput = [int(r["step"]) for r in rows if any(r.get(k) for k in THROUGHPUT)]
    assert with_throughput == logging_steps
    for row in rows:
        if any(row.get(k) for k in THROUGHPUT):
            assert all(row[k] for k in THROUGHPUT) and row["train/loss"], "the step's own row, all three"
            assert float(row[STEP_MS]) * float(row[BATCHES_PER_SEC]) == pytest.approx(1000.0)
            assert float(row[TOKENS_PER_SEC]) > 0
        else:
            assert not row.get("train/loss"), "a training row without throughput"


@pytest.mark.slow
def test_throughput_reaches_tensorboard_at_the_same_steps(logged_run) -> None:
    _, folder = logged_run
    acc = accumulate(event_files(folder / "tensorboard")[0])
    logging_steps = [s for s in range(STEPS) if (s + 1) % LOG_EVERY == 0]
    for name in THROUGHPUT:
        assert [s.step for s in acc.Scalars(name)] == logging_steps


class LoggingTrainer:
    """A Trainer as the step timer sees it: loggers, and Lightning's "write the loggers after this batch"."""

    loggers = ["csv"]
    log_every_n_steps = LOG_EVERY

    def __init__(self) -> None:
        self.step = 0
        self._logger_connector = self

    @property
    def should_update_logs(self) -> bool:
        return (self.step + 1) % LOG_EVERY == 0


class LoggedModule:
    device = torch.device("cpu")

    def __init__(self) -> None:
        self.tokens_seen = torch.tensor(0)
        self.logged: list[tuple[int, dict]] = []
        self.trainer: LoggingTrainer | None = None

    def log_dict(self, metrics: dict, on_step: bool, on_epoch: bool) -> None:
        assert on_step and not on_epoch
        self.logged.append((self.trainer.step, metrics))


def test_each_logging_step_logs_the_steps_since_the_last_one(monkeypatch) -> None:
    from experiments.training import callbacks

    clock = [0.0]
    monkeypatch.setattr(callbacks.time, "perf_counter", lambda: clock[0])
    timer, trainer, module = callbacks.StepTimer(), LoggingTrainer(), LoggedModule()
    module.trainer = trainer
    seconds = [0.5, 0.1, 0.2, 0.4, 0.3, 0.3]  # the first step compiles
    tokens = [10, 20, 30, 40, 50, 60]
    for step, (s, n) in enumerate(zip(seconds, tokens)):
        trainer.step = step
        timer.on_train_batch_start(trainer, module, None, step)
        clock[0] += s
        module.tokens_seen = module.tokens_seen + n
        timer.on_train_batch_end(trainer, module, None, None, step)
        clock[0] += 1.0  # loading and logging: not a step's time
    # by hand: steps (0, 1), (2, 3), (4, 5)
    want = [
        (1, {STEP_MS: 300.0, BATCHES_PER_SEC: 2 / 0.6, TOKENS_PER_SEC: 30 / 0.6}),
        (3, {STEP_MS: 300.0, BATCHES_PER_SEC: 2 / 0.6, TOKENS_PER_SEC: 70 / 0.6}),
        (5, {STEP_MS: 300.0, BATCHES_PER_SEC: 2 / 0.6, TOKENS_PER_SEC: 110 / 0.6}),
    ]
    assert [step for step, _ in module.logged] == [step for step, _ in want]
    for (_, got), (_, expected) in zip(module.logged, want):
        assert got == pytest.approx(expected)
