"""No host synchronisation inside a training step, except at logging steps.

On a GPU every read of a device tensor on the host (``.item()``, ``bool()``, ``float()``,
``.tolist()``, ``.cpu()``) waits for all queued kernels, so a small model's GPU idles while
Python prepares the next step. On CPU nothing waits, so these tests count the reads through
mocks: the training step may read only at ``trainer.log_every_n_steps``.
"""

from __future__ import annotations

import statistics
import sys
import traceback
from collections import Counter
from pathlib import Path

import lightning as L
import pytest
import torch

from experiments.config.spec import build_spec
from experiments.training.callbacks import StepTimer
from tests.helpers.cases import skip_if_incompatible
from tests.helpers.config import TINY, compose
from variants import ATTENTION, POSITION
from variants.host_reads import DECLARED

HOST_READS = ("item", "__bool__", "__float__", "__int__", "__index__", "tolist", "cpu", "numpy")
LOG_EVERY, STEPS = 5, 20
ATTENTION_NAMES, POSITION_NAMES = ATTENTION.names(), POSITION.names()


# Host tensors on a GPU run too: the data pipeline builds batches before they move to the device.
HOST_SIDE = ("torch/utils/data/", "experiments/tasks/")


class ReadCounter(L.Callback):
    """Counts host reads of tensors per training step (by the step the batch completes), validation aside."""

    def __init__(self) -> None:
        self.reads: Counter[int] = Counter()
        self.where: dict[int, list[str]] = {}
        self.step: int | None = None
        self.trainer = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.step, self.trainer = trainer.global_step + 1, trainer

    def on_validation_start(self, trainer, pl_module) -> None:
        self.step = None

    def on_validation_end(self, trainer, pl_module) -> None:
        self.step = trainer.global_step

    def on_train_end(self, trainer, pl_module) -> None:
        self.step = None

    def host_counter(self, tensor: torch.Tensor) -> bool:
        """AdamW keeps its step counts on the host (capturable=False): reading them waits for nothing."""
        optimizers = self.trainer.optimizers if self.trainer is not None else []
        return any(s.get("step") is tensor for opt in optimizers for s in opt.state.values())

    def count(self, tensor: torch.Tensor, name: str) -> None:
        if self.step is None:
            return
        stack = traceback.extract_stack()
        frame = stack[-3]
        if any(part in frame.filename for part in HOST_SIDE) or self.host_counter(tensor):
            return
        # Dynamo reads a captured 0-d tensor once while it traces a graph (its value is the symbol's hint):
        # a read per compile, not per step (flex's mask_mod captures the call's lengths so)
        if any(f.name == "from_real_tensor" and f.filename.endswith("fake_tensor.py") for f in stack[-12:]):
            return
        # a kernel that reads its shapes by design declares it (variants.host_reads)
        if sys._getframe(2).f_code in DECLARED:
            return
        self.reads[self.step] += 1
        self.where.setdefault(self.step, []).append(f"{name} in {Path(frame.filename).name}:{frame.lineno}")


@pytest.fixture
def counter(monkeypatch) -> ReadCounter:
    # Eager flex on CPU runs through torch's own Dynamo wrapper; once earlier tests in this process have
    # used up that wrapper's recompile limit, torch traces each call with fake tensors, whose .item() reads
    # would be counted here. A fresh Dynamo state measures the variant, not the order the tests ran in.
    torch._dynamo.reset()
    found = ReadCounter()
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)

        def read(self, *args, _original=original, _name=name, **kwargs):
            found.count(self, _name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, read)

    def synchronize(*args, **kwargs) -> None:
        if found.step is not None:
            found.reads[found.step] += 1
            found.where.setdefault(found.step, []).append("torch.cuda.synchronize")

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    return found


@pytest.mark.parametrize("arch", ["seq2seq", "decoder"])
def test_training_steps_read_nothing_from_the_device_between_logging_steps(tmp_path, counter, arch) -> None:
    from experiments.training.build import assemble

    overrides = [
        *TINY,
        f"model.arch={arch}",
        f"trainer.max_steps={STEPS}",
        f"trainer.log_every_n_steps={LOG_EVERY}",
        f"trainer.val_check_interval={STEPS}",
        f"checkpoint_every_n_steps={STEPS}",
    ]
    parts = assemble(build_spec(compose(overrides)), tmp_path, run_id="sync")
    parts.trainer.callbacks.append(counter)
    parts.trainer.fit(parts.module, datamodule=parts.datamodule)
    assert parts.trainer.global_step == STEPS
    logging_steps = set(range(LOG_EVERY, STEPS + 1, LOG_EVERY))
    stalls = {step: counter.where[step] for step in counter.reads if step not in logging_steps}
    assert not stalls, f"host reads of device tensors inside training steps: {stalls}"
    # the counter sees the reads it should: logging steps read the loss for the logger and the log line
    assert all(counter.reads[step] > 0 for step in logging_steps)


class FakeEvent:
    """A CUDA event on CPU: ``record`` notes the clock, ``elapsed_time`` is in milliseconds."""

    clock = 0.0
    synchronized = 0

    def __init__(self, enable_timing: bool = False) -> None:
        self.at: float | None = None

    def record(self) -> None:
        self.at = FakeEvent.clock

    def synchronize(self) -> None:
        FakeEvent.synchronized += 1

    def elapsed_time(self, end: FakeEvent) -> float:
        return end.at - self.at


