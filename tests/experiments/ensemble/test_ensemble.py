"""``ensemble.seeds=N``: each member equals the separate run with its seed, and nothing mixes members.

The reference of every comparison is an ordinary ``experiments.training.single_run.train`` run with the member's
seed, never the ensemble's own numbers: dropout 0, CPU float32, within 1e-4.
"""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L
import pytest
import torch

from experiments.bench.ensemble_equality import compare, differences
from experiments.config.spec import build_spec
from experiments.ensemble import train_ensemble
from experiments.training.single_run import train
from tests.helpers.cases import skip_if_incompatible
from tests.helpers.config import TINY, compose
from variants import ATTENTION, POSITION

TOL = 1e-4
# A few steps over two epochs (a member's order changes per epoch), a clip small enough to act on
# every step (a clip over all members' gradients at once would change every member), dropout 0.
BASE = [
    *TINY,
    "trainer.max_steps=10",
    "trainer.val_check_interval=10",
    "task.train_size=48",
    "model.dropout=0.0",
    "optim.grad_clip=0.05",
    "optim.warmup_steps=2",
]


def ensemble(overrides: list[str], folder: Path, seeds: int = 2, callbacks=None) -> list[dict]:
    overrides = [*overrides, f"ensemble.seeds={seeds}"]
    return train_ensemble(build_spec(compose(overrides)), folder, overrides, callbacks=callbacks)


def separate(overrides: list[str], folder: Path, seed: int) -> dict:
    overrides = [*overrides, f"seed={seed}"]
    return train(build_spec(compose(overrides)), folder / f"separate-{seed}", overrides)


def assert_equal_to_separate(members: list[dict], folder: Path, overrides: list[str], seeds: list[int]) -> None:
    for member, seed in zip(members, seeds):
        alone = separate(overrides, folder, seed)
        assert member["status"] == alone["status"] == "completed", (member.get("error"), alone.get("error"))
        assert member["seed"] == seed and member["config_hash"] == alone["config_hash"]
        assert member["cost"]["steps"] == alone["cost"]["steps"]
        worst = differences(member, alone)
        assert worst and max(worst.values()) <= TOL, {k: v for k, v in worst.items() if v > TOL}


@pytest.mark.parametrize("attention", ATTENTION.names())
def test_members_equal_separate_runs_for_every_attention_type(attention: str, tmp_path: Path) -> None:
    overrides = [*BASE, f"attention={attention}"]
    members = ensemble(overrides, tmp_path / "ensemble")
    if "fallback" in members[0]["ensemble"]:
        pytest.skip(f"attention={attention} declares it cannot train batched: {members[0]['ensemble']['fallback']}")
    # member 1: not the member whose modules lent the batched model its structure
    assert_equal_to_separate(members[1:], tmp_path, overrides, [1])


@pytest.mark.parametrize("position", POSITION.names())
def test_members_equal_separate_runs_for_every_position_encoding(position: str, tmp_path: Path) -> None:
    skip_if_incompatible("multihead", position)
    overrides = [*BASE, "attention=multihead", f"position={position}"]
    members = ensemble(overrides, tmp_path / "ensemble")
    assert "fallback" not in members[0]["ensemble"]
    assert_equal_to_separate(members[1:], tmp_path, overrides, [1])


def test_decoder_only_members_equal_separate_runs(tmp_path: Path) -> None:
    """Decoder-only inputs differ in length per member (prompt + target): padded, still equal."""
    overrides = [*BASE, "model.arch=decoder", "position=rope"]
    assert_equal_to_separate(ensemble(overrides, tmp_path / "ensemble"), tmp_path, overrides, [0, 1])


class PlantNaN(L.Callback):
    """Poison one member's weights before a given step: its loss is NaN from then on."""

    def __init__(self, member: int, step: int) -> None:
        self.member, self.step = member, step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            with torch.no_grad():
                pl_module.stacked[0][self.member].fill_(math.nan)


def test_a_diverging_member_stops_and_the_others_finish_as_alone(tmp_path: Path) -> None:
    members = ensemble(BASE, tmp_path / "ensemble", seeds=3, callbacks=[PlantNaN(member=1, step=4)])
    assert members[1]["status"] == "diverged" and members[1]["diverged_at_step"] == 4
    assert members[1]["cost"]["steps"] == 4 and not members[1]["metrics"]
    assert_equal_to_separate([members[0], members[2]], tmp_path, BASE, [0, 2])


def test_members_are_seeds_of_one_cell_for_the_report(tmp_path: Path) -> None:
    from analysis.collect import collect
    from analysis.data.cells import assign_cells

    members = ensemble(BASE, tmp_path / "sweep" / "ensemble", seeds=2)
    alone = separate(BASE, tmp_path / "sweep", seed=5)  # an ordinary seed of the same cell, beside them
    assert {m["ensemble"]["members"] for m in members} == {2}
    runs, _ = assign_cells(collect([tmp_path / "sweep"]).runs)
    assert len(runs) == 3 and runs["cell"].nunique() == 1
    assert sorted(runs["seed"]) == [0, 1, 5] and alone["status"] == "completed"


