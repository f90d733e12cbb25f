"""``python -m experiments.bench peers`` and ``mfu``: a toy-size run end to end, and the FLOP formula.

No timing is asserted (this machine is shared); what must hold whatever the load:
the JSON is written, every ratio is a positive finite number, the compared models
have the same size, training losses are finite, and cached generation picks the
same tokens as recomputation.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from experiments import bench
from experiments.bench.mfu import flops_per_token, matmul_parameters, peak_tflops
from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from experiments.tasks.batches import lm_io

TOY = [
    "--batch",
    "4",
    "--length",
    "8",
    "--vocab",
    "40",
    "--d-model",
    "16",
    "--heads",
    "2",
    "--layers",
    "1",
    "--ffn",
    "32",
    "--warmup",
    "1",
    "--repeats",
    "2",
    "--inner",
    "1",
    "--batches",
    "2",
    "--no-compile",
    "--gen-tokens",
    "12",
    "--gen-prompt",
    "3",
    "--gen-batch",
    "2",
    "--gen-repeats",
    "2",
]


def test_peers_writes_finite_ratios(tmp_path, capsys):
    out = tmp_path / "peers.json"
    assert bench.main(["peers", *TOY, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    comparisons = report["comparisons"]
    assert set(comparisons) == {"seq2seq", "decoder", "generation"}
    ran = {name: c for name, c in comparisons.items() if "skipped" not in c}
    assert {"seq2seq", "generation"} <= set(ran)  # only the optional x-transformers peer may be skipped
    for name, comparison in ran.items():
        assert comparison["ratios"], name
        for ratio, value in comparison["ratios"].items():
            assert math.isfinite(value) and value > 0, (name, ratio, value)
        for case, row in comparison["cases"].items():
            assert math.isfinite(row["median_ms"]) and row["median_ms"] > 0, (name, case)
            if "final_loss" in row:
                assert math.isfinite(row["final_loss"]), (name, case)
        if "params" in next(iter(comparison["cases"].values())):
            sizes = [row["params"] for row in comparison["cases"].values()]
            # Same shape: only biases and norm parameters may differ between implementations.
            assert max(sizes) <= 1.2 * min(sizes), (name, sizes)
    assert comparisons["generation"]["same_tokens"] == 1.0
    checked = {t["ratio"]: t for t in report["targets"]}
    assert (
        checked["attnlab / torch.nn.Transformer"]["value"]
        == comparisons["seq2seq"]["ratios"]["attnlab / torch.nn.Transformer"]
    )
    assert checked["attnlab compiled / torch.nn.Transformer"]["value"] is None  # --no-compile
    assert "targets:" in capsys.readouterr().out


def test_bf16_on_cpu_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["peers", *TOY, "--device", "cpu", "--bf16"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--bf16" in err and "cuda" in err


def test_flops_formula_matches_pytorch_counter():
    """6 N + 12 L T d per token equals the matmul FLOPs PyTorch counts in a forward + backward
    (on the math path, whose attention is plain matmuls; biases and norms make the small rest)."""
    d, layers, T, B, vocab = 64, 2, 32, 2, 256
    model = Transformer(
        ModelSpec(
            arch="decoder",
            vocab_size=vocab,
            attention=VariantSpec("multihead", {"num_heads": 4}),
            position=VariantSpec("learned", {"max_len": T}),
            d_model=d,
            decoder_layers=layers,
            ffn_dim=4 * d,
            dropout=0.0,
            norm="pre",
            backend="math",
        )
    )
    inputs, targets = lm_io(torch.randint(4, vocab, (B, T + 1)))
    with FlopCounterMode(display=False) as counter:
        loss = F.cross_entropy(model(None, inputs).flatten(0, 1), targets.flatten())
        loss.backward()
    counted = counter.get_total_flops() / (B * T)
    analytic = flops_per_token(matmul_parameters(model), layers, T, d)
    assert counted == pytest.approx(analytic, rel=0.03)


def test_peak_table_prefers_the_specific_name():
    assert peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert peak_tflops("NVIDIA H100 80GB HBM3") == 989.4
    assert peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert peak_tflops("Tesla T4") is None


def test_peers_with_every_comparison_skipped_exits_1_and_is_not_complete(tmp_path, capsys, monkeypatch):
    """--only decoder with its peer missing: nothing was compared, so no success and no complete report."""
    from experiments.bench.peers import cli as peers

    missing = "x-transformers is not installed; decoder comparison skipped"
    monkeypatch.setattr(peers, "decoder_comparison", lambda *args: {"skipped": missing})
    out = tmp_path / "peers.json"
    assert bench.main(["peers", *TOY, "--only", "decoder", "--out", str(out)]) == 1
    assert json.loads(out.read_text())["complete"] is False
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"no case was measured (1 skipped); first error: {missing}" in err[0], err
