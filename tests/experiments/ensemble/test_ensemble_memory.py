"""``ensemble.seeds=N`` estimates its memory from the model spec before any work (experiments/ensemble/memory.py):
the estimate is held against what a built member counts and what one training step keeps for its backward
pass, and an ensemble that would not fit is refused in one line before a member is built."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from experiments.config.spec import build_spec
from experiments.ensemble import memory as mem
from experiments.ensemble import run as ensemble_run
from experiments.ensemble import train_ensemble
from experiments.model.transformer import count_parameters
from experiments.training import build
from tests.helpers.config import TINY, compose
from tests.helpers.sweeps import refused_in_process

SIZE = [*TINY, "model.d_model=32", "model.ffn_dim=64", "task.batch_size=16"]


def test_the_weights_are_five_float32_copies_of_the_parameters_a_member_builds(tmp_path: Path) -> None:
    cfg = compose(SIZE)
    parts = build.assemble(build_spec(cfg), tmp_path, run_id="x")
    assert mem.estimate(build_spec(cfg), 3).weights == 5 * 4 * count_parameters(parts.module.model)


def saved_bytes(step) -> int:
    """Bytes of the distinct tensors autograd keeps for the backward pass while ``step`` runs."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(seen.values())


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)`")  # a step outside a Trainer logs nowhere
@pytest.mark.parametrize("arch", ["seq2seq", "decoder"])
def test_the_activation_estimate_is_within_a_factor_1_5_of_what_one_step_saves(tmp_path: Path, arch: str) -> None:
    # every example at the longest length, and heads enough that the attention scores weigh as much as the rest
    cfg = compose([*SIZE, f"model.arch={arch}", "task.train_lengths=[24,24]", "attention.num_heads=4"])
    parts = build.assemble(build_spec(cfg), tmp_path, run_id="x")
    module = parts.module
    for sub in module.model.modules():  # the batched step's path: every layer on its reference kernel
        if "math" in getattr(sub, "backends", ()):
            sub.backend, sub.auto = "math", False
    dm = parts.datamodule
    dm.prepare_data()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    longest = {k: v for k, v in batch.items() if torch.is_tensor(v)}
    kept = saved_bytes(lambda: module.training_step(longest, 0))
    estimated = mem.estimate(build_spec(cfg), 1).activations
    # the estimate takes every sequence at its longest; a batch is padded to its own longest only
    assert kept / 1.5 <= estimated <= kept * 1.5, (kept, estimated)


def test_a_thousand_seeds_that_do_not_fit_are_refused_in_one_line_before_any_work(tmp_path: Path, monkeypatch) -> None:
    cfg = compose([*SIZE, "ensemble.seeds=1000"])
    per_member = mem.estimate(build_spec(cfg), 1).per_member
    limit = 300 * per_member + per_member // 2  # room for 300 members
    monkeypatch.setattr(mem, "available", lambda cfg: (limit, "of RAM is available"))

    def resolved_a_member(*args, **kwargs):  # the first work a refusal must come before: a member's own config
        raise AssertionError("a member's config was resolved before the memory check refused the ensemble")

    monkeypatch.setattr(ensemble_run, "member_spec", resolved_a_member)
    with pytest.raises(mem.EnsembleMemoryError) as refused:
        train_ensemble(build_spec(cfg), tmp_path / "ens", SIZE)
    line = str(refused.value)
    assert "\n" not in line and line.startswith("ensemble.seeds=1000 needs about")
    assert f"{1000 * per_member / 2**30:.2f} GiB" in line and f"but {limit / 2**30:.2f} GiB of RAM is available" in line
    assert "lower ensemble.seeds to at most 300," in line
    assert not list((tmp_path / "ens").glob("seed=*"))  # no member was set up


def test_an_ensemble_that_fits_but_is_large_says_so_before_work(tmp_path: Path, monkeypatch, caplog) -> None:
    cfg = compose([*SIZE, "ensemble.seeds=4"])
    need = mem.estimate(build_spec(cfg), 4).total
    with caplog.at_level(logging.INFO, logger="attnlab"):
        mem.check_memory(build_spec(cfg), 4, limit=(int(need * 1.5), "of RAM is available"))
        assert [r.getMessage() for r in caplog.records if "ensemble.seeds=4:" in r.getMessage()]
        caplog.clear()
        mem.check_memory(build_spec(cfg), 4, limit=(need * 10, "of RAM is available"))
        assert not caplog.records  # a small share: no note


@pytest.mark.slow
def test_the_command_line_refuses_an_ensemble_larger_than_this_machine_with_exit_2(
    tmp_path: Path, monkeypatch, capfd
) -> None:
    """The command's main() in this process: its preflight, exit code and stderr, without a process start."""
    args = ["logger=none", "ensemble.seeds=100000", f"hydra.run.dir={tmp_path}"]
    code, stderr, _ = refused_in_process(tmp_path, monkeypatch, capfd, *args, multirun=False)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1, stderr
    assert lines[0].startswith("attnlab: ensemble.seeds=100000 needs about") and "lower ensemble.seeds" in lines[0]
    assert not list(tmp_path.glob("seed=*"))


def test_a_resumed_ensemble_estimates_only_the_members_still_to_train(tmp_path: Path, monkeypatch) -> None:
    from experiments.ensemble.folder import check_before_start
    from experiments.training.single_run import train

    run = tmp_path / "ens"
    # member 0 completed before: its separate run with the member's config, in the member's folder
    done = train(build_spec(compose([*SIZE, "seed=0"])), run / "seed=0", [*SIZE, "seed=0"])
    assert done["status"] == "completed"
    cfg = compose([*SIZE, "ensemble.seeds=3"])
    per_member = mem.estimate(build_spec(cfg), 1).per_member
    room = {"members": 2}
    monkeypatch.setattr(
        mem, "available", lambda cfg: (room["members"] * per_member + per_member // 2, "of RAM is available")
    )
    check_before_start(run, build_spec(cfg))  # seeds 1 and 2 fit; all three would not
    with pytest.raises(mem.EnsembleMemoryError, match=r"^ensemble.seeds=3 \(2 still to train\) needs about"):
        room["members"] = 1
        check_before_start(run, build_spec(cfg))
    with pytest.raises(mem.EnsembleMemoryError, match=r"^ensemble.seeds=3 needs about"):
        room["members"] = 2
        check_before_start(tmp_path / "fresh", build_spec(cfg))  # nothing completed: all three count
    members = train_ensemble(build_spec(cfg), run, [*SIZE, "ensemble.seeds=3"])
    assert [m["status"] for m in members] == ["completed"] * 3 and members[0].get("skipped")
