"""Attention statistics on real models: every attention type x encoding, a full run's files and W&B run,
the closing summary, and a learning test (reverse aligns its cross attention)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from rich.console import Console

from analysis.data.wandb_offline import find_offline_runs, read_wandb_offline_run
from experiments.app.summary import print_summary
from experiments.model import attention_stats as A
from experiments.tasks import TASKS
from experiments.training.module import TransformerModule
from experiments.training.testing import EvalOptions
from tests.helpers.cases import cases, one_thread, skip_if_incompatible  # noqa: F401
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY
from tests.helpers.paths import ROOT
from variants import ATTENTION, POSITION

LENGTHS = [3, 5]


def logged_tables(run: dict[str, Any]) -> dict[str, dict[str, list]]:
    """Every ``wandb.Table`` the run logged, by name, the last one logged under each name:
    {name: {"columns": [..], "data": [[..]]}} (``run`` from ``read_wandb_offline_run``); the report reads no table,
    only this test."""
    tables: dict[str, dict[str, list]] = {}
    for row in run["history"]:
        for key, value in row.items():
            if key.endswith("/_type") and value == "table-file":
                name = key[: -len("/_type")]
                path = Path(run["path"]) / "files" / row[f"{name}/path"]
                table = json.loads(path.read_text())
                tables[name] = {"columns": table["columns"], "data": table["data"]}
    return tables


def tiny_module(
    attention: str, params: dict, position: str, stats: bool = True, examples: int | None = None
) -> tuple[TransformerModule, object]:
    """A tiny seq2seq module on reverse, with attention statistics (``stats``) over ``examples`` per length."""
    torch.manual_seed(0)
    task = TASKS.build("reverse", train_lengths=[2, 4], eval_lengths=LENGTHS, test_size=6, batch_size=4)
    module = TransformerModule(
        model={
            "arch": "seq2seq",
            "vocab_size": task.vocab_size,
            "d_model": 16,
            "ffn_dim": 32,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "dropout": 0.0,
            "attention": {"name": attention, "params": {"num_heads": 2, **params}},
            "position": {"name": position, "params": {}},
        },
        optim={},
        task_kind="seq2seq",
        max_steps=1,
        eval_lengths=LENGTHS,
        evaluation=EvalOptions(attention_stats=stats, stats_examples=examples, alignment=task.alignment),
    )
    module.eval()
    return module, task


def run_test_loop(module: TransformerModule, task) -> None:
    """What Lightning's test loop calls, without a Trainer."""
    module.on_test_epoch_start()
    with torch.no_grad():
        for i, batch in enumerate(task.test_dataloader()):
            module.test_step(batch, i)


def check_stats(module: TransformerModule, H: int = 2) -> dict:
    summary, heads = module.attention_statistics()
    assert sorted(summary) == ["cross/0", "decoder_self/0", "encoder_self/0"]
    for layer, by_length in summary.items():
        assert sorted(by_length, key=int) == [str(n) for n in LENGTHS]
        for values in by_length.values():
            expected = set(A.QUERY_STATS) | {"entropy_ratio", "queries"}
            if layer.startswith("cross"):
                expected |= {"align_acc", "align_share", "align_acc_best_head"}
            assert set(values) == expected
            assert all(v is not None and math.isfinite(v) for v in values.values()), (layer, values)
            assert 0.0 <= values["entropy_ratio"] <= 1.0 + 1e-5
    for key, value in heads.items():
        assert value.shape == (H,) and np.isfinite(value).all(), key
    assert module.stats_seconds > 0.0
    return summary


@pytest.mark.parametrize("position", POSITION.names())
@pytest.mark.parametrize("attention", ATTENTION.names())
def test_every_attention_and_encoding_gets_finite_statistics(attention: str, position: str) -> None:
    skip_if_incompatible(attention, position)
    module, task = tiny_module(attention, {}, position)
    run_test_loop(module, task)
    summary = check_stats(module)
    # reverse at lengths 3 and 5: the decoder's queries are n + 1 (EOS included), six examples per length
    assert summary["cross/0"]["5"]["queries"] == 6 * 6


