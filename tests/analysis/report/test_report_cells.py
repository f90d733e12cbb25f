"""The report compares configurations, never pools them: tables, comparisons and confounds against pandas/scipy.

Fixture sweeps differ in a variant parameter (attention.window, only under
local), in budget (trainer.max_steps), in seed, in the environment (torch) and
hold a run twice; every number the report shows is recomputed here from the
values written.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from analysis.report.build import build_report, main
from analysis.report.document.model import fmt
from analysis.stats import inference
from tests.helpers import grid_effects
from tests.helpers.cell_fixtures import flat_config, md_table, result, write

METRIC = "test/token_acc"
# (attention, window, max_steps) -> accuracy centre; window None: multihead has none.
CENTRES = {
    ("local", 4, 1000): 0.70,
    ("local", 8, 1000): 0.80,
    ("multihead", None, 1000): 0.90,
    ("multihead", None, 500): 0.60,
}
OLD_TORCH = {
    "torch": "2.12.0",
    "device": "cpu",
    "git_sha": "abc",
    "python": "3.11.7",
    "packages": {"torch": "2.12.0", "numpy": "2.4.6"},
}


def write_ablation(root) -> pd.DataFrame:
    """Three seeds per cell; local window 8 seed 2 ran on an older torch; one run copied to a second folder."""
    rng = np.random.default_rng(7)
    truth = []
    for (attention, window, steps), centre in CENTRES.items():
        for seed in range(3):
            changes = {"trainer.max_steps": steps, **({"attention.window": window} if window else {})}
            config = flat_config("copy", attention, "rope", seed, **changes)
            value = float(centre + rng.normal(0, 0.03))
            run_id = f"{attention}-{window}-{steps}-s{seed}"
            env = OLD_TORCH if (window == 8 and seed == 2) else None
            lengths = {"8": {"token_acc": value}, "16": {"token_acc": value / 2}}
            write(root / "sweep" / run_id, result(run_id, config, {METRIC: value}, env=env, by_length=lengths))
            truth.append({"attention": attention, "window": window, "steps": steps, "seed": seed, METRIC: value})
    # The same run in another folder under another run id: one run, not a fourth seed.
    first = truth[0]
    copy = result(
        "copied-run", flat_config("copy", "local", "rope", 0, **{"attention.window": 4}), {METRIC: first[METRIC]}
    )
    write(root / "other_sweep" / "copied-run", copy)
    return pd.DataFrame(truth)


def label(attention: str, window, steps) -> str:
    parts = [f"attention={attention}"] + ([f"attention.window={window}"] if window else [])
    return ", ".join(parts + [f"trainer.max_steps={steps}"])


@pytest.fixture(scope="module")
def ablation(tmp_path_factory):
    root = tmp_path_factory.mktemp("ablation")
    truth = write_ablation(root)
    with pytest.warns(UserWarning, match="same configuration and seed"):
        html = build_report(
            [root / "sweep", root / "other_sweep"],
            root / "report",
            baseline="attention=multihead,trainer.max_steps=1000",
        )
    return truth, html.parent


def test_cells_csv_is_one_row_per_configuration(ablation):
    truth, out = ablation
    cells = pd.read_csv(out / "cells.csv")
    cells = cells[cells["metric"] == METRIC]  # not the in/beyond-range aggregates of by_length
    expected = (
        truth.fillna({"window": 0}).groupby(["attention", "window", "steps"])[METRIC].agg(["mean", "count", "sem"])
    )
    assert len(cells) == len(expected) == 4
    labels = {label(a, int(w) or None, s): row for (a, w, s), row in expected.iterrows()}
    got = cells.set_index("cell_label")
    assert set(got.index) == set(labels)
    for name, row in labels.items():
        assert got.loc[name, "n"] == row["count"] == 3  # the copied run is not a fourth seed
        assert got.loc[name, "mean"] == pytest.approx(row["mean"])
        low, high = sps.t.interval(0.95, df=2, loc=row["mean"], scale=row["sem"])
        assert got.loc[name, "ci_low"] == pytest.approx(low) and got.loc[name, "ci_high"] == pytest.approx(high)
    # The factor values ride along, so cells.csv groups like the tables.
    window = got["attention.window"].to_dict()
    assert window[label("local", 8, 1000)] == 8 and pd.isna(window[label("multihead", None, 500)])
    assert got["trainer.max_steps"].to_dict()[label("multihead", None, 500)] == 500


def test_table_rows_are_variants_with_their_parameter_columns_the_budget(ablation):
    truth, out = ablation
    markdown = (out / "report.md").read_text()
    table = md_table(markdown, f"{METRIC} on copy:")
    assert list(table) == ["local (window=4)", "local (window=8)", "multihead"]
    assert list(table["multihead"]) == ["500", "1000"]  # numbers in numeric order
    assert table["local (window=4)"]["500"] == "missing"
    for (attention, window, steps), group in truth.groupby(["attention", "window", "steps"], dropna=False):
        row = f"{attention} (window={int(window)})" if attention == "local" else attention
        mean, sem = group[METRIC].mean(), sps.sem(group[METRIC])
        half = sps.t.ppf(0.975, df=2) * sem
        assert table[row][str(steps)].strip("*★ ").startswith(f"{fmt(mean)} ± {fmt(half)} (n=3")
    assert "Factors that vary in copy: attention, attention.window, trainer.max_steps" in markdown


def test_comparisons_are_welch_per_cell_and_flag_confounds(ablation):
    truth, out = ablation
    comparisons = pd.read_csv(out / "comparisons.csv", keep_default_na=False)
    comparisons = comparisons[comparisons["metric"] == METRIC].set_index("cell_label")
    base = truth[(truth["attention"] == "multihead") & (truth["steps"] == 1000)][METRIC]
    assert set(comparisons["baseline_label"]) == {label("multihead", None, 1000)}
    expected_p = {}
    for (attention, window, steps), group in truth.groupby(["attention", "window", "steps"], dropna=False):
        name = label(attention, None if pd.isna(window) else int(window), steps)
        if name == label("multihead", None, 1000):
            continue
        expected_p[name] = sps.ttest_ind(group[METRIC], base, equal_var=False).pvalue
        assert comparisons.loc[name, "diff"] == pytest.approx(group[METRIC].mean() - base.mean())
    names = list(expected_p)
    np.testing.assert_allclose(comparisons.loc[names, "p"], [expected_p[n] for n in names])
    np.testing.assert_allclose(comparisons.loc[names, "p_holm"], inference.holm([expected_p[n] for n in names]))
    # Budget differs from the baseline: flagged. Window 8 had a seed on another torch: flagged.
    # Window 4 differs from multihead in attention (asked) and window (nested under it): not flagged.
    flags = comparisons["confounds"].to_dict()
    assert flags[label("multihead", None, 500)] == "trainer.max_steps"
    assert set(flags[label("local", 8, 1000)].split(", ")) == {"env.torch", "env.packages.torch"}
    assert flags[label("local", 4, 1000)] == ""
    markdown = (out / "report.md").read_text()
    table = md_table(markdown, f"{METRIC} on copy vs baseline")
    assert table[label("multihead", None, 500)]["confounds"] == "⚠ trainer.max_steps"


def test_confounds_section_names_keys_kinds_and_cells(ablation):
    truth, out = ablation
    confounds = pd.read_csv(out / "confounds.csv").set_index("key")
    assert set(confounds.index) == {"trainer.max_steps", "env.torch", "env.packages.torch"}
    assert confounds.loc["trainer.max_steps", "kind"] == "budget"
    assert confounds.loc["env.torch", "kind"] == "environment"
    assert confounds.loc["trainer.max_steps", "values"] == "1000 (3 cells), 500 (1 cells)"
    assert "varies between the seeds of: " + label("local", 8, 1000) in confounds.loc["env.torch", "cells"]
    markdown = (out / "report.md").read_text()
    assert "## Confounds" in markdown and "copied-run" in markdown  # the duplicate is named in the overview


# ---------------------------------------------------------------- more than two factors


def write_three_factors(root) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    truth = []
    for attention in ("local", "multihead"):
        for position in ("rope", "sinusoidal"):
            for lr in (0.001, 0.01):
                for seed in range(2):
                    value = float(rng.uniform(0.3, 0.9))
                    config = flat_config("copy", attention, position, seed, **{"optim.lr": lr})
                    run_id = f"{attention}-{position}-{lr}-{seed}"
                    write(root / run_id, result(run_id, config, {METRIC: value}))
                    truth.append({"attention": attention, "position": position, "lr": lr, "seed": seed, METRIC: value})
    return pd.DataFrame(truth)


def test_more_than_two_factors_give_one_table_per_combination(tmp_path):
    truth = write_three_factors(tmp_path / "s")
    html = build_report([tmp_path / "s"], tmp_path / "out", baseline="multihead+sinusoidal")
    markdown = (html.parent / "report.md").read_text()
    means = truth.groupby(["lr", "attention", "position"])[METRIC].mean()
    for lr in (0.001, 0.01):
        table = md_table(markdown, f"{METRIC} on copy (optim.lr={lr}):")
        for attention in ("local", "multihead"):
            for position in ("rope", "sinusoidal"):
                assert table[attention][position].strip("*★ ").startswith(fmt(means[(lr, attention, position)]))
    assert f"*{METRIC} on copy:" not in markdown  # no table averaged over the learning rates
    comparisons = pd.read_csv(html.parent / "comparisons.csv")
    comparisons = comparisons[comparisons["metric"] == METRIC]
    assert len(comparisons) == 2 * 3  # three cells against the baseline of each table
    assert set(comparisons["table"]) == {"optim.lr=0.001", "optim.lr=0.01"}
    for _, family in comparisons.groupby("table"):  # Holm within one table
        np.testing.assert_allclose(family["p_holm"], inference.holm(family["p"].to_numpy()))

    # --factors picks the axes; position becomes the per-table key, and is not asked for: a confound.
    html = build_report(
        [tmp_path / "s"],
        tmp_path / "out2",
        factors=["attention", "optim.lr"],
        baseline="attention=multihead,optim.lr=0.001",
    )
    markdown = (html.parent / "report.md").read_text()
    table = md_table(markdown, f"{METRIC} on copy (position=rope):")
    assert list(table["local"]) == ["0.001", "0.01"]
    assert table["local"]["0.01"].startswith(fmt(means[(0.01, "local", "rope")]))
    confounds = pd.read_csv(html.parent / "confounds.csv")
    assert confounds[["key", "kind"]].values.tolist() == [["position", "not asked"]]

    # --where keeps a subset; the factor it fixes no longer varies.
    html = build_report([tmp_path / "s"], tmp_path / "out3", where=["optim.lr=1e-2"])
    markdown = (html.parent / "report.md").read_text()
    assert "Factors that vary in copy: attention, position." in markdown
    table = md_table(markdown, f"{METRIC} on copy:")
    assert table["multihead"]["rope"].strip("*★ ").startswith(fmt(means[(0.01, "multihead", "rope")]))


def test_pooling_by_attention_and_position_is_refused(tmp_path):
    write_three_factors(tmp_path / "s")
    from analysis.data.collect import collect

    runs = collect([tmp_path / "s"]).runs
    with pytest.raises(ValueError, match="several configurations"):
        grid_effects.compare_to_baseline(runs, METRIC, ("multihead", "rope"))
    with pytest.raises(ValueError, match="several configurations"):
        grid_effects.main_effects(runs, METRIC)


def test_bad_factor_options_exit_2_with_one_line(tmp_path, capsys):
    write_three_factors(tmp_path / "s")
    for argv, needle in (
        (["--factors", "optim.lrr"], "optim.lrr"),
        (["--factors", "attention", "position", "optim.lr"], "at most 2"),
        (["--where", "optim.lr=0.5"], "0.001, 0.01"),
        (["--where", "lr"], "KEY=VALUE"),
        (["--baseline", "attention.window=4"], "attention.window"),
    ):
        code = main([str(tmp_path / "s"), "--out", str(tmp_path / "out"), *argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and needle in err[0], (argv, err)


def test_duplicate_folder_does_not_change_the_numbers(tmp_path):
    truth = write_three_factors(tmp_path / "s")
    shutil.copytree(tmp_path / "s" / "local-rope-0.01-0", tmp_path / "s2" / "copy")
    data = pd.read_json(tmp_path / "s2" / "copy" / "result.json", typ="series")
    data["run_id"] = "another-id"
    (tmp_path / "s2" / "copy" / "result.json").write_text(data.to_json())
    with pytest.warns(UserWarning, match="counted once"):
        html = build_report([tmp_path / "s", tmp_path / "s2"], tmp_path / "out")
    cells = pd.read_csv(html.parent / "cells.csv")
    assert (cells["n"] == 2).all() and len(cells) == len(truth) // 2


def test_unasked_parameter_is_flagged_only_between_cells_of_one_variant(ablation, tmp_path):
    out = ablation[1].parent
    with pytest.warns(UserWarning, match="counted once"):
        html = build_report(
            [out / "sweep", out / "other_sweep"],
            tmp_path / "out",
            factors=["attention", "trainer.max_steps"],
            baseline="attention=local,attention.window=4,trainer.max_steps=1000",
        )
    comparisons = pd.read_csv(html.parent / "comparisons.csv", keep_default_na=False)
    flags = comparisons[comparisons["metric"] == METRIC].set_index("cell_label")["confounds"].to_dict()
    # window 8 vs window 4: the same attention, a window nobody asked to compare: flagged.
    assert flags[label("local", 8, 1000)].split(", ")[0] == "attention.window"
    # multihead vs local: the window comes with the attention type asked for: not flagged.
    assert flags[label("multihead", None, 1000)] == ""
    confounds = pd.read_csv(html.parent / "confounds.csv").set_index("key")
    assert confounds.loc["attention.window", "kind"] == "not asked"
    assert "trainer.max_steps" not in confounds.index  # asked for by name


def test_a_learning_rate_changed_in_one_cell_only_is_flagged_not_a_factor(tmp_path):
    # A 2 x 2 grid where local+rope alone ran at another learning rate: no two cells differ in lr alone.
    rng = np.random.default_rng(5)
    truth = []
    for attention in ("local", "multihead"):
        for position in ("rope", "sinusoidal"):
            lr = 0.01 if (attention, position) == ("local", "rope") else 0.001
            for seed in range(2):
                value = float(rng.uniform(0.3, 0.9))
                run_id = f"{attention}-{position}-{seed}"
                config = flat_config("copy", attention, position, seed, **{"optim.lr": lr})
                write(tmp_path / "s" / run_id, result(run_id, config, {METRIC: value}))
                truth.append({"attention": attention, "position": position, "lr": lr, METRIC: value})
    truth = pd.DataFrame(truth)
    html = build_report([tmp_path / "s"], tmp_path / "out", baseline="multihead+sinusoidal")
    markdown = (html.parent / "report.md").read_text()
    table = md_table(markdown, f"{METRIC} on copy:")  # one table, not one per learning rate
    means = truth.groupby(["attention", "position"])[METRIC].mean()
    assert table["local"]["rope"].strip("*★ ").startswith(fmt(means[("local", "rope")]))
    assert table["local"]["rope"].strip("*★ ").endswith("⚠ optim.lr=0.01")
    assert "⚠" not in table["multihead"]["rope"]
    confounds = pd.read_csv(html.parent / "confounds.csv")
    assert confounds[["key", "kind"]].values.tolist() == [["optim.lr", "uncontrolled"]]
    comparisons = pd.read_csv(html.parent / "comparisons.csv", keep_default_na=False)
    flags = dict(zip(zip(comparisons["attention"], comparisons["position"]), comparisons["confounds"]))
    assert flags[("local", "rope")] == "optim.lr"
    assert flags[("local", "sinusoidal")] == "" and flags[("multihead", "rope")] == ""