def test_resume_after_a_kill_equals_an_uninterrupted_ensemble(tmp_path: Path) -> None:
    overrides = [*BASE, "checkpoint_every_n_steps=2"]
    whole = ensemble(overrides, tmp_path / "whole", seeds=2)
    killed = ensemble([*overrides, "fail_at_step=5"], tmp_path / "resumed", seeds=2)
    assert {m["status"] for m in killed} == {"failed"}
    assert (tmp_path / "resumed" / "ensemble" / "checkpoints" / "last.ckpt").exists()
    resumed = ensemble(overrides, tmp_path / "resumed", seeds=2)
    for a, b in zip(resumed, whole):
        assert a["status"] == b["status"] == "completed"
        worst = differences(a, b)
        assert max(worst.values()) <= 1e-6, worst


def test_a_type_that_declares_it_cannot_batch_falls_back_with_the_reason(tmp_path: Path) -> None:
    overrides = [*BASE, "attention=hard", "attention.estimator=reinforce", "trainer.max_steps=2"]
    members = ensemble(overrides, tmp_path / "ensemble", seeds=2)
    for m in members:
        assert m["status"] == "completed"
        assert "estimator='reinforce'" in m["ensemble"]["fallback"]
    assert not (tmp_path / "ensemble" / "ensemble").exists(), "no batched training took place"


def test_each_member_is_clipped_by_its_own_norm_as_clip_grad_norm_does(tmp_path: Path) -> None:
    """Gradients of very different sizes per member: each must come out as torch's
    ``clip_grad_norm_`` leaves that member's gradients alone (a clip over all members would not)."""
    from experiments.ensemble.members import member_spec
    from experiments.ensemble.module import EnsembleModule
    from experiments.training import build

    cfg = compose(BASE)
    modules = [build.assemble(member_spec(build_spec(cfg), s), tmp_path, run_id="x").module for s in (0, 1, 2)]
    ens = EnsembleModule(modules, [0, 1, 2], grad_clip=0.5)
    generator = torch.Generator().manual_seed(0)
    sizes = torch.tensor([0.01, 1.0, 30.0])  # member 0 under the clip, 1 and 2 above it
    for p in ens.stacked:
        p.grad = torch.randn(p.shape, generator=generator) * sizes.view(-1, *([1] * (p.dim() - 1)))
    expected = []
    for i in range(3):
        copies = [p.grad[i].clone().requires_grad_(False) for p in ens.stacked]
        params = [torch.nn.Parameter(torch.zeros_like(g)) for g in copies]
        for param, g in zip(params, copies):
            param.grad = g
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        expected.append([param.grad for param in params])
    ens.configure_gradient_clipping(None)
    for i in range(3):
        for p, want in zip(ens.stacked, expected[i]):
            torch.testing.assert_close(p.grad[i], want, rtol=1e-5, atol=1e-7)


def logged_rows(run_dir: Path) -> dict[tuple[int, str], float]:
    """{(step, metric): value} of a run's metrics.csv, as the report's learning curves read it."""
    import csv

    rows = {}
    with open(run_dir / "csv" / "metrics.csv") as handle:
        for row in csv.DictReader(handle):
            for key, value in row.items():
                # the epoch too: a curve may be drawn over it; not throughput/*, the timing of a process (the
                # batched model's steps are not a member's own, and a separate run's are its own process's)
                if key != "step" and not key.startswith("throughput/") and value not in ("", None):
                    rows[(int(row["step"]), key)] = float(value)
    return rows


def test_each_member_logs_what_its_separate_run_logs_at_the_same_steps(tmp_path: Path) -> None:
    """Training loss every n steps, validations during training, the final validation and the test."""
    overrides = [*BASE, "trainer.val_check_interval=4", "trainer.log_every_n_steps=3", "trainer.limit_val_batches=2"]
    members = ensemble(overrides, tmp_path / "ensemble", seeds=2)
    for member, seed in zip(members, (0, 1)):
        separate(overrides, tmp_path, seed)
        alone = logged_rows(tmp_path / f"separate-{seed}")
        mine = logged_rows(Path(member["run_dir"]))
        assert set(mine) == set(alone), sorted(set(mine) ^ set(alone))
        assert {step for step, key in alone if key == "val/loss"} == {3, 7, 10}  # during fit at 4, 8; final at 10
        worst = max(abs(mine[k] - v) for k, v in alone.items())
        assert worst <= TOL, worst