@pytest.mark.parametrize("attention, params", cases(ATTENTION))
def test_every_attention_variation_gets_finite_statistics(attention: str, params: dict) -> None:
    module, task = tiny_module(attention, params, "sinusoidal")
    run_test_loop(module, task)
    summary = check_stats(module)
    cut = max(v["cut"] for by_length in summary.values() for v in by_length.values())
    if params.get("mode") == "predictive":  # the Gaussian window keeps part of the weight
        assert cut > 1e-3
    else:
        assert cut < 1e-5
    if attention == "hard":  # one key per query: no spread
        assert all(v["entropy"] == pytest.approx(0.0, abs=1e-6) for b in summary.values() for v in b.values())


@pytest.mark.parametrize("attention", ["soft", "local"])
def test_statistics_leave_the_scored_outputs_unchanged(attention: str) -> None:
    results = []
    for stats in (False, True):
        module, task = tiny_module(attention, {}, "rope", stats=stats)
        run_test_loop(module, task)
        results.append(
            {n: {k: float(m.compute()) for k, m in g.items()} for n, g in module.by_length.items()}
            | {"loss": float(module.test_loss.compute()), "acc": float(module.test_acc.compute())}
        )
    assert results[0] == results[1]


def test_the_statistics_cap_reads_the_first_examples_of_each_length() -> None:
    module, task = tiny_module("multihead", {}, "sinusoidal", examples=5)  # a batch of 4, then 1 of the next
    run_test_loop(module, task)
    summary, _ = module.attention_statistics()
    assert summary["cross/0"]["3"]["queries"] == 5 * 4
    assert summary["encoder_self/0"]["5"]["queries"] == 5 * 5


