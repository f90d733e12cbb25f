"""The summary at the top of the report: in-range and beyond-range aggregates, the ranking, the ties with the best.

Fixture cells are good in range and bad beyond it, or the reverse, with unequal
seed counts; every expected number is computed here from the fixture's own
values with numpy, scipy (Welch) and statsmodels (Holm), never by the code under
test.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from analysis.data.collect import collect
from analysis.report.build import build_report
from analysis.report.front.summary_text import summary_section
from analysis.report.plan.summary import summarise_task
from tests.helpers.results import result_dict, write_result

TRAIN = [2, 12]
IN_LENGTHS, BEYOND_LENGTHS, BELOW = (8, 12), (16, 24), 1
# (in-range centre, beyond-range centre, seeds): A learns the lengths it saw and fails past them, B the reverse;
# C is close to A in range, D close to B beyond it.
CELLS = {
    ("multihead", "learned"): (0.95, 0.20, 3),
    ("multihead", "relative"): (0.78, 0.80, 4),
    ("soft", "rope"): (0.94, 0.30, 3),
    ("local", "alibi"): (0.60, 0.73, 5),
}
ALPHA = 0.05


def labelled(truth: pd.DataFrame, root: Path) -> pd.DataFrame:
    """The truth with each run's cell label as the report names it (the label's wording is not under test here)."""
    runs = collect([root]).runs
    names = {(a, p): lab for a, p, lab in zip(runs["attention"], runs["position"], runs["cell_label"])}
    return truth.assign(label=[names[a, p] for a, p in zip(truth["attention"], truth["position"])])


def write_sweep(root: Path, seeds_scale: int = 1) -> pd.DataFrame:
    """Result files of the fixture cells; returns the per-run truth (in/beyond means and the all-lengths value)."""
    rng = np.random.default_rng(7)
    truth = []
    for (attention, position), (inside, beyond, seeds) in CELLS.items():
        for seed in range(seeds if seeds_scale else 1):
            values = {n: inside + rng.normal(0, 0.02) for n in IN_LENGTHS}
            values |= {n: beyond + rng.normal(0, 0.05) for n in BEYOND_LENGTHS}
            values[BELOW] = 0.0  # below the training range: in neither aggregate
            # The all-lengths value, weighted by tokens: A and B get nearly the same one.
            weights = {n: float(n) for n in values}
            overall = sum(values[n] * weights[n] for n in values) / sum(weights.values())
            by_length = {str(n): {"token_acc": v, "seq_acc": v / 2} for n, v in values.items()}
            result = result_dict(
                "copy",
                attention,
                position,
                seed,
                train_lengths=TRAIN,
                by_length=by_length,
                metrics={"test/token_acc": overall, "val/loss": 1.0 - inside},
            )
            write_result(root / f"{attention}-{position}-{seed}", result)
            truth.append(
                {
                    "attention": attention,
                    "position": position,
                    "seed": seed,
                    "in": np.mean([values[n] for n in IN_LENGTHS]),
                    "beyond": np.mean([values[n] for n in BEYOND_LENGTHS]),
                    "overall": overall,
                }
            )
    return labelled(pd.DataFrame(truth), root)


def expected_ties(truth: pd.DataFrame, column: str) -> tuple[str, set[str], dict[str, float]]:
    """The best cell, the cells not significantly different from it and their corrected p-values:
    Welch against the best by scipy, Holm by statsmodels."""
    samples = {label: g[column].to_numpy() for label, g in truth.groupby("label")}
    best = max(samples, key=lambda k: samples[k].mean())
    others = [k for k in samples if k != best]
    pvalues = [sps.ttest_ind(samples[k], samples[best], equal_var=False).pvalue for k in others]
    reject, corrected, _, _ = multipletests(pvalues, alpha=ALPHA, method="holm")
    return best, {k for k, r in zip(others, reject) if not r}, dict(zip(others, corrected))


@pytest.fixture(scope="session")
def report(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """The fixture sweep's report folder and truth (shared with tests/analysis/report/test_report_browser.py)."""
    root = tmp_path_factory.mktemp("sweep")
    truth = write_sweep(root / "runs")
    build_report([root / "runs"], root / "report")
    return root / "report", truth


def summary_text(markdown: str) -> str:
    """The Markdown between the first summary heading and the overview."""
    start = markdown.index("## Summary")
    return markdown[start : markdown.index("## Overview")]


def test_range_aggregates_in_collect_and_results_csv(report):
    out, truth = report
    runs = collect([out.parent / "runs"]).runs
    merged = runs.merge(truth, on=["attention", "position", "seed"])
    assert len(merged) == len(truth)
    np.testing.assert_allclose(merged["test_in_range/token_acc"], merged["in"], rtol=1e-12)
    np.testing.assert_allclose(merged["test_beyond_range/token_acc"], merged["beyond"], rtol=1e-12)
    np.testing.assert_allclose(merged["test/token_acc"], merged["overall"], rtol=1e-12)  # still there
    csv = pd.read_csv(out / "results.csv").merge(truth, on=["attention", "position", "seed"])
    np.testing.assert_allclose(csv["test_beyond_range/seq_acc"], csv["beyond"] / 2, rtol=1e-9)