def test_early_stopping_stops_each_member_by_its_own_validation(tmp_path: Path) -> None:
    """A threshold between the two seeds' validation losses at the first check stops one member
    there; the other trains on. Each must equal its separate run with the same early stopping."""
    checked = [*BASE, "trainer.val_check_interval=4", "trainer.limit_val_batches=2"]
    plain = [separate(checked, tmp_path / "plain", seed) for seed in (0, 1)]
    first = [logged_rows(Path(r["run_dir"]))[(3, "val/loss")] for r in plain]
    assert first[0] != first[1]
    threshold = (first[0] + first[1]) / 2
    stopping = [
        *checked,
        "callbacks=early_stopping",
        "callbacks.early_stopping.patience=100",
        f"+callbacks.early_stopping.stopping_threshold={threshold}",
    ]
    members = ensemble(stopping, tmp_path / "ensemble", seeds=2)
    alone = [separate(stopping, tmp_path / "alone", seed) for seed in (0, 1)]
    assert sorted(r["cost"]["steps"] for r in alone) == [4, 10]  # the reference itself: one stops at 4
    for member, reference in zip(members, alone):
        assert member["status"] == reference["status"] == "completed"
        assert member["cost"]["steps"] == reference["cost"]["steps"]
        worst = differences(member, reference)
        assert max(worst.values()) <= TOL, worst
    stopped = next(m for m in members if m["cost"]["steps"] == 4)
    assert (
        "stopping_threshold" in stopped["ensemble"]["stopped_early"]
        or "threshold" in stopped["ensemble"]["stopped_early"]
    )


def test_each_member_keeps_and_tests_its_own_best_weights(tmp_path: Path) -> None:
    overrides = [
        *BASE,
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=2",
        "optim.lr=0.05",
        "callbacks=best_checkpoint",
        "eval.checkpoint=best",
    ]
    members = ensemble(overrides, tmp_path / "ensemble", seeds=2)
    for member, seed in zip(members, (0, 1)):
        alone = separate(overrides, tmp_path, seed)
        assert member["tested_checkpoint"] == alone["tested_checkpoint"]  # the same step's weights
        assert (Path(member["run_dir"]) / member["tested_checkpoint"]).exists()
        worst = differences(member, alone)
        assert max(worst.values()) <= TOL, worst


def test_with_dropout_members_differ_as_separate_seeds_do(tmp_path: Path) -> None:
    """Each member draws its own dropout masks: members differ from each other, and their spread
    is of the size of the separate runs' spread (not zero, not orders of magnitude away)."""
    import statistics

    overrides = [*BASE, "model.dropout=0.3", "trainer.max_steps=12", "optim.grad_clip=1.0"]
    members = ensemble(overrides, tmp_path / "ensemble", seeds=3)
    alone = [separate(overrides, tmp_path, seed) for seed in (0, 1, 2)]
    losses = [m["metrics"]["val/loss"] for m in members]
    reference = [r["metrics"]["val/loss"] for r in alone]
    assert len(set(losses)) == 3
    spread, reference_spread = statistics.stdev(losses), statistics.stdev(reference)
    assert reference_spread / 5 < spread < reference_spread * 5, (losses, reference)


def test_members_draw_their_own_dropout_masks(tmp_path: Path) -> None:
    """Three members with the same weights and the same batch: with dropout their losses differ
    (each draws its own masks, as a separate run does); without it they are equal."""
    from experiments.ensemble.members import member_spec
    from experiments.ensemble.module import EnsembleModule
    from experiments.training import build

    for dropout, differ in ((0.3, True), (0.0, False)):
        cfg = compose([*BASE, f"model.dropout={dropout}"])
        modules = [build.assemble(member_spec(build_spec(cfg), 0), tmp_path, run_id="x").module for _ in range(3)]
        ens = EnsembleModule(modules, [0, 1, 2], grad_clip=None).train()
        src = torch.randint(4, 10, (1, 8, 6)).expand(3, 8, 6)  # the same batch for every member
        tgt = torch.randint(4, 10, (1, 8, 7)).expand(3, 8, 7)
        losses = ens.member_losses({"src": src, "tgt_in": tgt[..., :-1]}, tgt[..., 1:]).detach()
        assert (len(set(losses.tolist())) == 3) is differ, (dropout, losses)


@pytest.mark.slow
def test_the_equality_bench_reports_the_largest_difference_and_where(tmp_path: Path, monkeypatch) -> None:
    """``python -m experiments.bench ensemble-equality``: equal members read as ~0; a separate run
    planted to differ by 0.5 in one metric is reported as that difference, at that key."""
    tiny = [o for o in BASE if not o.startswith(("trainer.max_steps", "trainer.val_check_interval"))]
    row = compare("soft", ["attention=soft"], 4, 2, tmp_path / "equal", tiny)
    assert row["largest"] <= TOL and row["values"] > 4, row
    import experiments.training.single_run as entry  # where the bench takes its separate runs' train from

    real = entry.train

    def planted(cfg, run_dir, overrides):
        result = real(cfg, run_dir, overrides)
        if cfg.run.seed == 1:
            result["metrics"]["val/loss"] += 0.5
        return result

    monkeypatch.setattr(entry, "train", planted)
    row = compare("soft", ["attention=soft"], 4, 2, tmp_path / "planted", tiny)
    assert row["where"] == "seed=1 val/loss" and abs(row["largest"] - 0.5) < 1e-3, row