@pytest.mark.slow
def test_a_run_records_statistics_cost_and_wandb_tables(tmp_path) -> None:
    out = tmp_path / "run"
    overrides = [o for o in TINY if o != "logger=none"] + [
        "logger=default",
        "trainer.max_steps=2",
        "num_threads=1",
        "task.eval_lengths=[4,14]",
        f"hydra.run.dir={out}",
    ]
    done = train_cli(*overrides, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    stats = result["attention_stats"]
    assert sorted(stats) == ["cross/0", "decoder_self/0", "encoder_self/0"]
    assert all(math.isfinite(v["entropy_ratio"]) for b in stats.values() for v in b.values())
    cost = result["cost"]
    assert 0 < cost["attention_stats_seconds"] < cost["test_seconds"]
    heads = np.load(out / "attention_stats.npz")
    assert heads["cross/0/14/align_acc"].shape == (2,)
    # the closing summary: the per-length table and where things are, no library noise
    assert "alignment cross/0" in done.stdout and str(out / "result.json") in done.stdout
    assert "python -m analysis.report" in done.stdout and "wandb sync" in done.stdout
    for noise in ("anonymous setting", "LeafSpec", "srun"):
        assert noise not in done.stdout + done.stderr
    # W&B: metric definitions and the tables, read back from the offline run
    (run_dir,) = find_offline_runs([out])
    run = read_wandb_offline_run(run_dir)
    assert run["metrics"]["test/*"] == {"step_metric": "trainer/global_step", "summary": ["last"]}
    assert run["metrics"]["by_length/seq_acc"]["step_metric"] == "length"
    assert run["metrics"]["by_length/alignment"]["summary"] == ["none"]
    tables = logged_tables(run)
    by_length = tables["by_length"]
    rows = {row[0]: dict(zip(by_length["columns"], row)) for row in by_length["data"]}
    assert sorted(rows) == [4, 14] and rows[4]["in_training"] and not rows[14]["in_training"]
    assert rows[14]["seq_acc"] == pytest.approx(result["by_length"]["14"]["seq_acc"])
    assert rows[14]["alignment"] == pytest.approx(stats[rows[14]["layer"]]["14"]["align_acc"])
    long = tables["attention_stats"]
    assert len(long["data"]) == 3 * 2  # layers x lengths
    assert "charts/alignment_vs_length_table" in tables
    points = [h for h in run["history"] if "by_length/seq_acc" in h]
    assert [h["length"] for h in points] == [4, 14]


def test_summary_names_the_headline_layer_and_marks_lengths_outside_training() -> None:
    layer = {"align_acc": 0.9, "entropy_ratio": 0.25}
    result = {
        "status": "completed",
        "task": "reverse",
        "attention": "soft",
        "position": "rope",
        "seed": 0,
        "run_id": "x",
        "metrics": {"test/seq_acc": 0.5},
        "train_lengths": [2, 8],
        "by_length": {"8": {"token_acc": 0.97, "seq_acc": 0.75}, "16": {"token_acc": 0.5, "seq_acc": 0.125}},
        # over all lengths cross/0 aligns better (0.65 vs 0.525); inside the training lengths cross/1 does
        "attention_stats": {
            "cross/0": {"8": {**layer, "align_acc": 0.3}, "16": {**layer, "align_acc": 1.0}},
            "cross/1": {"8": {**layer, "align_acc": 0.95}, "16": {**layer, "align_acc": 0.1}},
        },
        "cost": {"test_seconds": 10.0, "attention_stats_seconds": 0.4},
    }
    console = Console(record=True, width=200)
    from pathlib import Path

    print_summary(result, Path("/runs/r"), console)
    text = console.export_text()
    # cross/1 aligns best inside the training lengths (0.95 vs 0.3), whatever happens past them
    assert "alignment cross/1" in text
    rows = [line for line in text.splitlines() if line.strip().startswith(("│", "|"))]
    assert any("16 *" in r and "0.125" in r and "0.100" in r for r in rows)
    assert any(" 8 " in r and "0.750" in r and "0.950" in r for r in rows)
    assert "attention statistics 4%" in text


@pytest.mark.slow
def test_reverse_learns_cross_attention_alignment(tmp_path) -> None:
    """multihead + sinusoidal on reverse (the quick preset, short sequences, 500 steps): the best cross
    layer's weights peak on the mirrored source position for >= 90% of the queries inside the training lengths."""
    out = tmp_path / "run"
    overrides = [
        "experiment=quick",
        "attention=multihead",
        "position=sinusoidal",
        "logger=none",
        "num_threads=1",
        "eval.attention_maps=false",
        "trainer.max_steps=500",
        "trainer.val_check_interval=500",
        "task.train_lengths=[2,6]",
        "task.eval_lengths=[4,6,8]",
        "task.train_size=2000",
        "task.val_size=64",
        "task.test_size=32",
        "progress_bar=false",
        f"hydra.run.dir={out}",
    ]
    done = train_cli(*overrides, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    assert result["by_length"]["6"]["seq_acc"] >= 0.9  # it learned the task
    cross = {k: v for k, v in result["attention_stats"].items() if k.startswith("cross")}
    best = max(min(v[n]["align_acc"] for n in ("4", "6")) for v in cross.values())
    assert best >= 0.9


@pytest.mark.parametrize(
    "arch, task, layer", [("decoder", "reverse", "decoder_self/0"), ("encoder", "parity", "encoder_self/0")]
)
def test_decoder_only_and_encoder_models_get_their_layers_statistics(arch: str, task: str, layer: str) -> None:
    data = TASKS.build(task, train_lengths=[2, 4], eval_lengths=LENGTHS, test_size=6, batch_size=4)
    module = TransformerModule(
        model={
            "arch": arch,
            "vocab_size": data.vocab_size,
            "d_model": 16,
            "ffn_dim": 32,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "num_classes": int(data.num_classes or 0),
            "pooling": "cls",
            "attention": {"name": "multihead", "params": {"num_heads": 2}},
            "position": {"name": "rope", "params": {}},
        },
        optim={},
        task_kind=data.kind,
        max_steps=1,
        eval_lengths=LENGTHS,
        evaluation=EvalOptions(attention_stats=True, alignment=data.alignment),
    )
    module.eval()
    run_test_loop(module, data)
    summary, _ = module.attention_statistics()
    assert list(summary) == [layer] and list(summary[layer]) == ["3", "5"]
    values = summary[layer]["5"]
    assert "align_acc" not in values and all(math.isfinite(v) for v in values.values())
    # encoder with [CLS]: 5 symbols + CLS per example; decoder-only: "src <sep> tgt" minus the last token
    assert values["queries"] == 6 * (6 if arch == "encoder" else 5 + 1 + 6 - 1)
