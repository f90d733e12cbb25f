"""Encoder-only classification: padding-blind pooling, parity is learned, every pair on both tasks, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from experiments.config.spec import build_spec
from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from experiments.training import build
from experiments.training.single_run import train
from tests.helpers.cases import skip_if_incompatible
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY, compose
from tests.helpers.env import environment
from tests.helpers.paths import CONF
from tests.helpers.runs import run
from variants import ATTENTION, POSITION

PAD, VOCAB = 0, 10
CLASSIFY_TASKS = ["listops", "parity"]


def encoder(attention: str, position: str, pooling: str) -> Transformer:
    torch.manual_seed(0)
    spec = ModelSpec(
        arch="encoder",
        vocab_size=VOCAB,
        attention=VariantSpec(attention, {"num_heads": 2}),
        position=VariantSpec(position),
        d_model=16,
        ffn_dim=32,
        encoder_layers=2,
        dropout=0.0,
        num_classes=3,
        pooling=pooling,
    )
    return Transformer(spec).eval()


# -- padding ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("position", POSITION.names())
@pytest.mark.parametrize("attention", ATTENTION.names())
def test_padded_batch_equals_each_example_alone(attention: str, position: str, pooling: str) -> None:
    """Padding is invisible: a row of a right-padded batch gets the logits it gets unpadded, alone.

    ``pad_id`` positions *are* the padding, so their content cannot be varied without
    changing the mask; running each example at its own length is the comparison that
    catches a leak through attention (unmasked keys) or pooling (a wrong denominator).
    """
    skip_if_incompatible(attention, position)
    model = encoder(attention, position, pooling)
    g = torch.Generator().manual_seed(3)
    lengths = [9, 5, 2, 7]
    rows = [torch.randint(4, VOCAB, (n,), generator=g) for n in lengths]
    batch = torch.full((len(rows), max(lengths)), PAD)  # (B, S)
    for i, row in enumerate(rows):
        batch[i, : len(row)] = row
    with torch.no_grad():
        padded = model.classify(batch)  # (B, C)
        alone = torch.cat([model.classify(row[None]) for row in rows])  # (B, C)
    assert torch.allclose(padded, alone, atol=1e-5), (padded - alone).abs().max()
    # The comparison means something only if the logits depend on the input at all. Not two
    # fixed rows: hard attention reads one value vector, and under an encoding that adds nothing
    # to the values two rows whose chosen keys hold the same tokens get the same logits (hard +
    # fire + cls on rows 0 and 1).
    assert any(not torch.allclose(alone[0], other, atol=1e-4) for other in alone[1:])


def test_mean_pooling_averages_only_real_positions() -> None:
    """The pooled vector is the mean of the encoder outputs at the real tokens, nothing else."""
    model = encoder("multihead", "sinusoidal", "mean")
    src = torch.tensor([[5, 6, 7, 8, PAD, PAD], [9, 4, PAD, PAD, PAD, PAD]])
    with torch.no_grad():
        memory, pad = model.encode(src)  # (B, S, d), (B, S)
        expected = torch.stack([memory[0, :4].mean(0), memory[1, :2].mean(0)])  # (B, d)
        assert torch.allclose(model.classify(src), model.classifier(expected), atol=1e-5)
    assert pad.tolist() == src.eq(PAD).tolist()


# -- learning --------------------------------------------------------------------------------------
PARITY_LEARNS = [
    "task=parity",
    "model.arch=encoder",
    "attention=multihead",
    "position=sinusoidal",
    "logger=none",
    "model.d_model=64",
    "model.ffn_dim=128",
    "model.encoder_layers=2",
    "model.dropout=0.0",
    "attention.num_heads=4",
    "optim.lr=3e-3",
    "optim.warmup_steps=50",
    "task.train_lengths=[2,8]",
    "task.eval_lengths=[2,3,4,5,6,7,8]",
    "task.train_size=2000",
    "task.val_size=64",
    "task.test_size=64",
    "trainer.max_steps=800",
    "trainer.val_check_interval=800",
    "checkpoint_every_n_steps=1000",
    "progress_bar=false",
    "eval.attention_maps=false",
]


@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_parity_is_learned_at_training_lengths(pooling: str, tmp_path: Path) -> None:
    """Both poolings learn parity of 2-8 bits: >= 90% right over the training lengths, none near chance."""
    result = run([*PARITY_LEARNS, f"model.pooling={pooling}"], tmp_path)
    assert result["status"] == "completed", result["error"]
    assert result["metrics"]["test/acc"] >= 0.9, result["by_length"]
    assert set(result["by_length"]) == {str(n) for n in range(2, 9)}
    assert min(m["acc"] for m in result["by_length"].values()) >= 0.75, result["by_length"]


# -- every pair, both tasks ------------------------------------------------------------------------
@pytest.mark.parametrize("position", POSITION.names())
@pytest.mark.parametrize("attention", ATTENTION.names())
@pytest.mark.parametrize("task", CLASSIFY_TASKS)
def test_every_pair_classifies(task: str, attention: str, position: str, tmp_path: Path) -> None:
    skip_if_incompatible(attention, position)
    overrides = [
        *TINY,
        f"task={task}",
        "model.arch=encoder",
        f"attention={attention}",
        f"position={position}",
        "trainer.fast_dev_run=true",
        "trainer.max_steps=1",
    ]
    result = run(overrides, tmp_path)
    assert result["status"] == "completed", result["error"]
    assert result["arch"] == "encoder" and result["task"] == task
    assert math.isfinite(result["metrics"]["test/loss"])
    assert 0.0 <= result["metrics"]["test/acc"] <= 1.0


def test_accuracy_counts_every_test_example_once(tmp_path: Path) -> None:
    """A model that always answers class 0 is right on exactly the examples labelled 0.

    Its test/acc, test/loss and each length's acc are counted here from the test batches themselves,
    which have unequal sizes and label mixes, so a mean of per-batch accuracies gives another number.
    """
    cfg = compose(
        [
            *TINY,
            "task=parity",
            "model.arch=encoder",
            "task.test_size=10",
            "task.batch_size=4",
            "task.eval_lengths=[8,16]",
        ]
    )
    parts = build.assemble(build_spec(cfg), tmp_path, run_id="accuracy")
    logits = torch.tensor([1.0, 0.0])  # class 0 always wins; cross-entropy log(1 + e) when the label is 1
    parts.module.model.forward = lambda src, *args, **kwargs: logits.expand(src.shape[0], 2)  # (B, classes)
    parts.datamodule.setup("test")
    batches = list(parts.datamodule.test_dataloader())
    labels = torch.cat([b["label"] for b in batches])
    lengths = torch.cat([b["length"] for b in batches])
    assert (
        len({len(b["label"]) for b in batches}) > 1
        and len({float(b["label"].eq(0).float().mean()) for b in batches}) > 1
    )
    (metrics,) = parts.trainer.test(parts.module, datamodule=parts.datamodule, verbose=False)
    assert metrics["test/acc"] == pytest.approx(float(labels.eq(0).float().mean()))
    losses = torch.where(labels.eq(0), math.log(1 + math.exp(-1)), math.log(1 + math.exp(1)))
    assert metrics["test/loss"] == pytest.approx(float(losses.mean()), rel=1e-5)
    by_length = parts.module.length_metrics()
    assert set(by_length) == {"8", "16"}
    for n, m in by_length.items():
        assert m["acc"] == pytest.approx(float(labels[lengths == int(n)].eq(0).float().mean())), n


@pytest.mark.parametrize("task", CLASSIFY_TASKS)
def test_lra_listops_preset_runs(task: str, tmp_path: Path) -> None:
    """The preset as written (model, lengths, sizes) trains and tests every length on ListOps and on parity."""
    overrides = [
        "experiment=lra_listops",
        f"task={task}",
        "attention=local",
        "position=learned",
        "model.pooling=cls",
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
        "trainer.limit_val_batches=1",
        "logger=none",
        "progress_bar=false",
        "eval.attention_maps=false",
    ]
    cfg = compose(overrides)
    assert cfg.model.arch == "encoder" and cfg.task.name == task
    result = train(build_spec(cfg), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    assert set(result["by_length"]) == {str(n) for n in cfg.task.eval_lengths}


def test_lra_listops_grid_covers_every_registered_pair() -> None:
    """Every type that takes every encoding (``supports_score_bias``); kernelised ones, which cannot take
    score biases, are compared on ListOps by ``experiment=efficient``."""
    params = OmegaConf.load(CONF / "experiment" / "lra_listops.yaml").hydra.sweeper.params
    assert sorted(params.attention.split(",")) == sorted(
        n for n in ATTENTION.names() if ATTENTION.get(n).supports_score_bias
    )
    assert sorted(params.position.split(",")) == sorted(POSITION.names())


# -- bad input -------------------------------------------------------------------------------------
BAD = [
    (["task=listops", "model.pooling=max"], "model.pooling=max", "mean"),
    (["task=listops", "task.max_depth=0"], "task.max_depth=0", ">= 1"),
    # the shortest expression is "[OP d d ]": nothing fits in 1-3 tokens at any depth
    (["task=listops", "task.train_lengths=[1,3]"], "task.train_lengths=[1, 3]", "4 to"),
    # one level of at most 3 arguments spans 4-5 tokens, far from the default 8-48
    (["task=listops", "task.max_depth=1", "task.max_args=3"], "task.train_lengths=[8, 48]", "4 to 5 tokens"),
    (["task=parity", "model.arch=seq2seq"], "model.arch=seq2seq", "encoder"),
]


@pytest.mark.parametrize(("overrides", "names", "allowed"), BAD, ids=[b[1] for b in BAD])
def test_bad_input_fails_in_one_line_before_training(
    overrides: list[str], names: str, allowed: str, tmp_path: Path
) -> None:
    arch = [] if any(o.startswith("model.arch") for o in overrides) else ["model.arch=encoder"]
    result = run([*TINY, *arch, *overrides], tmp_path)
    assert result["status"] == "failed" and result.get("user_error") is True, result["error"]
    error = result["error"]
    assert "\n" not in error and names in error and allowed in error, error
    assert result["cost"].get("steps", 0) == 0 and not (tmp_path / "checkpoints").exists()
    assert not (tmp_path / "error.log").exists(), "a user error carries no traceback"


def test_cli_bad_pooling_exits_2_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = train_cli(
        "task=listops",
        "model.arch=encoder",
        "model.pooling=max",
        "logger=none",
        f"hydra.run.dir={out}",
        env=environment(),
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "model.pooling=max" in lines[0] and "['mean', 'cls']" in lines[0], proc.stderr
    # Caught by the command-line check before Hydra starts a run: nothing trained, and any
    # result written says so.
    if (out / "result.json").exists():
        result = json.loads((out / "result.json").read_text())
        assert result["status"] == "failed" and result["user_error"] is True
    assert not (out / "checkpoints").exists()
