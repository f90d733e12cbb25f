"""analysis: collecting results, statistics and the report, on sweeps written into tmp_path.

The fixture sweep follows the result.json contract of the training app. Its
numbers are drawn from a seeded generator and kept in a ground-truth frame, so
every table in the report is checked against an independent pandas / scipy
computation on the same values.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from analysis.command.errors import CollectError
from analysis.data.collect import collect, collect_wandb_api, collect_wandb_offline
from analysis.data.curves import learning_curves
from analysis.data.wandb_offline import read_wandb_offline_run
from analysis.report.build import ReportError, build_report, main
from analysis.report.document.model import fmt
from analysis.report.sections.tables import ONE_SEED_NOTICE, mean_text
from analysis.stats import inference
from tests.helpers import grid_effects
from tests.helpers.cell_fixtures import md_table
from tests.helpers.results import result_dict, write_csv_log, write_result

HOSTILE = "<script>alert(1)</script>"
METRICS = ("test/token_acc", "test/seq_acc", "val/loss")
# Cell quality: (token_acc centre, loss centre); distinct so that the best cell is unique.
CENTRES = {
    ("multihead", "sinusoidal"): (0.80, 0.9),
    ("multihead", "rope"): (0.93, 0.4),
    ("local", "sinusoidal"): (0.70, 1.3),
    ("local", "rope"): (0.75, 1.1),
    ("hard", "sinusoidal"): (0.60, 1.8),
    ("hard", "rope"): (0.62, 1.7),
}


# ---------------------------------------------------------------- fixture writers


def write_maps(run_dir: Path) -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 2, 6, 6))
    weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)  # rows sum to one, like softmax output
    np.savez(
        run_dir / "attention_maps.npz",
        **{
            "encoder_self/0": weights[0].astype(np.float32),
            "encoder_self/1": weights[1].astype(np.float32),
            "cross/0": weights[2].astype(np.float32),
        },
        src_tokens=np.array(["a", "b", "c", "d", "e", "</s>"]),
        tgt_tokens=np.array(["<s>", "e", "d", "c", "b", "a"]),
    )


def make_sweep(root: Path) -> pd.DataFrame:
    """Two tasks; copy has a failed, a diverged, a partly diverged and a missing cell, reverse is complete.

    Returns the ground truth: one row per completed run with the metric values written.
    """
    rng = np.random.default_rng(1234)
    truth = []
    grids = {
        "copy": [
            ("multihead", "sinusoidal"),
            ("multihead", "rope"),
            ("local", "sinusoidal"),
            ("local", "rope"),
            ("hard", "rope"),
        ],  # hard+sinusoidal is the missing cell
        "reverse": [("multihead", "sinusoidal"), ("multihead", "rope"), ("local", "sinusoidal"), ("local", "rope")],
    }
    for task, cells in grids.items():
        for attention, position in cells:
            for seed in range(3):
                run_dir = root / "ablation" / task / f"{attention}-{position}" / f"seed{seed}"
                status = "completed"
                if task == "copy" and (attention, position) == ("hard", "rope"):
                    status = "failed"
                elif task == "copy" and (
                    (attention, position) == ("local", "rope")
                    or ((attention, position) == ("local", "sinusoidal") and seed == 2)
                ):
                    status = "diverged"
                acc_c, loss_c = CENTRES[(attention, position)]
                shift = 0.05 if task == "reverse" else 0.0
                if status == "completed":
                    token_acc = float(np.clip(acc_c - shift + rng.normal(0, 0.02), 0, 1))
                    metrics = {
                        "test/token_acc": token_acc,
                        "test/seq_acc": token_acc**4,
                        "val/loss": float(loss_c + shift + rng.normal(0, 0.05)),
                    }
                    by_length = {}
                    if task == "copy":
                        by_length = {
                            str(n): {
                                "token_acc": float(token_acc * (1 - 0.02 * max(0, n - 12))),
                                "seq_acc": float(token_acc ** (n / 3)),
                            }
                            for n in (4, 8, 12, 16, 24)
                        }
                    truth.append({"task": task, "attention": attention, "position": position, "seed": seed, **metrics})
                    write_csv_log(run_dir, metrics["val/loss"])
                elif status == "diverged":
                    metrics, by_length = {"val/loss": None}, {}
                else:
                    metrics, by_length = {}, {}
                error = {"failed": "RuntimeError: out of memory", "diverged": "loss is nan at step 37"}.get(status)
                write_result(
                    run_dir,
                    result_dict(
                        task,
                        attention,
                        position,
                        seed,
                        status,
                        metrics,
                        by_length,
                        error,
                        train_lengths=[4, 12] if task == "copy" else None,
                    ),
                )
    write_maps(root / "ablation" / "copy" / "multihead-sinusoidal" / "seed0")
    broken = root / "ablation" / "copy" / "broken"
    broken.mkdir(parents=True)
    (broken / "result.json").write_text('{"schema": 1, "run_id": "trunc')  # half-written
    return pd.DataFrame(truth)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    truth = make_sweep(root)
    with pytest.warns(UserWarning, match="broken"):
        html = build_report([root / "ablation"], root / "report")
    return root, truth, html


# ---------------------------------------------------------------- collect


def test_collect_rows_columns_and_corrupt_file_warning(tmp_path):
    truth = make_sweep(tmp_path)
    with pytest.warns(UserWarning, match=r"broken[/\\]result\.json"):
        runs = collect([tmp_path / "ablation"])
    frame = runs.runs
    assert len(frame) == 5 * 3 + 4 * 3  # every run but the truncated file
    assert frame["run_id"].is_unique
    assert dict(frame["status"].value_counts()) == {"completed": len(truth), "diverged": 4, "failed": 3}
    for column in (
        "config.model.d_model",
        "cost.params",
        "cost.peak_memory_mb",
        "env.git_sha",
        "run_dir",
        "started_at",
        "finished_at",
        *METRICS,
    ):
        assert column in frame.columns
    # the in-range and beyond-range aggregates: tests/analysis/report/test_summary.py
    ranged = {m for m in runs.metrics if m.startswith(("test_in_range/", "test_beyond_range/"))}
    assert set(runs.metrics) - ranged == set(METRICS)
    # Values read back equal the values written.
    merged = frame.merge(truth, on=["task", "attention", "position", "seed"], suffixes=("", "_truth"))
    for metric in METRICS:
        np.testing.assert_allclose(merged[metric], merged[f"{metric}_truth"])
    # A null metric (diverged run) reads as NaN, not as a number.
    assert frame.loc[frame["status"] == "diverged", "val/loss"].isna().all()
    # by_length: 5 lengths x 2 metrics for each completed copy run.
    done_copy = truth[truth["task"] == "copy"]
    assert len(runs.by_length) == len(done_copy) * 5 * 2
    assert set(runs.by_length["length"]) == {4, 8, 12, 16, 24}


def test_collect_accepts_glob_patterns_and_rejects_missing_paths(tmp_path):
    make_sweep(tmp_path)
    runs = collect([str(tmp_path / "ablation" / "reverse" / "multihead-*")])
    assert set(runs.runs["position"]) == {"sinusoidal", "rope"}
    assert set(runs.runs["attention"]) == {"multihead"}
    with pytest.raises(CollectError, match="does not exist"):
        collect([tmp_path / "nope"])


def test_learning_curves_are_the_logged_values(tmp_path):
    make_sweep(tmp_path)
    runs = collect([tmp_path / "ablation" / "reverse"])
    curves = learning_curves(runs)
    run_dir = Path(runs.runs.iloc[0]["run_dir"])
    log = pd.read_csv(run_dir / "csv" / "metrics.csv")
    mine = curves[(curves["run_id"] == runs.runs.iloc[0]["run_id"]) & (curves["metric"] == "val/loss")]
    expected = log.dropna(subset=["val/loss"])
    # The sparse rows are gone: only the steps where val/loss was logged remain.
    np.testing.assert_array_equal(mine.sort_values("step")["step"], expected["step"])
    np.testing.assert_allclose(mine.sort_values("step")["value"], expected["val/loss"])
    assert set(curves["metric"]) == {"train/loss", "val/loss"}


# ---------------------------------------------------------------- stats


def test_holm_on_known_p_values():
    # Sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.02, 0.03, 0.06, 0.06
    adjusted = inference.holm([0.01, 0.04, 0.03, 0.005, math.nan])
    np.testing.assert_allclose(adjusted[:4], [0.03, 0.06, 0.06, 0.02])
    assert math.isnan(adjusted[4])
    np.testing.assert_allclose(inference.holm([0.5, 0.9]), [1.0, 1.0])  # capped at one
    assert len(inference.holm([])) == 0


def test_mean_ci_is_the_scipy_t_interval():
    values = [0.81, 0.79, 0.86, 0.83]
    mean, half, n = inference.mean_ci(values)
    low, high = sps.t.interval(0.95, df=3, loc=np.mean(values), scale=sps.sem(values))
    assert n == 4
    assert mean - half == pytest.approx(low) and mean + half == pytest.approx(high)
    one_mean, one_half, one_n = inference.mean_ci([0.5])
    assert (one_mean, one_n) == (0.5, 1) and math.isnan(one_half)
    assert mean_text(one_mean, one_half, one_n) == "0.500 (n=1)"


# Unequal sizes and variances, where the wrong textbook formulas give other numbers: mean a = 2.625,
# mean b = 5.6, var a = 2.2292, var b = 5.8.
WELCH_A, WELCH_B = [1.0, 2.0, 3.0, 4.5], [3.0, 4.0, 5.0, 7.0, 9.0]


def welch_by_hand(a: list[float], b: list[float]) -> dict[str, float]:
    """Welch's t, Welch-Satterthwaite df, the 95% t-interval of mean(a) - mean(b), and Cohen's d with the
    pooled SD weighted by degrees of freedom, from their formulas."""
    na, nb = len(a), len(b)
    va, vb = np.var(a, ddof=1) / na, np.var(b, ddof=1) / nb  # squared standard errors
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    diff, se = np.mean(a) - np.mean(b), math.sqrt(va + vb)
    half = sps.t.ppf(0.975, df) * se
    pooled = math.sqrt(((na - 1) * np.var(a, ddof=1) + (nb - 1) * np.var(b, ddof=1)) / (na + nb - 2))
    return {
        "df": df,
        "diff": diff,
        "diff_low": diff - half,
        "diff_high": diff + half,
        "t": diff / se,
        "p": 2 * sps.t.sf(abs(diff / se), df),
        "d": diff / pooled,
    }


def test_welch_and_cohens_d():
    by_hand = welch_by_hand(WELCH_A, WELCH_B)
    # The formulas above give these; pinned so that the helper cannot drift with the code it checks.
    assert by_hand["df"] == pytest.approx(6.7036, abs=1e-4)
    assert (by_hand["diff_low"], by_hand["diff_high"]) == pytest.approx((-6.1017, 0.1517), abs=1e-4)
    assert by_hand["d"] == pytest.approx(-1.4398, abs=1e-4)
    test = inference.welch(WELCH_A, WELCH_B)
    for key in ("diff", "diff_low", "diff_high", "t", "p"):
        assert test[key] == pytest.approx(by_hand[key], rel=1e-9), key
    assert inference.cohens_d(WELCH_A, WELCH_B) == pytest.approx(by_hand["d"], rel=1e-9)
    assert inference.cohens_d(WELCH_B, WELCH_A) == pytest.approx(-by_hand["d"], rel=1e-9)
    assert math.isnan(inference.welch([1.0], WELCH_B)["p"])  # one seed: no test


def test_direction_of_metrics():
    assert inference.direction("test/token_acc") == "higher"
    assert inference.direction("test/bleu") == "higher" and inference.direction("test/chrf") == "higher"
    assert inference.direction("val/loss") == "lower" and inference.direction("test/ppl") == "lower"
    assert inference.direction("test/bpc") == "lower"
    assert inference.direction("test/widgets") is None


def test_main_effects_and_interaction(sweep):
    root, truth, _ = sweep
    reverse = truth[truth["task"] == "reverse"].assign(status="completed")
    rows, cols, interaction, grand = grid_effects.main_effects(reverse, "test/token_acc")
    cells = reverse.groupby(["attention", "position"])["test/token_acc"].mean().unstack()
    pd.testing.assert_series_equal(rows, cells.mean(axis=1), check_names=False)
    pd.testing.assert_series_equal(cols, cells.mean(axis=0), check_names=False)
    assert grand == pytest.approx(cells.to_numpy().mean())
    # Interaction from the cell means computed here, not from the marginals the function returned.
    expected = (
        cells.to_numpy() - cells.to_numpy().mean(1, keepdims=True) - cells.to_numpy().mean(0) + cells.to_numpy().mean()
    )
    np.testing.assert_allclose(interaction.loc[cells.index, cells.columns].to_numpy(), expected, atol=1e-12)


def test_comparisons_use_welch_and_holm(sweep):
    root, truth, html = sweep
    comparisons = pd.read_csv(html.parent / "comparisons.csv")
    metric = "test/token_acc"
    mine = comparisons[(comparisons["task"] == "reverse") & (comparisons["metric"] == metric)]
    reverse = truth[truth["task"] == "reverse"]
    base = reverse[(reverse["attention"] == "multihead") & (reverse["position"] == "sinusoidal")][metric]
    for row in mine.itertuples(index=False):
        cell = reverse[(reverse["attention"] == row.attention) & (reverse["position"] == row.position)][metric]
        assert row.p == pytest.approx(sps.ttest_ind(cell, base, equal_var=False).pvalue)
        assert row.diff == pytest.approx(cell.mean() - base.mean())
        by_hand = welch_by_hand(list(cell), list(base))
        assert (row.diff_low, row.diff_high, row.d) == pytest.approx(
            (by_hand["diff_low"], by_hand["diff_high"], by_hand["d"]), rel=1e-9
        )
    np.testing.assert_allclose(mine["p_holm"], inference.holm(mine["p"].to_numpy()))
    # multihead+rope is far better than the baseline on every task: the test must say so.
    best = mine[(mine["attention"] == "multihead") & (mine["position"] == "rope")].iloc[0]
    assert best["verdict"] == "better" and best["p_holm"] < 0.05


# ---------------------------------------------------------------- report


def test_report_tables_equal_pandas_and_scipy(sweep):
    root, truth, html = sweep
    out = html.parent
    cells = pd.read_csv(out / "cells.csv")
    markdown = (out / "report.md").read_text()
    for metric in METRICS:
        expected = truth.groupby(["task", "attention", "position"])[metric].agg(["mean", "count", "sem"])
        got = cells[cells["metric"] == metric].set_index(["task", "attention", "position"]).sort_index()
        assert list(got.index) == list(expected.index)
        np.testing.assert_allclose(got["mean"], expected["mean"])
        np.testing.assert_array_equal(got["n"], expected["count"])
        tables = {task: md_table(markdown, f"{metric} on {task}:") for task in ("copy", "reverse")}
        for (task, attention, position), row in expected.iterrows():
            low, high = sps.t.interval(0.95, df=row["count"] - 1, loc=row["mean"], scale=row["sem"])
            key = (task, attention, position)
            assert got.loc[key, "ci_low"] == pytest.approx(low) and got.loc[key, "ci_high"] == pytest.approx(high)
            # The Markdown table shows the same numbers in the (attention, position) cell of its task.
            shown = f"{fmt(row['mean'])} ± {fmt((high - low) / 2)} (n={int(row['count'])}"
            assert tables[task][attention][position].lstrip("*").startswith(shown)


def test_report_marks_best_and_bad_cells(sweep):
    root, truth, html = sweep
    markdown = (html.parent / "report.md").read_text()
    table = md_table(markdown, "test/token_acc on copy:")
    assert table["hard"]["sinusoidal"] == "missing"
    assert table["hard"]["rope"] == "failed"
    assert table["local"]["rope"] == "diverged"
    assert "(n=2; 1 diverged)" in table["local"]["sinusoidal"]  # partly diverged cell keeps its count
    starred = [(a, p) for a, row in table.items() for p, cell in row.items() if "★" in cell]
    assert starred == [("multihead", "rope")]  # highest accuracy
    loss = md_table(markdown, "val/loss on copy:")
    assert [(a, p) for a, row in loss.items() for p, cell in row.items() if "★" in cell] == [("multihead", "rope")]
    assert table["multihead"]["rope"].startswith("**")
    # Every file the report promises exists, and the failing runs are listed with their errors.
    for name in ("report.md", "report.html", "results.csv"):
        assert (html.parent / name).is_file()
    assert "RuntimeError: out of memory" in markdown and "loss is nan at step 37" in markdown
    results = pd.read_csv(html.parent / "results.csv")
    assert len(results) == 27 and json.loads(results.loc[0, "overrides"])[0].startswith("task=")


def test_report_figures_and_sections(sweep):
    root, truth, html = sweep
    out = html.parent
    pngs = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert sum(name.startswith("length_copy") for name in pngs) == 2  # token_acc and seq_acc
    assert not any(name.startswith("length_reverse") for name in pngs)  # reverse has no by_length
    assert sum(name.startswith("curves_") for name in pngs) == 2
    assert sum(name.startswith("maps_") for name in pngs) == 1
    text = html.read_text()
    assert text.count('<img src="data:image/png;base64,') == len(pngs)
    for title in (
        "Main effects and interaction",
        "Comparisons with multihead+sinusoidal",
        "Cost — copy",
        "Provenance",
        "0123456789abcdef",
        "lightning",
    ):
        assert title in text


def assert_self_contained(text: str) -> None:
    lowered = text.lower()
    for forbidden in ("http://", "https://", 'src="/', "<link", "<script src", "@import", "url("):
        assert forbidden not in lowered, forbidden


def test_html_is_self_contained(sweep):
    root, truth, html = sweep
    assert_self_contained(html.read_text())


def test_hostile_names_are_escaped(tmp_path):
    sweep = tmp_path / "sweep"
    for seed in range(2):
        for attention in ("multihead", HOSTILE):
            metrics = {"test/token_acc": 0.5 + 0.1 * seed + (0.1 if attention == HOSTILE else 0.0)}
            write_result(
                sweep / f"{abs(hash(attention))}-{seed}",
                result_dict("copy", attention, "sinusoidal", seed, metrics=metrics),
            )
    write_result(sweep / "bad", result_dict("copy", HOSTILE, "rope", 0, status="failed", error=HOSTILE))
    write_maps(sweep / f"{abs(hash(HOSTILE))}-0")  # its figure name comes from the hostile string
    html = build_report([sweep], tmp_path / "out")
    text = html.read_text()
    assert HOSTILE not in text and "<script" not in text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert_self_contained(text)
    # Markdown: escaped in text and tables; inside fenced code blocks it is literal text already.
    markdown = re.sub(r"```.*?```", "", (html.parent / "report.md").read_text(), flags=re.S)
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown
    figure_names = [p.name for p in (html.parent / "figures").iterdir()]
    assert any(name.startswith("maps_") for name in figure_names)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+\.(png|pdf|svg)", name) for name in figure_names)
    for tex in (html.parent / "latex").glob("*.tex"):  # LaTeX-escaped too: \textless{}script\textgreater{}
        assert "<script>" not in tex.read_text()


def test_bench_false_is_no_benchmark_section_and_a_wrong_type_is_one_line(tmp_path):
    for seed in range(2):
        write_result(tmp_path / "sweep" / f"s{seed}", result_dict("copy", "multihead", "sinusoidal", seed))
    # (a benchmark JSON gives its section: test_benchmark_section)
    off = build_report([tmp_path / "sweep"], tmp_path / "off", bench=False).parent / "report.md"
    assert "# Benchmark" not in off.read_text() and "Benchmark: cost vs sequence length" not in off.read_text()
    with pytest.raises(ReportError, match=r"bench=3 is not allowed"):
        build_report([tmp_path / "sweep"], tmp_path / "bad", bench=3)


def test_one_seed_sweep_claims_no_significance(tmp_path):
    for attention, acc in (("multihead", 0.7), ("local", 0.9)):
        for position in ("sinusoidal", "rope"):
            write_result(
                tmp_path / "sweep" / f"{attention}-{position}",
                result_dict("copy", attention, position, 0, metrics={"test/token_acc": acc}),
            )
    html = build_report([tmp_path / "sweep"], tmp_path / "out")
    assert ONE_SEED_NOTICE in (html.parent / "report.md").read_text()
    assert ONE_SEED_NOTICE in html.read_text()
    assert "(n=1)" in (html.parent / "report.md").read_text()
    assert pd.read_csv(html.parent / "comparisons.csv")["p"].isna().all()


def test_benchmark_section(tmp_path, sweep):
    root, _, _ = sweep
    records = [
        {
            "attention": a,
            "position": "rope",
            "backend": "math",
            "T": t,
            "status": "oom" if (a == "multihead" and t == 4096) else "ok",
            "ms": None if (a == "multihead" and t == 4096) else (t / 256) ** (2 if a == "multihead" else 1),
            "tokens_per_second": 1e5 / t,
            "peak_mb": t / 8.0,
        }
        for a in ("multihead", "local")
        for t in (256, 1024, 4096)
    ]
    bench = {
        "device": "cpu",
        "torch": "2.13.0",
        "records": records,
        "exponents": [
            {"attention": "multihead", "position": "rope", "backend": "math", "exponent": 2.0, "T_range": [256, 1024]}
        ],
    }
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    with pytest.warns(UserWarning):
        html = build_report(
            [root / "ablation" / "reverse", root / "ablation" / "copy" / "broken"],
            tmp_path / "out",
            bench=tmp_path / "bench.json",
        )
    markdown = (html.parent / "report.md").read_text()
    table = md_table(markdown, "Milliseconds per forward+backward step")
    assert table["multihead+rope (math)"]["T=4096"] == "oom"
    assert table["local+rope (math)"]["T=1024"] == fmt(4.0)
    assert "2.000" in md_table(markdown, "Fitted slope")["multihead+rope"]["exponent"]
    assert (html.parent / "figures" / "bench_scaling.png").is_file()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_html_renders_in_headless_chromium(sweep, tmp_path):
    root, _, html = sweep
    png = tmp_path / "shot.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={png}",
            "--window-size=1200,2000",
            html.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    from matplotlib.image import imread

    pixels = imread(png)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert pixels[..., :3].std() > 0.01  # not a blank page


# ---------------------------------------------------------------- W&B


def _offline_run(wandb, base: Path, result: dict, as_json: bool) -> None:
    """As the training app does it: the flat config as W&B config, the result minus config in the summary."""
    run = wandb.init(
        mode="offline",
        dir=base,
        project="attnlab",
        group=result["sweep"],
        tags=[result["task"], result["attention"], result["position"]],
        id=result["run_id"],
        config=result["config"],
        settings=wandb.Settings(console="off", x_disable_stats=True, x_disable_machine_info=True),
    )
    run.log({"train/loss": 1.0}, step=1)
    summary = {k: v for k, v in result.items() if k != "config"}
    run.summary["attnlab_result"] = json.dumps(summary) if as_json else summary
    wandb.finish()


def test_wandb_offline_runs_give_the_result_json_frame(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    wandb = pytest.importorskip("wandb")
    sweep = tmp_path / "sweep"
    cells = [("multihead", "sinusoidal", 0), ("multihead", "rope", 0), ("local", "rope", 1)]
    for i, (attention, position, seed) in enumerate(cells):
        result = result_dict(
            "copy",
            attention,
            position,
            seed,
            sweep="wb-sweep",
            train_lengths=[4, 12],
            metrics={"test/token_acc": 0.5 + 0.1 * i, "val/loss": 1.0 - 0.1 * i},
            by_length={"8": {"token_acc": 0.9 - 0.1 * i}, "16": {"token_acc": 0.5}},
        )
        run_dir = sweep / f"run{i}"
        write_result(run_dir, result)
        _offline_run(wandb, run_dir, result, as_json=(i == 1))  # one summary holds a JSON string
    # finish() returns before W&B's service has written the logs out; stopping the service flushes them.
    wandb.teardown()
    from_files = collect([sweep])
    from_wandb = collect_wandb_offline([sweep])
    key = ["run_id", "sweep", "status", "task", "attention", "position", "seed", "arch", "run_dir"]
    config_columns = sorted(c for c in from_files.runs.columns if c.startswith("config."))
    assert config_columns == sorted(c for c in from_wandb.runs.columns if c.startswith("config."))
    columns = key + ["test/token_acc", "val/loss", "cost.params", "env.git_sha", *config_columns]
    pd.testing.assert_frame_equal(from_wandb.runs[columns], from_files.runs[columns])
    pd.testing.assert_frame_equal(from_wandb.by_length, from_files.by_length)

    offline_dir = next((sweep / "run0" / "wandb").glob("offline-run-*"))
    info = read_wandb_offline_run(offline_dir)
    assert info["id"] == "copy-multihead-sinusoidal-s0"
    assert info["group"] == "wb-sweep" and info["tags"] == ["copy", "multihead", "sinusoidal"]
    assert info["config"] == result_dict("copy", "multihead", "sinusoidal", 0)["config"]
    assert info["history"][0]["train/loss"] == 1 and info["finished"]

    # A log cut short (a killed run) keeps the records before the cut and warns; the result is lost.
    log = next(offline_dir.glob("run-*.wandb"))
    log.write_bytes(log.read_bytes()[: log.stat().st_size // 3])
    with pytest.warns(UserWarning, match="cut short|checksum"):
        partial = read_wandb_offline_run(offline_dir)
    assert partial["group"] == "wb-sweep" and not partial["finished"]
    with pytest.warns(UserWarning) as caught:
        assert len(collect_wandb_offline([sweep])) == 2
    assert any("attnlab_result" in str(w.message) and "offline-run" in str(w.message) for w in caught)


def test_wandb_api_rejects_bad_arguments():
    with pytest.raises(CollectError, match="project"):
        collect_wandb_api("")
    with pytest.raises(CollectError, match="project"):
        collect_wandb_api("team/attnlab")
    with pytest.raises(CollectError, match="filters"):
        collect_wandb_api("attnlab", filters=["group"])


# ---------------------------------------------------------------- bad input


def run_main(argv: list[str], capsys) -> tuple[int, list[str]]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert not any("Traceback" in line for line in err)
    return code, err


def test_empty_directory_exits_2_with_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, err = run_main([tmp_path / "empty", "--out", tmp_path / "out"], capsys)
    assert code == 2 and len(err) == 1 and "no readable result.json" in err[0]
    assert not (tmp_path / "out" / "report.html").exists()


def test_missing_path_exits_2(tmp_path, capsys):
    code, err = run_main([tmp_path / "nowhere", "--out", tmp_path / "out"], capsys)
    assert code == 2 and len(err) == 1 and "does not exist" in err[0]


def test_unknown_baseline_exits_2(tmp_path, capsys):
    write_result(tmp_path / "s" / "a", result_dict("copy", "multihead", "rope", 0, metrics={"test/token_acc": 0.5}))
    code, err = run_main([tmp_path / "s", "--out", tmp_path / "out", "--baseline", "soft+alibi"], capsys)
    assert code == 2 and len(err) == 1 and "soft+alibi" in err[0] and "multihead+rope" in err[0]
    code, err = run_main([tmp_path / "s", "--out", tmp_path / "out", "--baseline", "soft"], capsys)
    assert code == 2 and "ATTENTION+POSITION" in err[0]


def test_no_common_metric_exits_2(tmp_path, capsys):
    write_result(tmp_path / "s" / "a", result_dict("copy", "multihead", "rope", 0, metrics={"test/token_acc": 0.5}))
    write_result(tmp_path / "s" / "b", result_dict("translation", "multihead", "rope", 0, metrics={"test/bleu": 20.0}))
    code, err = run_main([tmp_path / "s", "--out", tmp_path / "out"], capsys)
    assert code == 2 and len(err) == 1 and "test/token_acc" in err[0] and "test/bleu" in err[0]
    # Naming the metrics is the way out: each task reports what it has.
    code, _ = run_main([tmp_path / "s", "--out", tmp_path / "out", "--metrics", "test/bleu", "test/token_acc"], capsys)
    assert code == 0
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "Task translation reports no test/token_acc" in markdown


def test_partial_sweep_still_reports(tmp_path):
    write_result(tmp_path / "s" / "a", result_dict("copy", "multihead", "sinusoidal", 0, status="failed", error="boom"))
    html = build_report([tmp_path / "s"], tmp_path / "out")
    markdown = (html.parent / "report.md").read_text()
    assert "failed ×1" in markdown and "boom" in markdown


def test_report_error_is_a_value_error(tmp_path):
    assert issubclass(ReportError, ValueError)
    with pytest.raises(ReportError, match="ATTENTION\\+POSITION"):
        build_report([tmp_path], tmp_path / "out", baseline="nonsense")


# ---------------------------------------------------------------- statistics on hand-computed values


def test_report_comparison_columns_on_unequal_samples(tmp_path):
    """The report's comparisons.csv carries Welch's 95% interval and Cohen's d of unequal samples."""
    cells = {("multihead", "sinusoidal"): WELCH_B, ("local", "rope"): WELCH_A}  # baseline: 5 seeds, other: 4
    for (attention, position), values in cells.items():
        for seed, value in enumerate(values):
            write_result(
                tmp_path / "sweep" / f"{attention}-{position}-{seed}",
                result_dict("copy", attention, position, seed, metrics={"val/loss": value}),
            )
    html = build_report([tmp_path / "sweep"], tmp_path / "out", baseline="multihead+sinusoidal")
    row = pd.read_csv(html.parent / "comparisons.csv").set_index(["attention", "position"]).loc[("local", "rope")]
    assert (row["n"], row["baseline_n"]) == (4, 5)
    assert row["diff"] == pytest.approx(-2.975, abs=1e-12)
    assert (row["diff_low"], row["diff_high"]) == pytest.approx((-6.1017, 0.1517), abs=1e-4)
    assert row["d"] == pytest.approx(-1.4398, abs=1e-4)
    assert row["p"] == pytest.approx(0.0591, abs=1e-4)
    assert row["verdict"] == "n.s."  # the interval holds zero


