"""The report's "How each variant attends", on result files written into tmp_path."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.data.collect import collect
from analysis.report.build import build_report
from analysis.report.document.model import fmt
from analysis.report.sections.attention_section import attention_frame, attention_section, best_cross_layer, cell_labels
from tests.helpers.paths import ROOT

LENGTHS = [4, 8, 16]
TRAIN = [2, 8]
LAYERS = ["encoder_self/0", "decoder_self/0", "cross/0", "cross/1"]


def stats_for(rng: np.random.Generator, aligned_layer: str) -> dict:
    out = {}
    for layer in LAYERS:
        out[layer] = {}
        for n in LENGTHS:
            values = {
                "entropy": rng.random(),
                "entropy_ratio": rng.random(),
                "distance": rng.random() * n,
                "offset": rng.normal(),
                "first": rng.random(),
                "self": rng.random(),
                "cut": 0.0,
                "queries": 40.0,
            }
            if layer.startswith("cross"):
                good = layer == aligned_layer
                values |= {
                    "align_acc": (0.9 if good else 0.2) + 0.05 * rng.random(),
                    "align_share": rng.random(),
                    "align_acc_best_head": rng.random(),
                }
            out[layer][str(n)] = values
    return out


@pytest.fixture
def sweep(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    cells = [
        ("multihead", "sinusoidal", 0.1, "cross/1"),
        ("multihead", "sinusoidal", 0.3, "cross/0"),
        ("soft", "rope", 0.1, "cross/0"),
    ]
    for attention, position, dropout, aligned in cells:
        for seed in (0, 1):
            name = f"{attention}-{position}-{dropout}-s{seed}"
            result = {
                "schema": 1,
                "run_id": name,
                "sweep": "s",
                "status": "completed",
                "error": None,
                "task": "reverse",
                "attention": attention,
                "position": position,
                "seed": seed,
                "arch": "seq2seq",
                "overrides": [],
                "config_hash": name,
                "train_lengths": TRAIN,
                "config": {
                    "model.dropout": dropout,
                    "seed": seed,
                    "attention.num_heads": 4,
                    **({"position.base": 10000} if position == "rope" else {}),
                },
                "metrics": {"test/seq_acc": rng.random()},
                "by_length": {str(n): {"seq_acc": rng.random()} for n in LENGTHS},
                "cost": {},
                "env": {},
                "attention_stats": stats_for(rng, aligned),
            }
            (tmp_path / name).mkdir()
            (tmp_path / name / "result.json").write_text(json.dumps(result))
    return tmp_path


def results(sweep: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sweep.glob("*/result.json")}


def test_cells_are_the_varying_factors_without_seed_or_a_variants_own_parameters(sweep) -> None:
    runs = collect([sweep]).runs
    labels = dict(zip(runs["run_id"], cell_labels(runs)))
    assert labels["multihead-sinusoidal-0.1-s0"] == labels["multihead-sinusoidal-0.1-s1"]
    assert labels["multihead-sinusoidal-0.3-s0"] == "multihead+sinusoidal, model.dropout=0.3"
    assert labels["soft-rope-0.1-s1"] == "soft+rope, model.dropout=0.1"  # position.base is rope's own


def test_frame_holds_every_statistic_of_every_run(sweep) -> None:
    frame = attention_frame(collect([sweep]).runs)
    for name, result in results(sweep).items():
        for layer, by_length in result["attention_stats"].items():
            for n, values in by_length.items():
                for stat, value in values.items():
                    got = frame[
                        (frame["run_id"] == name)
                        & (frame["layer"] == layer)
                        & (frame["length"] == int(n))
                        & (frame["stat"] == stat)
                    ]["value"]
                    assert got.tolist() == [pytest.approx(value)]


def test_best_cross_layer_is_chosen_per_run_inside_the_training_lengths(sweep) -> None:
    frame = attention_frame(collect([sweep]).runs)
    best = best_cross_layer(frame, tuple(TRAIN))
    chosen = best.groupby("run_id")["layer"].unique().map(list).to_dict()
    for name, result in results(sweep).items():
        inside = {
            layer: np.mean([result["attention_stats"][layer][str(n)]["align_acc"] for n in (4, 8)])
            for layer in ("cross/0", "cross/1")
        }
        assert chosen[name] == [max(inside, key=inside.get)]


def test_layer_tables_show_seed_means_at_the_longest_training_and_evaluation_length(sweep, tmp_path) -> None:
    (section,) = attention_section(collect([sweep]).runs, "reverse", tmp_path / "figures")
    assert section.title == "How each variant attends — reverse"
    figure = next(b for b in section.blocks if hasattr(b, "path"))
    assert figure.path.is_file()
    tables = {s.title: s.blocks[0] for s in section.blocks if hasattr(s, "blocks")}
    assert list(tables) == LAYERS[:2] + ["cross/0", "cross/1"]
    table = tables["cross/1"]
    rows = {(r[0], r[1]): dict(zip(table.header, r)) for r in table.rows}
    assert sorted({length for _, length in rows}) == ["16 (beyond)", "8 (train)"]
    # reference: pandas over the raw files
    raw = pd.DataFrame(
        [
            {
                "run": k,
                "seed": r["seed"],
                "dropout": r["config"]["model.dropout"],
                "attention": r["attention"],
                **{s: r["attention_stats"]["cross/1"]["16"][s] for s in ("entropy_ratio", "align_acc")},
            }
            for k, r in results(sweep).items()
        ]
    )
    want = raw[(raw["attention"] == "multihead") & (raw["dropout"] == 0.3)][["entropy_ratio", "align_acc"]].mean()
    row = rows[("multihead+sinusoidal, model.dropout=0.3", "16 (beyond)")]
    assert row["H / log n"] == fmt(want["entropy_ratio"]) and row["align. acc"] == fmt(want["align_acc"])
    assert row["seeds"] == "2" and "cut" not in table.header  # no layer cut any weight


def test_report_has_the_section(sweep, tmp_path) -> None:
    html = build_report([sweep], tmp_path / "report")
    text = (html.parent / "report.md").read_text()
    assert "### How each variant attends — reverse" in text and "#### cross/1" in text


def test_analysis_never_imports_experiments() -> None:
    for path in (ROOT / "analysis").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            assert not any(n == "experiments" or n.startswith("experiments.") for n in names), path