def test_summary_ranks_in_range_and_beyond_apart(report):
    out, truth = report
    table = pd.read_csv(out / "summary.csv")
    for scope, column in (("in range", "in"), ("beyond range", "beyond")):
        rows = table[table["scope"] == scope]
        means = truth.groupby("label")[column].mean()
        expected_order = list(means.sort_values(ascending=False).index)
        assert rows.sort_values("rank")["label"].tolist() == expected_order
        np.testing.assert_allclose(
            rows.set_index("label").loc[expected_order, "mean"],
            means.sort_values(ascending=False).to_numpy(),
            rtol=1e-12,
        )
    first = {s: table[(table["scope"] == s) & (table["rank"] == 1)]["label"].item() for s in table["scope"]}
    name = dict(zip(zip(truth["attention"], truth["position"]), truth["label"]))
    assert first == {"in range": name["multihead", "learned"], "beyond range": name["multihead", "relative"]}
    # Rows of the Markdown table: the beyond-range winner first, the in-range winner ranked low beyond range.
    rows = [line for line in summary_text((out / "report.md").read_text()).splitlines() if line.startswith("| ")]
    assert rows[1].startswith(f"| {name['multihead', 'relative']} |") and "#1" in rows[1].split("|")[3]
    learned = next(r for r in rows if r.startswith(f"| {name['multihead', 'learned']} |")).split("|")
    assert "#1" in learned[2] and "#4" in learned[3]


def test_ties_with_the_best_follow_holm_corrected_welch(report):
    out, truth = report
    table = pd.read_csv(out / "summary.csv")
    markdown = summary_text((out / "report.md").read_text())
    lines = {line.split("|")[1].strip(): line.split("|") for line in markdown.splitlines() if line.startswith("| ")}
    for scope, column, index in (("in range", "in", 2), ("beyond range", "beyond", 3)):
        best, ties, corrected = expected_ties(truth, column)
        rows = table[table["scope"] == scope].set_index("label")
        np.testing.assert_allclose(rows.loc[list(corrected), "p_holm"], list(corrected.values()), rtol=1e-9)
        assert set(rows.index[rows["tie"]]) == ties
        assert rows.loc[best, "best"] and not rows.loc[best, "tie"]
        assert set(rows.index[rows["worse"]]) == set(rows.index) - ties - {best}
        for label in rows.index:
            assert ("≈" in lines[label][index]) == (label in ties), (scope, label)
            assert ("★" in lines[label][index]) == (label == best), (scope, label)
        assert ties, "the fixture is meant to have a tie in each column"
    assert re.search(r"Welch's t-test against the best cell, Holm-corrected", markdown)


def test_all_lengths_average_is_no_headline(report):
    out, _ = report
    markdown = (out / "report.md").read_text()
    summary = summary_text(markdown)
    assert "test/token_acc" not in summary and "token_acc in range" in summary
    headings = re.findall(r"^### .*$", markdown, flags=re.M)
    first_metric = next(h for h in headings if re.match(r"### copy — ", h))
    assert "test_in_range/token_acc" in first_metric
    assert markdown.index("## Summary") < markdown.index("## Overview") < markdown.index("## Details")
    html = (out / "report.html").read_text()
    assert html.index('class="lead"') < html.index("<nav>") < html.index("<details")


def test_one_seed_says_no_test_and_collapses_comparisons(tmp_path):
    write_sweep(tmp_path / "runs", seeds_scale=0)
    build_report([tmp_path / "runs"], tmp_path / "report", baseline="multihead+learned")
    markdown = (tmp_path / "report" / "report.md").read_text()
    summary = summary_text(markdown)
    assert "no test is possible" in summary and "≈" not in summary
    assert "untested" not in markdown  # no table of empty verdicts
    comparisons = re.findall(r"^#### Comparisons with .*$", markdown, flags=re.M)
    assert comparisons and markdown.count("No comparison with") == len(comparisons)


