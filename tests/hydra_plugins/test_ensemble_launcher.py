"""``hydra/launcher=ensemble``: a sweep's ``seed=`` values of each cell trained as one ensemble,
leaving exactly the folders and results the same sweep run job by job would leave.

The reference is the sweep itself under Hydra's basic launcher: rerun there, it must find every
seed completed where it looks for it, with the config hash it computes, and train nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from hydra_plugins.attnlab_launcher.ensemble_launcher import (
    Job,
    check_group_trainer,
    check_job,
    group_jobs,
    member_returns,
)
from tests.helpers.sweeps import QUIET, multirun, refused_in_process, results


def job(idx: int, *overrides: str, seed: int | None = None) -> Job:
    if seed is None:
        seed = next(int(o.split("=")[1]) for o in overrides if o.startswith("seed="))
    config = OmegaConf.create({"seed": seed, "objective": "val/loss", "ensemble": {"seeds": 1}})
    return Job(idx, list(overrides), config, seed, f"/sweep/{idx}")


def indices(groups: list[list[Job]]) -> list[list[int]]:
    return [[j.idx for j in g] for g in groups]


def test_jobs_that_differ_only_in_seed_form_one_group_in_sweep_order() -> None:
    jobs = [
        job(i, f"attention={a}", f"seed={s}")
        for i, (a, s) in enumerate([("soft", 0), ("local", 0), ("soft", 1), ("local", 1), ("soft", 2)])
    ]
    assert indices(group_jobs(jobs, None)) == [[0, 2, 4], [1, 3]]
    assert indices(group_jobs(jobs, 2)) == [[0, 2], [1, 3], [4]]  # max_members splits a cell's seeds
    # the same seed twice in a cell is two runs of one configuration, never two members of one ensemble
    twice = [job(0, "seed=0"), job(1, "seed=1"), job(2, "seed=1")]
    assert indices(group_jobs(twice, None)) == [[0, 1], [2]]
    # any other difference, however small, is another cell
    other = [job(0, "seed=0", "optim.lr=0.001"), job(1, "seed=1", "optim.lr=0.002")]
    assert indices(group_jobs(other, None)) == [[0], [1]]


def test_a_job_that_sets_the_ensemble_itself_is_refused() -> None:
    bad = job(3, "seed=0")
    bad.config.ensemble.seeds = 4
    # a ValueError (GroupingError): Hydra's plugin scan re-executes the launcher's module in place,
    # so a class imported here before a scan is not the one raised after it
    with pytest.raises(ValueError, match=r"job #3 also sets ensemble.seeds=4"):
        check_job(bad)
    check_job(job(0, "seed=0"))


def test_a_grouped_cell_refuses_the_trainer_keys_an_ensemble_cannot_honour() -> None:
    """Seeds grouped by the launcher train as one model: the same trainer-key table as ensemble.seeds=N."""
    ok = job(2, "seed=0")
    ok.config.trainer = {"max_steps": 10, "limit_train_batches": 3, "devices": 1}
    check_group_trainer(ok)
    for key, value in (("overfit_batches", 2), ("reload_dataloaders_every_n_epochs", 1), ("devices", 4)):
        bad = job(5, "seed=0")
        bad.config.trainer = {"max_steps": 10, key: value}
        with pytest.raises(ValueError, match=rf"job #5's seeds as one model: trainer.{key}={value} is not supported"):
            check_group_trainer(bad)


def test_each_grouped_job_returns_its_own_members_objective(tmp_path: Path) -> None:
    group = [job(i, f"seed={i}") for i in range(3)]
    for j, loss in zip(group, [0.5, 0.25, None]):
        j.folder = str(tmp_path / str(j.idx))
        Path(j.folder).mkdir()
        if loss is not None:  # the third member wrote no result
            (Path(j.folder) / "result.json").write_text(
                json.dumps({"status": "completed", "metrics": {"val/loss": loss}})
            )
    ret = JobReturn(overrides=group[0].overrides, status=JobStatus.COMPLETED, _return_value=0.375)
    each = member_returns(ret, group)
    from experiments.training.single_run import BAD_OBJECTIVE

    assert [r.return_value for r in each] == [0.5, 0.25, BAD_OBJECTIVE]
    assert [r.overrides for r in each] == [["seed=0"], ["seed=1"], ["seed=2"]]
    assert [r.working_dir for r in each] == [j.folder for j in group]


SWEEP = [*QUIET, "attention=soft,multihead", "seed=0,1", "model.dropout=0.0"]


@pytest.mark.slow
def test_a_seed_sweep_trains_one_ensemble_per_cell_and_leaves_the_job_by_job_sweep(tmp_path: Path) -> None:
    proc, sweep_dir = multirun(tmp_path, *SWEEP, "hydra/launcher=ensemble")
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert said.count("(one ensemble)") == 2, said[-3000:]
    found = results(sweep_dir)
    assert len(found) == 4 and all(folder.parent == sweep_dir for folder in found)
    assert {r["status"] for r in found.values()} == {"completed"}
    cells: dict[str, list[int]] = {}
    for r in found.values():
        assert r["ensemble"]["members"] == 2
        cells.setdefault(r["attention"], []).append(r["seed"])
        assert r["ensemble"]["seeds"] == [0, 1]
    assert {k: sorted(v) for k, v in cells.items()} == {"soft": [0, 1], "multihead": [0, 1]}
    # every member's folder has its own job's record, with the overrides of that job alone
    for folder, r in found.items():
        overrides = OmegaConf.load(folder / ".hydra" / "overrides.yaml")
        assert f"seed={r['seed']}" in overrides and not any(o.startswith("ensemble.") for o in overrides)
    before = {p: p.read_bytes() for p in sweep_dir.rglob("result.json")}

    # the same sweep on Hydra's basic launcher, with a third seed: every job of the first two finds
    # its result where it looks, and skips; the third trains alone
    more = [o if o != "seed=0,1" else "seed=0,1,2" for o in SWEEP]
    rerun, _ = multirun(tmp_path, *more)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = {p: p.read_bytes() for p in sweep_dir.rglob("result.json")}
    assert {p: after[p] for p in before} == before and len(after) == 6
    said = rerun.stdout + rerun.stderr
    assert "2 completed" in said and "4 results from earlier runs left as they were" in said, said[-2000:]

    # the report: one cell per attention type, its three seeds together, ensemble members or not
    from analysis.collect import collect
    from analysis.data.cells import assign_cells

    runs, _ = assign_cells(collect([sweep_dir]).runs)
    seeds = runs.groupby("cell").agg(attention=("attention", "first"), seeds=("seed", sorted))
    assert sorted(map(tuple, seeds["seeds"])) == [(0, 1, 2), (0, 1, 2)], seeds
    assert sorted(seeds["attention"]) == ["multihead", "soft"]


@pytest.mark.parametrize(
    "extra, said",
    [
        (["ensemble.seeds=2"], "also sets ensemble.seeds=2"),
        (["hydra.launcher.max_members=1"], "hydra.launcher.max_members=1 is not allowed"),
        (["+trainer.overfit_batches=2"], "trainer.overfit_batches=2 is not supported with ensemble.seeds > 1"),
    ],
)
def test_an_ambiguous_grouping_stops_before_any_job_in_one_line(
    extra: list[str], said: str, tmp_path: Path, monkeypatch, capfd
) -> None:
    code, stderr, sweep_dir = refused_in_process(
        tmp_path, monkeypatch, capfd, *QUIET, "seed=0,1", "hydra/launcher=ensemble", *extra
    )
    assert code == 2, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.startswith("attnlab:")]
    assert len(lines) == 1 and said in lines[0], stderr[-2000:]
    assert not list(sweep_dir.rglob("result.json"))