# Attention (rows) x position (columns) cell means; by hand: row means 4, 6; column means 2, 5, 8; grand 5.
GRID = {
    ("hard", "alibi"): 1.0,
    ("hard", "rope"): 3.0,
    ("hard", "t5"): 8.0,
    ("soft", "alibi"): 3.0,
    ("soft", "rope"): 7.0,
    ("soft", "t5"): 8.0,
}


# Unequal seed counts: a cell counts once, however many seeds it has.
SEEDS = {("hard", "t5"): 4, ("soft", "alibi"): 6}


def grid_runs(grid: dict[tuple[str, str], float]) -> pd.DataFrame:
    """Seeds spread symmetrically around each cell mean, so only the cell means matter."""
    return pd.DataFrame(
        [
            {
                "task": "copy",
                "attention": a,
                "position": p,
                "seed": s,
                "status": "completed",
                "val/loss": value + (0.5 if s % 2 else -0.5),
            }
            for (a, p), value in grid.items()
            for s in range(SEEDS.get((a, p), 2))
        ]
    )


def test_interaction_on_a_hand_computed_grid():
    rows, cols, interaction, grand = grid_effects.main_effects(grid_runs(GRID), "val/loss")
    assert dict(rows) == pytest.approx({"hard": 4.0, "soft": 6.0})
    assert dict(cols) == pytest.approx({"alibi": 2.0, "rope": 5.0, "t5": 8.0})
    assert grand == pytest.approx(5.0)
    # cell - row mean - column mean + grand mean, e.g. hard+t5: 8 - 4 - 8 + 5 = 1
    want = pd.DataFrame([[0.0, -1.0, 1.0], [0.0, 1.0, -1.0]], index=["hard", "soft"], columns=["alibi", "rope", "t5"])
    np.testing.assert_allclose(interaction.loc[want.index, want.columns].to_numpy(), want.to_numpy())


