"""W&B as its users group runs: job type, cell id and factors in the config, the group per sweep,
result.json and the (opt-in) checkpoint as artifacts. Offline; read back from the run's record log."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.collect import collect
from tests.helpers.cli import train_cli
from tests.helpers.env import ENV
from tests.helpers.wandb_runs import WITH_WANDB, offline_runs


def test_a_single_run_is_train_with_result_and_checkpoint_artifacts(tmp_path: Path) -> None:
    from experiments import run

    result = run([*WITH_WANDB, "wandb_uploads.checkpoint=true"], run_dir=tmp_path)
    logged = offline_runs(tmp_path)[result["run_id"]]
    assert logged["job_type"] == "train" and logged["group"] == "default"
    files = {a["type"]: a["files"] for a in logged["artifacts"]}
    assert files["result"] == ["result.json"] and files["model"] == ["last.ckpt"]


@pytest.mark.slow
def test_sweep_cells_carry_job_type_group_cell_and_factors(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = train_cli(
        "-m", *WITH_WANDB, "name=wb", "attention=soft,local", f"hydra.sweep.dir={sweep}", env=ENV, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = collect([sweep]).runs
    from analysis.data.cells import assign_cells

    cells = assign_cells(runs)[0].set_index("run_id")["cell"]  # the report's own cells of these runs
    logged = offline_runs(sweep)
    assert sorted(logged) == sorted(cells.index)
    for run_id, run in logged.items():
        assert run["job_type"] == "sweep_cell" and run["group"] == "wb"
        assert run["config"]["attnlab/cell"] == cells[run_id]
        assert run["config"]["attnlab/factors"]["attention"] == run["config"]["attention.name"]
        # a checkpoint is an artifact only when asked (it can be large)
        assert [a["type"] for a in run["artifacts"] if a["type"] in ("result", "model")] == ["result"]
    assert len(set(cells)) == 2
