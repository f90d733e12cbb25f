"""optim.label_smoothing reaches the training loss: the loss equals torch's smoothed cross-entropy."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experiments.tasks.batches import IGNORE, seq2seq_io
from experiments.training.module import TransformerModule
from tests.helpers.config import TINY, compose


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_training_loss_is_torchs_cross_entropy_with_the_configured_smoothing(smoothing: float) -> None:
    cfg = compose([*TINY, f"optim.label_smoothing={smoothing}", "model.dropout=0.0"])
    torch.manual_seed(0)
    model = {
        "arch": "seq2seq",
        "vocab_size": 9,
        "d_model": 8,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "ffn_dim": 16,
        "dropout": 0.0,
        "attention": {"name": "multihead", "params": {"num_heads": 2}},
        "position": {"name": "sinusoidal", "params": {}},
    }
    optim = {k: v for k, v in cfg.optim.items() if k != "grad_clip"}  # as experiments.training.build passes it
    module = TransformerModule(model, optim, task_kind="seq2seq", max_steps=10)
    src = torch.tensor([[4, 5, 6, 7], [7, 8, 0, 0]])
    tgt = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])  # padded: the pad positions are not scored
    with pytest.warns(UserWarning, match="self.log"):  # no Trainer: Lightning says the log is skipped
        loss = module.training_step({"src": src, "tgt": tgt}, 0)

    tgt_in, targets = seq2seq_io(tgt, module.spec.bos_id, module.spec.pad_id)
    logits = module.model(src, tgt_in)  # (B, T, V), the same weights and inputs
    expected = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=IGNORE, label_smoothing=smoothing)
    unsmoothed = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=IGNORE)
    torch.testing.assert_close(loss, expected)
    if smoothing:
        difference = abs(float((expected - unsmoothed).detach()))
        assert difference > 1e-3, "the smoothed and plain losses must differ to tell them apart"
