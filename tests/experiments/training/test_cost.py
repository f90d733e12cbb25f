"""Honest cost figures: the whole fit, the compiling inside it, and the steady rate of the timed steps;
and the compile options that make a small model's steps fast (``model.compile_mode``, fixed shapes)."""

from __future__ import annotations

import time

import pytest
import torch

from experiments.config.spec import build_spec
from experiments.training import callbacks
from experiments.training.callbacks import StepTimer
from tests.helpers.config import TINY, compose


class Module:
    device = torch.device("cpu")

    def __init__(self) -> None:
        self.tokens_seen = 0


def test_steady_tokens_per_second_leaves_out_a_slow_first_step(monkeypatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(callbacks.time, "perf_counter", lambda: clock[0])
    timer, module = StepTimer(), Module()
    step_seconds = [2.0] + [0.010, 0.012, 0.011] * 10  # the first step compiles
    tokens = [96, 100, 104] * 10 + [100]
    for i, (seconds, n) in enumerate(zip(step_seconds, tokens)):
        timer.on_train_batch_start(None, module, None, i)
        clock[0] += seconds
        module.tokens_seen = module.tokens_seen + torch.tensor(n)
        timer.on_train_batch_end(None, module, None, None, i)
        clock[0] += 0.5  # loading, logging, validation: never timed
    summary = timer.summary()
    kept = slice(StepTimer.WARMUP_STEPS, None)
    want = sum(tokens[kept]) / sum(step_seconds[kept])
    assert summary["steady_tokens_per_second"] == pytest.approx(want)


def test_cost_keeps_the_whole_fit_and_adds_the_steady_rate(tmp_path, monkeypatch) -> None:
    from experiments.training.module import TransformerModule
    from experiments.training.single_run import train

    slow, original = 1.5, TransformerModule.training_step
    tokens: list[int] = []  # each step's real tokens, counted from the batch: source and target, no padding

    def first_step_slow(self, batch, batch_idx):
        tokens.append(int(batch["src"].ne(self.spec.pad_id).sum() + batch["tgt"].ne(self.spec.pad_id).sum()))
        if self.global_step == 0:
            time.sleep(slow)
        return original(self, batch, batch_idx)

    timers: list[StepTimer] = []

    class KeptTimer(StepTimer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            timers.append(self)

    monkeypatch.setattr(TransformerModule, "training_step", first_step_slow)
    monkeypatch.setattr(callbacks, "StepTimer", KeptTimer)  # lightning_parts builds it from there
    overrides = [*TINY, "trainer.max_steps=30", "trainer.val_check_interval=30"]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    cost, times = result["cost"], timers[0].times_ms
    assert cost["train_seconds"] >= slow and times[0] >= slow * 1000  # the whole fit keeps the slow step
    assert cost["fit_tokens_per_second"] == pytest.approx(sum(tokens) / cost["train_seconds"])
    first = len(times) - cost["step_ms_steps"]
    assert first >= 1  # the slow step is a warm-up step, left out of the steady rate
    assert cost["tokens_per_second"] == pytest.approx(sum(tokens[first:]) / (sum(times[first:]) / 1000))
    assert cost["compile_seconds"] == 0.0 and cost["compile_mode"] is None


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune"])
def test_compile_mode_reaches_torch_compile_and_the_result(tmp_path, monkeypatch, mode) -> None:
    from experiments.training.single_run import train

    asked = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kwargs: asked.append(kwargs))
    overrides = [*TINY, "model.compile=true", f"model.compile_mode={mode}"]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    assert asked == [{"mode": None if mode == "default" else mode}]
    assert result["config"]["model.compile_mode"] == mode and result["cost"]["compile_mode"] == mode


def test_an_unknown_compile_mode_is_refused_in_one_line() -> None:
    from experiments.config.checks import ConfigError, check_config

    with pytest.raises(ConfigError) as err:
        check_config(compose([*TINY, "model.compile=true", "model.compile_mode=reduce_overhead"]))
    message = str(err.value)
    assert "\n" not in message and "model.compile_mode=reduce_overhead" in message and "'reduce-overhead'" in message


@pytest.mark.parametrize("arch", ["seq2seq", "decoder"])
def test_fixed_shape_batches_take_few_lengths_and_leave_the_loss_unchanged(tmp_path, arch) -> None:
    from experiments.tasks.batching import pad_collate
    from experiments.training.build import assemble

    cfg = compose([*TINY, f"model.arch={arch}", "task.batch_size=4", "model.dropout=0.0"])
    parts = assemble(build_spec(cfg), tmp_path, run_id="shapes")
    datamodule, module = parts.datamodule, parts.module
    datamodule.fixed_shapes = True
    datamodule.setup("fit")
    shapes = set()
    module.eval()
    for batch in datamodule.train_dataloader():
        shapes.add((batch["src"].shape[1], batch["tgt"].shape[1]))
        examples = [{k: v[i] for k, v in batch.items()} for i in range(batch["src"].shape[0])]
        trimmed = pad_collate(
            [{k: (v[v.ne(datamodule.pad_id)] if v.dim() else int(v)) for k, v in e.items()} for e in examples],
            datamodule.pad_id,
        )
        assert trimmed["src"].shape[1] <= batch["src"].shape[1]
        with torch.no_grad():
            padded_loss, _ = module._losses(*module._io(batch)[:2])
            trimmed_loss, _ = module._losses(*module._io(trimmed)[:2])
        torch.testing.assert_close(padded_loss, trimmed_loss, rtol=1e-5, atol=1e-6)
    lengths = {s for pair in shapes for s in pair}
    longest = {datamodule.max_source_length(), datamodule.max_target_length()}
    assert lengths <= {8, 16, 32} | longest, shapes
