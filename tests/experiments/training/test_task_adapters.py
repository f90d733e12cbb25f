"""The task adapters (experiments/training/task_adapters.py): each kind's loss is torch's own cross-entropy on
the targets it builds, and the module and the ensemble pick the same adapter once."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experiments.tasks.base import KINDS
from experiments.tasks.batches import IGNORE
from experiments.training.task_adapters import (
    ADAPTERS,
    ClassifyAdapter,
    ConcatSeq2SeqAdapter,
    LanguageModelAdapter,
    Seq2SeqAdapter,
    adapter_for,
)

PAD, BOS, SEP, VOCAB, CLASSES = 0, 1, 3, 11, 4
# (kind, arch) -> the adapter it must get
CHOICES = {
    ("seq2seq", "seq2seq"): Seq2SeqAdapter,
    ("seq2seq", "decoder"): ConcatSeq2SeqAdapter,
    ("lm", "decoder"): LanguageModelAdapter,
    ("classify", "encoder"): ClassifyAdapter,
}


def batch_for(kind: str) -> dict[str, torch.Tensor]:
    """A batch of 3 examples with padding of unequal length (so IGNORE positions differ per row)."""
    g = torch.Generator().manual_seed(0)
    if kind == "lm":
        return {"tokens": torch.randint(4, VOCAB, (3, 9), generator=g)}
    src = torch.randint(4, VOCAB, (3, 7), generator=g)
    src[0, 5:], src[2, 3:] = PAD, PAD
    if kind == "classify":
        return {"src": src, "label": torch.tensor([2, 0, 3])}
    tgt = torch.randint(4, VOCAB, (3, 6), generator=g)
    tgt[1, 2:], tgt[2, 4:] = PAD, PAD
    return {"src": src, "tgt": tgt}


@pytest.mark.parametrize("kind, arch", list(CHOICES))
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_loss_is_torch_cross_entropy_on_the_adapters_targets(kind: str, arch: str, smoothing: float) -> None:
    adapter = adapter_for(kind, arch, pad_id=PAD, bos_id=BOS, sep_id=SEP)
    _, targets, _ = adapter.io(batch_for(kind))
    classes = CLASSES if kind == "classify" else VOCAB
    logits = torch.randn(*targets.shape, classes, generator=torch.Generator().manual_seed(1))  # (B, [T,] C)
    loss, per_example = adapter.losses(logits, targets, smoothing)
    # torch's own loss: the mean over scored targets; per example, the same on its row alone
    as_classes_second = logits.movedim(-1, 1) if logits.dim() == 3 else logits
    expected = F.cross_entropy(as_classes_second, targets, ignore_index=IGNORE, label_smoothing=smoothing)
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-6)
    rows = [
        F.cross_entropy(
            logits[b].view(-1, classes), targets[b].view(-1), ignore_index=IGNORE, label_smoothing=smoothing
        )
        for b in range(len(targets))
    ]
    torch.testing.assert_close(per_example, torch.stack(rows), rtol=1e-6, atol=1e-6)
    # the training step's loss alone: the same value, and torch's gradient of it
    leaf = logits.clone().requires_grad_(True)
    adapter.loss(leaf, targets, smoothing).backward()
    reference = logits.clone().requires_grad_(True)
    F.cross_entropy(
        reference.movedim(-1, 1) if reference.dim() == 3 else reference,
        targets,
        ignore_index=IGNORE,
        label_smoothing=smoothing,
    ).backward()
    torch.testing.assert_close(adapter.loss(logits, targets, smoothing), expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(leaf.grad, reference.grad, rtol=1e-6, atol=1e-7)
    # REINFORCE's per-position costs: torch's unreduced loss where scored, 0 elsewhere; their sum over
    # the scored positions is the loss
    costs = adapter.token_losses(logits, targets, smoothing)  # (B, T)
    scored = adapter.scored(targets)
    unreduced = F.cross_entropy(
        as_classes_second, targets, ignore_index=IGNORE, reduction="none", label_smoothing=smoothing
    ).reshape(costs.shape)
    torch.testing.assert_close(costs, torch.where(scored, unreduced, torch.zeros_like(unreduced)))
    torch.testing.assert_close(costs.sum() / scored.sum(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind, arch", [c for c in CHOICES if c[0] != "classify"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_a_batch_with_nothing_scored_has_loss_zero_and_a_zero_gradient(kind: str, arch: str, smoothing: float) -> None:
    """Every target IGNORE: torch's mean would be 0 / 0 (NaN, read as a divergence); the loss is 0, as the
    per-example path's, and no NaN reaches the weights."""
    adapter = adapter_for(kind, arch, pad_id=PAD, bos_id=BOS, sep_id=SEP)
    _, targets, _ = adapter.io(batch_for(kind))
    targets = torch.full_like(targets, IGNORE)
    logits = torch.randn(*targets.shape, VOCAB, requires_grad=True)
    loss = adapter.loss(logits, targets, smoothing)
    loss.backward()
    assert loss.item() == 0.0 == adapter.losses(logits, targets, smoothing)[0].item()
    assert torch.equal(logits.grad, torch.zeros_like(logits))


def test_each_kind_gets_its_adapter_and_an_unknown_kind_names_the_choices() -> None:
    assert set(ADAPTERS) == set(KINDS), "every task kind needs an adapter"
    for (kind, arch), cls in CHOICES.items():
        assert type(adapter_for(kind, arch, pad_id=PAD, bos_id=BOS, sep_id=SEP)) is cls
    with pytest.raises(ValueError, match=r"kind='regress'.*\['seq2seq', 'lm', 'classify'\]"):
        adapter_for("regress", "encoder", pad_id=PAD, bos_id=BOS, sep_id=SEP)


@pytest.mark.parametrize("kind, arch", list(CHOICES))
def test_the_module_and_the_ensemble_use_the_same_adapter(kind: str, arch: str) -> None:
    """The module's losses are its adapter's, its targets the adapter's, and the ensemble's member batches
    hold the same targets and tokens seen as the module's own step counts (the REINFORCE-free path)."""
    from experiments.ensemble.data import MemberBatches
    from experiments.training.module import TransformerModule

    model = {
        "arch": arch,
        "vocab_size": VOCAB,
        "num_classes": CLASSES if kind == "classify" else 0,
        "d_model": 8,
        "ffn_dim": 16,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "dropout": 0.0,
        "attention": {"name": "multihead", "params": {"num_heads": 2}},
        "position": {"name": "sinusoidal"},
    }
    module = TransformerModule(model, {}, task_kind=kind, max_steps=1, sep_id=SEP)
    assert type(module.adapter) is CHOICES[kind, arch]
    batch = batch_for(kind)
    logits, targets, src = module._io(batch)
    member = MemberBatches([], kind=kind, arch=arch, pad_id=PAD, bos_id=BOS, sep_id=SEP).collate([batch])
    torch.testing.assert_close(member["targets"][0], targets, rtol=0, atol=0)
    seen = targets.ne(IGNORE).sum() + (src.ne(PAD).sum() if src is not None else 0)  # tokens a step reads
    assert int(member["tokens"][0]) == int(seen)
    classes_second = logits.movedim(-1, 1) if logits.dim() == 3 else logits
    expected = F.cross_entropy(classes_second, targets, ignore_index=IGNORE, label_smoothing=0.1)
    torch.testing.assert_close(module._losses(logits, targets, 0.1)[0], expected)
    torch.testing.assert_close(module._loss(logits, targets, 0.1), expected)
