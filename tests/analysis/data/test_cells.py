"""Cells are configurations: cell ids, factor discovery, budget keys and duplicate runs, against pandas."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.data.cells import assign_cells
from analysis.data.collect import collect
from analysis.report.plan.layout import asked_factors
from tests.helpers.cell_fixtures import flat_config, result, write

# What this test takes as not changing the computation, spelled out independently of analysis.data.cells.
NOISE = [
    "name",
    "num_threads",
    "resume",
    "logger.wandb.mode",
    "logger.wandb.tags",
    "progress_bar",
    "trainer.log_every_n_steps",
    "checkpoint_every_n_steps",
    "eval.attention_maps",
    "fail_at_step",
]


def sweep(root, specs) -> pd.DataFrame:
    """Write one result per (run_id, task, attention, position, seed, changes); return the configs as a frame."""
    configs = []
    for run_id, task, attention, position, seed, changes in specs:
        config = flat_config(task, attention, position, seed, **changes)
        write(root / run_id, result(run_id, config, {"test/token_acc": 0.5}))
        configs.append({"run_id": run_id, **{k: repr(v) for k, v in config.items()}})
    return pd.DataFrame(configs)


def expected_partition(configs: pd.DataFrame) -> set[frozenset]:
    """Runs grouped by every config key but the seed and the noise (missing keys grouped as one value)."""
    keys = [c for c in configs.columns if c not in ("run_id", "seed", *NOISE)]
    groups = configs.fillna("<missing>").groupby(keys, dropna=False)["run_id"]
    return {frozenset(ids) for _, ids in groups}


def partition(runs: pd.DataFrame) -> set[frozenset]:
    return {frozenset(ids) for _, ids in runs.groupby("cell")["run_id"]}


def test_cells_are_configurations_minus_seed_and_noise(tmp_path):
    noisy = {
        "num_threads": 2,
        "logger.wandb.mode": "online",
        "name": "other",
        "progress_bar": True,
        "trainer.log_every_n_steps": 5,
        "eval.attention_maps": False,
    }
    specs = [
        (f"local-w{w}-s{s}", "reverse", "local", "relative", s, {"attention.window": w}) for w in (4, 8) for s in (0, 1)
    ]
    specs += [(f"mh-s{s}", "reverse", "multihead", "relative", s, {}) for s in (0, 1)]
    specs += [
        ("local-w4-s2-noisy", "reverse", "local", "relative", 2, {"attention.window": 4, **noisy}),
        ("local-w4-lr", "reverse", "local", "relative", 0, {"attention.window": 4, "optim.lr": 0.01}),
    ]
    configs = sweep(tmp_path, specs)
    runs = collect([tmp_path])
    assert partition(runs.runs) == expected_partition(configs)
    assert runs.runs["cell"].nunique() == 4  # window 4 (3 seeds), window 8, multihead, window 4 at lr 0.01
    assert runs.factors == ["attention", "attention.window", "optim.lr"]
    by_id = runs.runs.set_index("run_id")
    assert by_id.loc["local-w4-s2-noisy", "cell"] == by_id.loc["local-w4-s0", "cell"]
    assert by_id.loc["local-w4-s0", "cell_label"] == "attention=local, attention.window=4, optim.lr=0.003"
    assert by_id.loc["mh-s0", "cell_label"] == "attention=multihead, optim.lr=0.003"
    assert pd.isna(by_id.loc["mh-s0", "attention.window"])  # window does not exist for multihead
    assert by_id.loc["local-w8-s1", "attention.window"] == 8
    # The frame a user gets groups the way the report does: seeds per cell.
    seeds = runs.runs.groupby("cell_label")["seed"].nunique().to_dict()
    assert seeds["attention=local, attention.window=4, optim.lr=0.003"] == 3


def test_subfactor_fixed_by_its_group_is_not_a_factor(tmp_path):
    # relative has max_distance 16 and t5 128: part of what each encoding is, not a factor.
    specs = [(f"{p}-s{s}", "copy", "multihead", p, s, {}) for p in ("relative", "t5") for s in (0, 1)]
    configs = sweep(tmp_path / "a", specs)
    runs = collect([tmp_path / "a"])
    assert runs.factors == ["position"]
    assert partition(runs.runs) == expected_partition(configs)
    # Two max_distance values within relative make it a factor: the max_distance sweep.
    specs += [("relative-k0", "copy", "multihead", "relative", 0, {"position.max_distance": 0})]
    configs = sweep(tmp_path / "b", specs)
    runs = collect([tmp_path / "b"])
    assert runs.factors == ["position", "position.max_distance"]
    assert partition(runs.runs) == expected_partition(configs)
    assert set(runs.runs["cell_label"]) == {
        "position=relative, position.max_distance=16",
        "position=relative, position.max_distance=0",
        "position=t5, position.max_distance=128",
    }


def test_key_missing_in_some_runs_of_one_group_varies(tmp_path):
    specs = [("old", "copy", "local", "rope", 0, {}), ("new", "copy", "local", "rope", 0, {"model.embedding": "gpt2"})]
    configs = sweep(tmp_path, specs)
    runs = collect([tmp_path])
    assert runs.factors == ["model.embedding"]
    assert partition(runs.runs) == expected_partition(configs) and len(partition(runs.runs)) == 2
    assert runs.runs.set_index("run_id").loc["old", "model.embedding"] is None


def test_task_groups_and_is_never_a_factor(tmp_path):
    # lr differs between tasks only: a property of the tasks, no factor; the cells still differ.
    specs = [("copy", "copy", "local", "rope", 0, {}), ("reverse", "reverse", "local", "rope", 0, {"optim.lr": 0.01})]
    configs = sweep(tmp_path / "a", specs)
    runs = collect([tmp_path / "a"])
    assert runs.factors == [] and partition(runs.runs) == expected_partition(configs)
    assert set(runs.runs["cell_label"]) == {"(no varying factor)"}
    specs.append(("copy-lr", "copy", "local", "rope", 0, {"optim.lr": 0.01}))
    configs = sweep(tmp_path / "b", specs)
    runs = collect([tmp_path / "b"])
    assert runs.factors == ["optim.lr"] and partition(runs.runs) == expected_partition(configs)


def test_budget_keys_separate_cells_but_are_not_designed(tmp_path):
    specs = [
        (f"{attention}-{steps}-{s}", "copy", attention, "rope", s, {"trainer.max_steps": steps})
        for steps in (500, 1000)
        for attention in ("local", "multihead")
        for s in (0, 1)
    ]
    configs = sweep(tmp_path, specs)
    runs = collect([tmp_path])
    assert runs.factors == ["attention", "trainer.max_steps"]  # budget keys come last
    assert partition(runs.runs) == expected_partition(configs) and runs.runs["cell"].nunique() == 4
    # the report's rule (analysis.report.plan.layout.asked_factors): budget keys are factors only when asked for
    assert asked_factors(runs.runs, runs.factors, None) == ["attention"]
    assert asked_factors(runs.runs, runs.factors, ["trainer.max_steps", "attention"]) == [
        "attention",
        "trainer.max_steps",
    ]


def test_assign_cells_does_not_modify_its_input(tmp_path):
    sweep(tmp_path, [("a", "copy", "local", "rope", 0, {}), ("b", "copy", "local", "rope", 1, {})])
    frame = collect([tmp_path]).runs.drop(columns=["cell", "cell_label"])
    before = frame.copy()
    out, factors = assign_cells(frame)
    pd.testing.assert_frame_equal(frame, before)
    assert factors == [] and out["cell"].nunique() == 1 and len(out) == 2


def test_same_configuration_and_seed_twice_counts_once(tmp_path):
    config = flat_config("copy", "local", "rope", 0)
    lengths = {"8": {"token_acc": 0.9}, "12": {"token_acc": 0.8}}
    write(tmp_path / "sweep1" / "run", result("run-a", config, {"test/token_acc": 0.7}, by_length=lengths))
    write(tmp_path / "sweep2" / "run", result("run-b", config, {"test/token_acc": 0.7}, by_length=lengths))
    # A failed copy of another run, read before the completed one: the completed run is kept.
    other = flat_config("copy", "local", "rope", 1)
    write(tmp_path / "sweep0" / "run", result("run-c-failed", other, status="failed"))
    write(tmp_path / "sweep3" / "run", result("run-c", other, {"test/token_acc": 0.6}))
    write(
        tmp_path / "sweep3" / "seed2",
        result("run-d", flat_config("copy", "local", "rope", 2), {"test/token_acc": 0.65}),
    )
    with pytest.warns(UserWarning, match="same configuration and seed") as caught:
        runs = collect([tmp_path])
    assert sum("same configuration and seed" in str(w.message) for w in caught) == 2
    assert sorted(runs.runs["run_id"]) == ["run-a", "run-c", "run-d"]
    assert runs.runs["seed"].tolist() == sorted(set(runs.runs["seed"]))  # each seed once
    assert dict(zip(runs.duplicates["run_id"], runs.duplicates["duplicate_of"])) == {
        "run-b": "run-a",
        "run-c-failed": "run-c",
    }
    assert set(runs.by_length["run_id"]) == {"run-a"} and len(runs.by_length) == 2


def test_two_keys_set_from_one_another_are_one_factor(tmp_path):
    """trainer.gradient_clip_val follows optim.grad_clip in every run: one setting, one factor, and a clipping
    sweep is a controlled comparison in it (counted as two, neither differs alone)."""
    specs = [
        (
            f"{attention}-{clip}-{s}",
            "copy",
            attention,
            "rope",
            s,
            {"optim.grad_clip": clip, "trainer.gradient_clip_val": clip},
        )
        for clip in (0.5, 1.0)
        for attention in ("local", "multihead")
        for s in (0, 1)
    ]
    configs = sweep(tmp_path / "linked", specs)
    runs = collect([tmp_path / "linked"])
    assert runs.factors == ["attention", "optim.grad_clip"]
    assert partition(runs.runs) == expected_partition(configs) and runs.runs["cell"].nunique() == 4
    assert asked_factors(runs.runs, runs.factors, None) == ["attention", "optim.grad_clip"]
    shown = {0.5: "0.5", 1.0: "1"}  # an integral float reads as an integer
    assert set(runs.runs["cell_label"]) == {
        f"attention={a}, optim.grad_clip={shown[c]}" for a in ("local", "multihead") for c in (0.5, 1.0)
    }
    # equal in some runs only: two settings, two factors
    unlinked = [
        (*spec[:5], {**spec[5], "trainer.gradient_clip_val": 2.0}) if spec[0].startswith("local-1.0") else spec
        for spec in specs
    ]
    sweep(tmp_path / "unlinked", unlinked)
    assert collect([tmp_path / "unlinked"]).factors == ["attention", "optim.grad_clip", "trainer.gradient_clip_val"]


def test_a_tuned_comparisons_roles_are_cells_of_their_own_and_its_trial_bookkeeping_is_not(tmp_path):
    # hparams_search=tuned: the tuning trial chosen for its validation score and the fresh seeds at the
    # same settings must not pool (the chosen trial would bias the fresh seeds' mean upward).
    best = {"optim.lr": 0.0028}
    specs = [("trial-4", "reverse", "soft", "rope", 0, {**best, "trial.role": "tuning", "trial.number": 4})]
    specs += [(f"tuned-s{s}", "reverse", "soft", "rope", s, {**best, "trial.role": "tuned"}) for s in (100, 101)]
    specs += [
        ("tuned-s102", "reverse", "soft", "rope", 102, {**best, "trial.role": "tuned", "trial.study": "x"}),
        ("plain-s0", "reverse", "soft", "rope", 0, best),
    ]
    sweep(tmp_path, specs)
    by_id = collect([tmp_path]).runs.set_index("run_id")["cell"]
    assert by_id["trial-4"] != by_id["tuned-s100"]
    assert by_id["tuned-s100"] == by_id["tuned-s101"] == by_id["tuned-s102"]  # study name and number: bookkeeping
    assert by_id["plain-s0"] not in {by_id["trial-4"], by_id["tuned-s100"]}