class CudaModule:
    device = torch.device("cuda")

    def __init__(self) -> None:
        self.tokens_seen = 0


def test_step_timer_on_cuda_synchronises_once_per_logging_interval(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(FakeEvent, "synchronized", 0)
    device_syncs = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: device_syncs.append(a))

    class Trainer:
        log_every_n_steps = 20

    timer, module, trainer = StepTimer(), CudaModule(), Trainer()
    durations = [7.0 + (i % 3) for i in range(100)]  # ms of GPU time per step
    for i, ms in enumerate(durations):
        timer.on_train_batch_start(trainer, module, None, i)
        FakeEvent.clock += ms
        module.tokens_seen = module.tokens_seen + torch.tensor(50)
        timer.on_train_batch_end(trainer, module, None, None, i)
        FakeEvent.clock += 100.0  # data loading, logging: outside the step
    assert not device_syncs, "the step timer must not synchronise the whole device"
    assert FakeEvent.synchronized == len(durations) // Trainer.log_every_n_steps
    summary = timer.summary()
    assert timer.times_ms == durations
    kept = durations[StepTimer.WARMUP_STEPS :]
    assert summary["step_ms"] == statistics.median(kept)
    assert summary["steady_tokens_per_second"] == pytest.approx(50 * len(kept) / (sum(kept) / 1000))


# -- every registered attention type x position encoding, on every backend it declares ------------------
def model_for(attention: str, position: str, p_params: dict, backend: str) -> torch.nn.Module:
    from experiments.model.transformer import ModelSpec, Transformer, VariantSpec

    spec = ModelSpec(
        arch="seq2seq",
        vocab_size=20,
        attention=VariantSpec(attention, {"num_heads": 2}),
        position=VariantSpec(position, p_params),
        d_model=16,
        ffn_dim=32,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
        backend=backend,
    )
    return Transformer(spec).train()


def position_cases(position: str) -> list[dict]:
    """The encoding's registered variations, and rope's length scaling, which reads the sequence length."""
    from variants import POSITION

    extra = [{"scaling": "yarn", "factor": 4.0, "train_length": 4}] if position == "rope" else []
    return [*POSITION.variations(position), *extra]


def host_reads_of_training_step(counter: ReadCounter, model: torch.nn.Module, *, backward: bool) -> list[str]:
    """Where one training step (forward, loss, backward) reads device tensors on the host; source padding
    reaches the encoder's keys and cross attention's, as a padded task makes it. One step is enough: a
    first call misses every cache, so a read on a miss shows as well as one on every call."""
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, 20, (3, 9), generator=g)
    src[1, -3:] = 0
    tgt = torch.randint(4, 20, (3, 8), generator=g)
    counter.step = 1
    with torch.set_grad_enabled(backward):
        logits = model(src, tgt)  # (B, T, V)
        if backward:
            torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten()).backward()
    counter.step = None
    counter.reads.pop(1, None)
    return counter.where.pop(1, [])


@pytest.mark.parametrize("position", POSITION_NAMES)
@pytest.mark.parametrize("attention", ATTENTION_NAMES)
def test_no_pair_reads_the_device_in_a_training_step_on_any_backend(counter, attention: str, position: str) -> None:
    """A new variant that reads a tensor on the host (``.item()``, ``.tolist()``, ``int(t)``, ``bool(t)``) in
    its forward or backward fails here, on every backend it declares. Flex has no backward on CPU: its
    forward runs without gradients (the mask and score_mod are built as in training)."""
    from variants import ATTENTION
    from variants.kernels import xformers_available

    skip_if_incompatible(attention, position)
    backends = [b for b in ATTENTION.get(attention).backends if b != "xformers" or xformers_available()]
    reads = {}
    for p_params in position_cases(position):
        for backend in backends:
            torch.manual_seed(0)
            model = model_for(attention, position, p_params, backend)
            found = host_reads_of_training_step(counter, model, backward=backend != "flex")
            if found:
                reads[f"{backend} {p_params or ''}"] = sorted(set(found))
    assert not reads, f"{attention}+{position} reads device tensors on the host in a training step: {reads}"


def test_ensemble_training_steps_read_nothing_from_the_device_between_logging_steps(tmp_path, counter) -> None:
    """``ensemble.seeds=N``: divergence is marked per member on the device and read at logging steps, and
    the loss is no progress-bar metric (Lightning turns those into numbers after every step)."""
    from experiments.ensemble import train_ensemble

    overrides = [
        *TINY,
        "ensemble.seeds=2",
        f"trainer.max_steps={STEPS}",
        f"trainer.log_every_n_steps={LOG_EVERY}",
        f"trainer.val_check_interval={STEPS}",
        f"checkpoint_every_n_steps={STEPS}",
    ]
    members = train_ensemble(build_spec(compose(overrides)), tmp_path, overrides, callbacks=[counter])
    assert [m["status"] for m in members] == ["completed", "completed"]
    assert [m["cost"]["steps"] for m in members] == [STEPS, STEPS]
    logging_steps = set(range(LOG_EVERY, STEPS + 1, LOG_EVERY))
    stalls = {step: counter.where[step] for step in counter.reads if step not in logging_steps}
    assert not stalls, f"host reads of device tensors inside ensemble training steps: {stalls}"
    assert all(counter.reads[step] > 0 for step in logging_steps)
