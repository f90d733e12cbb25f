"""How much memory ``ensemble.seeds=N`` needs, estimated from the model spec before any member is built.

N members train as one batched model, so every cost of a separate run is paid N times at once:

- weights: each member's own module (kept for its evaluation) and its slice of the stacked copy the
  batched step trains, its gradient and AdamW's two moments: 5 copies of its parameters;
- activations of one step, kept for the backward pass. Inside the batched step every attention layer
  takes its reference path (``math``), which holds the (B, H, Tq, Tk) scores and their softmax; besides
  them each layer keeps about ``LINEAR_ACTIVATIONS`` (B, T, d_model) tensors and two (B, T, ffn_dim)
  ones, and the head its (B, T, vocab) logits, their log-softmax and its gradient;
- data: each member's datamodule holds its own examples (Python lists of token ids).

The parameters are counted on a model built on the meta device (no memory; one real model where a
variant computes values at construction), so the estimate takes well under a second for any N.
tests/experiments/ensemble/test_ensemble_memory.py holds it against the parameters a member builds and the tensors one
training step keeps for its backward pass.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from experiments.config.errors import ConfigError
from experiments.config.spec import Spec, TrainerSpec

log = logging.getLogger("attnlab")

WEIGHT_COPIES = 5  # the member's module, its stacked slice, the gradient, AdamW's exp_avg and exp_avg_sq
LINEAR_ACTIVATIONS = 10  # (B, T, d_model) tensors a layer keeps: norms, q, k, v, attention output, residuals
EXAMPLE_OVERHEAD = 400  # bytes of one example's Python objects besides its token ids (8 bytes each)
LARGE_SHARE = 0.5  # a run that needs more than this share of the memory available is announced
MIB = 2**20


class EnsembleMemoryError(ConfigError):
    """The ensemble would need more memory than the device has."""


@dataclass(frozen=True)
class MemoryEstimate:
    members: int
    weights: int  # bytes per member
    activations: int  # bytes per member, one training step
    data: int  # bytes per member

    @property
    def per_member(self) -> int:
        return self.weights + self.activations + self.data

    @property
    def total(self) -> int:
        return self.members * self.per_member

    def describe(self) -> str:
        return (
            f"about {gib(self.total)} ({self.members} × {self.per_member / MIB:.1f} MiB: weights, gradients and "
            f"optimizer state {self.weights / MIB:.1f}, activations of one step {self.activations / MIB:.1f}, "
            f"data {self.data / MIB:.1f})"
        )


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def bytes_per_value(precision: object) -> int:
    """Activations' bytes per value: 2 under a 16-bit precision, else 4 (weights and optimizer stay float32)."""
    return 2 if "16" in str(precision) else 4


def estimate(run: Spec, members: int) -> MemoryEstimate:
    """The memory ``members`` batched members of the run need: from the model spec and the task's lengths."""
    import torch

    from experiments.model.transformer import Transformer
    from experiments.training.build import build_datamodule, model_spec

    with tempfile.TemporaryDirectory() as scratch:  # a task with a download cache writes nothing in the run
        # its constructor: sizes and lengths, no examples
        datamodule = build_datamodule(run, Path(scratch))
        spec = model_spec(run, datamodule)
        try:
            with torch.device("meta"):
                model = Transformer(spec)
        except Exception:  # noqa: BLE001 - a variant that computes values at construction (performer, xpos)
            model = Transformer(spec)
        params = sum(p.numel() for p in model.parameters())
        src, tgt = int(datamodule.max_source_length()), int(datamodule.max_target_length())
    m, t = run.model.options, run.task.params
    batch, heads, width = int(t["batch_size"]), int(run.model.attention["num_heads"]), run.model.d_model
    arch = run.model.arch
    encoder = int(m["encoder_layers"]) if arch != "decoder" else 0
    decoder = int(m["decoder_layers"]) if arch != "encoder" else 0
    if arch == "decoder":  # one stream: a language model's context, else the source, a separator and the target
        src, tgt = 0, src if datamodule.kind == "lm" else src + 1 + tgt

    def layer(queries: int, keys: int) -> int:
        return batch * (queries * (LINEAR_ACTIVATIONS * width + 2 * int(m["ffn_dim"])) + 2 * heads * queries * keys)

    values = encoder * layer(src, src) + decoder * layer(tgt, tgt)
    if encoder and decoder:  # cross attention: the decoder's queries over the encoder's keys
        values += decoder * batch * (4 * tgt * width + 2 * heads * tgt * src)
    values += 3 * batch * max(tgt, 1) * int(spec.vocab_size)  # logits, log-softmax, their gradient
    examples = sum(int(t.get(f"{s}_size", 0) or 0) for s in ("train", "val", "test"))
    return MemoryEstimate(
        members=members,
        weights=WEIGHT_COPIES * 4 * params,
        activations=values * bytes_per_value(run.trainer.get("precision")),
        data=examples * (8 * (src + tgt) + EXAMPLE_OVERHEAD),
    )


def available(trainer: TrainerSpec) -> tuple[int, str]:
    """(bytes, what they are) the ensemble may use: the CUDA device's free memory, else the RAM available."""
    from experiments.training.build import trains_on_cuda

    if trains_on_cuda(trainer):
        import torch

        free, _ = torch.cuda.mem_get_info()
        return free, f"is free on {torch.cuda.get_device_name()}"
    return ram_available(), "of RAM is available"


def ram_available() -> int:
    """MemAvailable of /proc/meminfo (Linux); elsewhere the physical memory."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(
    run: Spec, members: int, limit: tuple[int, str] | None = None, to_train: int | None = None
) -> MemoryEstimate:
    """Refuse (one line) an ensemble that would not fit; announce one that takes a large share. ``limit``:
    (bytes, what they are), else what ``available`` finds. ``to_train``: the members still to train when
    some completed before (a resumed ensemble trains only the rest batched), else all ``members``."""
    left = members if to_train is None else to_train
    need = estimate(run, left)
    have, what = limit if limit is not None else available(run.trainer)
    fits = max(have // max(need.per_member, 1), 0)
    named = f"ensemble.seeds={members}" + (f" ({left} still to train)" if left != members else "")
    if need.total > have:
        raise EnsembleMemoryError(
            f"{named} needs {need.describe()}, but {gib(have)} {what}; lower ensemble.seeds "
            f"to at most {fits}, or task.batch_size / model sizes, or batch fewer seeds at once "
            f"(hydra/launcher=ensemble hydra.launcher.max_members={max(fits, 2)})"
        )
    if need.total > LARGE_SHARE * have:
        log.info("%s: %s of the %s %s", named, need.describe(), gib(have), what)
    return need