def test_interaction_with_a_missing_cell():
    """soft+t5 missing: marginals and grand mean are over the five cells present, the missing one is NaN."""
    grid = {cell: value for cell, value in GRID.items() if cell != ("soft", "t5")}
    runs = grid_runs(grid)
    # A failed run of the missing cell is listed but counts nowhere.
    runs = pd.concat(
        [
            runs,
            pd.DataFrame(
                [
                    {
                        "task": "copy",
                        "attention": "soft",
                        "position": "t5",
                        "seed": 0,
                        "status": "failed",
                        "val/loss": math.nan,
                    }
                ]
            ),
        ],
        ignore_index=True,
    )
    rows, cols, interaction, grand = grid_effects.main_effects(
        runs, "val/loss", attentions=["hard", "soft"], positions=["alibi", "rope", "t5"]
    )
    # By hand: rows hard (1+3+8)/3 = 4, soft (3+7)/2 = 5; columns 2, 5, 8; grand (1+3+8+3+7)/5 = 4.4
    # (the mean of the row means would be 4.5, of the column means 5); e.g. soft+alibi: 3 - 5 - 2 + 4.4 = 0.4.
    assert dict(rows) == pytest.approx({"hard": 4.0, "soft": 5.0})
    assert dict(cols) == pytest.approx({"alibi": 2.0, "rope": 5.0, "t5": 8.0})
    assert grand == pytest.approx(4.4)
    want = pd.DataFrame(
        [[-0.6, -1.6, 0.4], [0.4, 1.4, math.nan]], index=["hard", "soft"], columns=["alibi", "rope", "t5"]
    )
    np.testing.assert_allclose(interaction.loc[want.index, want.columns].to_numpy(), want.to_numpy())
