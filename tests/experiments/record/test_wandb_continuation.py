"""One W&B run per run folder: continuing a run (``trainer.max_steps`` raised, same folder) resumes the same
W&B run id, under the same readable display name made of the cell's factors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.data.wandb_offline import find_offline_runs, iter_record_bytes
from experiments.config.spec import build_spec
from experiments.record.wandb_run import display_name
from experiments.training.single_run import run_identity
from tests.helpers.config import compose
from tests.helpers.wandb_runs import WITH_WANDB, offline_runs


def display_names(folder: Path) -> list[str]:
    """The display name in each offline run's run record, in the order of the run folders' names (their time)."""
    from wandb.proto import wandb_internal_pb2

    names = []
    for run_dir in sorted(find_offline_runs([folder]), key=lambda p: p.name):
        for raw in iter_record_bytes(next(run_dir.glob("run-*.wandb"))):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(raw)
            if record.WhichOneof("record_type") == "run":
                names.append(record.run.display_name)
                break
    return names


@pytest.mark.parametrize(
    ("overrides", "name"),
    [
        (["attention=local", "position=alibi", "seed=0"], "local+alibi seed=0"),
        ([], "multihead+sinusoidal seed=0"),  # the defaults, named all the same
        # a factor of the computation is named; the budget, the loggers and the run name are not
        (
            ["attention=local", "optim.lr=0.01", "trainer.max_steps=8", "logger=csv", "name=abl", "seed=3"],
            "local+sinusoidal optim.lr=0.01 seed=3",
        ),
    ],
)
def test_the_display_name_is_the_cells_factors(overrides: list[str], name: str) -> None:
    assert display_name(build_spec(compose(overrides)), overrides) == name


def test_a_long_display_name_keeps_its_seed() -> None:
    overrides = ["attention=local", *(f"+extra.key_{i}={i}" for i in range(30)), "seed=5"]
    name = display_name(build_spec(compose(["attention=local", "seed=5"])), overrides)
    assert len(name) == 128 and name.startswith("local+sinusoidal extra.key_0=0") and name.endswith("… seed=5")


def resolved(cfg) -> tuple[dict, str]:
    """The flat config and its hash, as the run's spec holds them."""
    run = build_spec(cfg).run
    return run.flat_config(), run.config_hash


def test_the_run_id_stays_while_the_folder_holds_the_same_computation(tmp_path: Path) -> None:
    first, _ = resolved(compose(["trainer.max_steps=4"]))
    run_id = run_identity(tmp_path, "hash-of-4-steps", first)
    longer, _ = resolved(compose(["trainer.max_steps=8"]))  # a continuation: only the budget differs
    assert run_identity(tmp_path, "hash-of-8-steps", longer) == run_id
    other, _ = resolved(compose(["trainer.max_steps=8", "optim.lr=0.01"]))  # another computation
    assert run_identity(tmp_path, "hash-of-other", other) != run_id


def test_a_state_written_without_the_computation_hash_is_read_from_the_result(tmp_path: Path) -> None:
    flat, _ = resolved(compose(["trainer.max_steps=4"]))
    (tmp_path / "run_state.json").write_text(json.dumps({"run_id": "old0run0id00", "config_hash": "h4"}))
    (tmp_path / "result.json").write_text(json.dumps({"run_id": "old0run0id00", "config": flat}))
    longer, _ = resolved(compose(["trainer.max_steps=8"]))
    assert run_identity(tmp_path, "h8", longer) == "old0run0id00"


@pytest.mark.slow
def test_a_continued_run_resumes_the_same_wandb_run(tmp_path: Path) -> None:
    from experiments import run

    overrides = [*WITH_WANDB, "attention=local", "position=alibi"]
    first = run(overrides, run_dir=tmp_path)
    second = run([*overrides, "trainer.max_steps=4"], run_dir=tmp_path)  # the later key wins: 2 -> 4 steps
    assert second["status"] == "completed" and second["cost"]["steps"] == 4
    logged = offline_runs(tmp_path)
    folders = find_offline_runs([tmp_path])
    assert len(folders) == 2, "each invocation writes its own offline run folder"
    assert {p.name.rsplit("-", 1)[-1] for p in folders} == set(logged) == {first["run_id"]} == {second["run_id"]}
    names = display_names(tmp_path)
    assert len(set(names)) == 1 and names[0].startswith("local+alibi ") and names[0].endswith(" seed=0")