def test_tasks_without_beyond_range_or_lengths(tmp_path):
    rng = np.random.default_rng(3)
    lm_truth, mt_truth = {}, {}
    for position, centre in (("rope", 1.9), ("alibi", 2.2)):
        for seed in range(3):
            # A character LM trains on one context (64) and is evaluated at longer ones; bpc: lower is better.
            per = {64: centre + rng.normal(0, 0.05), 128: centre + 0.3 + rng.normal(0, 0.05), 256: centre + 0.8}
            lm = result_dict(
                "charlm",
                "multihead",
                position,
                seed,
                train_lengths=[64, 64],
                by_length={str(n): {"bpc": v, "loss": v * np.log(2)} for n, v in per.items()},
                metrics={"test/bpc": np.mean(list(per.values()))},
            )
            write_result(tmp_path / "runs" / f"lm-{position}-{seed}", lm)
            lm_truth.setdefault(position, []).append((per[64], (per[128] + per[256]) / 2))
            bleu = 20.0 + (5 if position == "alibi" else 0) + rng.normal(0, 1)
            mt = result_dict("translation", "multihead", position, seed, metrics={"test/bleu": bleu})
            write_result(tmp_path / "runs" / f"mt-{position}-{seed}", mt)
            mt_truth.setdefault(position, []).append(bleu)
    runs = collect([tmp_path / "runs"])
    label = {(t, p): lab for t, p, lab in zip(runs.runs["task"], runs.runs["position"], runs.runs["cell_label"])}
    lm = summarise_task(runs.runs, runs.by_length, "charlm")
    assert lm.main == "bpc" and [c.title for c in lm.columns] == ["in range", "beyond range"]
    for column, index in zip(lm.columns, (0, 1)):
        expected = {p: np.mean([v[index] for v in vals]) for p, vals in lm_truth.items()}
        got = dict(zip(column.ranking["label"], column.ranking["mean"]))
        assert got == pytest.approx({label["charlm", p]: v for p, v in expected.items()}, rel=1e-12)
        assert column.ranking.iloc[0]["label"] == label["charlm", min(expected, key=expected.get)]  # lower first
    mt = summarise_task(runs.runs, runs.by_length, "translation")
    assert [c.metric for c in mt.columns] == ["test/bleu"]
    best_bleu = max(mt_truth, key=lambda p: np.mean(mt_truth[p]))
    assert mt.columns[0].ranking.iloc[0]["label"] == label["translation", best_bleu]
    assert any("whole test set" in note for note in mt.notes)


def tie_sweep(root: Path, values: dict[str, list[float]]) -> None:
    """One copy-task cell per attention type, ``values`` its seeds' token accuracy at every evaluation length."""
    for attention, seeds in values.items():
        for seed, value in enumerate(seeds):
            by_length = {str(n): {"token_acc": value} for n in (*IN_LENGTHS, *BEYOND_LENGTHS)}
            result = result_dict(
                "copy", attention, "rope", seed, train_lengths=TRAIN, by_length=by_length, metrics={"val/loss": 1.0}
            )
            write_result(root / f"{attention}-{seed}", result)


def test_a_tie_names_no_winner(tmp_path):
    """Every cell at 0.000 ± 0.000: equal means share the best rank, and the answer names no cell as best."""
    tie_sweep(tmp_path / "runs", {a: [0.0, 0.0, 0.0] for a in ("local", "multihead", "soft")})
    out = build_report([tmp_path / "runs"], tmp_path / "report", paper_files=False)
    summary = summary_text(out.with_name("report.md").read_text())
    answer = summary.splitlines()[2]
    assert "is best" not in answer and answer.count("no winner") == 2, answer  # in range and beyond
    assert all(label in answer for label in ("attention=local", "attention=multihead", "attention=soft"))
    rows = [line.split("|") for line in summary.splitlines() if line.startswith("| attention=")]
    assert len(rows) == 3 and all("#1" in r[2] and "★" in r[2] and "≈" not in r[2] for r in rows)
    table = pd.read_csv(tmp_path / "report" / "summary.csv")
    assert table["best"].all() and (table["rank"] == 1).all()


def test_a_best_mean_within_noise_names_no_winner(tmp_path):
    """Different means, none significantly better than another (Welch by scipy): the best mean is said to be only
    that; a clear gap (every other cell significantly worse) still names the winner."""
    noisy = {"local": [0.50, 0.62, 0.41], "multihead": [0.55, 0.38, 0.52]}
    tie_sweep(tmp_path / "noisy", noisy)
    assert sps.ttest_ind(noisy["local"], noisy["multihead"], equal_var=False).pvalue > ALPHA
    runs = collect([tmp_path / "noisy"])
    answer = summary_section(summarise_task(runs.runs, runs.by_length, "copy"), None).blocks[0].text
    assert "is best" not in answer and answer.count("no winner; attention=local has the best mean (0.510)") == 2
    clear = {"local": [0.90, 0.91, 0.92], "multihead": [0.50, 0.52, 0.51]}
    tie_sweep(tmp_path / "clear", clear)
    assert sps.ttest_ind(clear["local"], clear["multihead"], equal_var=False).pvalue < ALPHA
    runs = collect([tmp_path / "clear"])
    answer = summary_section(summarise_task(runs.runs, runs.by_length, "copy"), None).blocks[0].text
    assert answer.count("attention=local is best (0.910)") == 2 and "no winner" not in answer
