"""hparams_search=tuned: every cell tuned with the same budget on tuning seeds, its best configuration and the
shared defaults tested on fresh seeds; the tuned report (analysis/report/tuned.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.report.tuned import TunedError, load, ranking_sentence, tuned_section
from experiments.sweep.optuna_study import StudyError
from experiments.sweep.tuned_study import check_seeds, split_cells
from tests.test_optuna_sweeper import ENV, QUICK


def test_the_grid_on_the_command_line_makes_the_cells() -> None:
    params = {"optim.lr": "tag(log, interval(1e-4, 1e-2))"}
    space, cells, fixed = split_cells(params, ["attention=soft,linear", "position=rope,alibi", "task=copy",
                                               "optim.lr=choice(0.1,0.2)"])  # fmt: skip
    assert space == ["optim.lr=choice(0.1,0.2)"] and fixed == ["task=copy"]
    assert cells == [[f"attention={a}", f"position={p}"] for a in ("soft", "linear") for p in ("rope", "alibi")]
    with pytest.raises(StudyError, match="seed: a tuned comparison takes its seeds"):
        split_cells(params, ["seed=0,1"])


@pytest.mark.parametrize(
    "tuning, final, said",
    [([0, 1], [1, 2], r"seed\(s\) \[1\] also in tuning_seeds"), ([], [1], "tuning_seeds=\\[\\]"), ([0], [], "final")],
)
def test_seeds_that_tune_never_test(tuning: list, final: list, said: str) -> None:
    with pytest.raises(StudyError, match=said):
        check_seeds(tuning, final)


def test_the_summary_says_where_the_tuned_ranking_differs() -> None:
    assert "leaves the ranking" in ranking_sentence(["a", "b"], ["a", "b"])
    said = ranking_sentence(["a", "b", "c"], ["b", "a", "c"])
    assert "changes the ranking" in said and "a 1 → 2" in said and "b 2 → 1" in said and "c 3" not in said


@pytest.mark.slow
def test_a_tuned_grid_tests_each_cells_best_configuration_on_fresh_seeds(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "s"
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.train", "-m", "hparams_search=tuned", *QUICK, "attention=soft,linear",
         "optim.warmup_steps=0", "hydra.sweeper.n_trials=2", "hydra.sweeper.final_seeds=[1000]",
         f"hydra.sweep.dir={sweep_dir}"],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((sweep_dir / "tuned.json").read_text())
    runs = [json.loads(p.read_text()) for p in sweep_dir.rglob("result.json")]
    assert [c["cell"] for c in record["cells"]] == ["attention=soft", "attention=linear"]
    for cell in record["cells"]:
        own = [r for r in runs if r["config"]["trial.study"] == cell["study"]]
        tuning = [r for r in own if r["config"]["trial.role"] == "tuning"]
        tuned = [r for r in own if r["config"]["trial.role"] == "tuned"]
        default = [r for r in own if r["config"]["trial.role"] == "default"]
        assert len(tuning) == 2 and {r["seed"] for r in tuning} == {0}, "the same budget, on the tuning seed"
        assert [r["seed"] for r in tuned] == [r["seed"] for r in default] == [1000]
        # the fresh seeds never tuned the cell (the leak the report refuses)
        assert not {r["seed"] for r in tuning} & {r["seed"] for r in tuned + default}
        # the tested configuration is the trial with the best validation objective
        best = min((t for t in cell["trials"] if t["state"] == "complete"), key=lambda t: t["value"])
        assert tuned[0]["config"]["optim.lr"] == pytest.approx(best["params"]["optim.lr"])
        assert default[0]["config"]["optim.lr"] == pytest.approx(
            1e-3
        )  # the shared default (experiments/config/schema.py OptimConf)
    section = tuned_section(sweep_dir, tmp_path / "report")
    assert (tmp_path / "report" / "tuned_sensitivity.png").stat().st_size > 0
    assert "ranking" in section.blocks[0].text
    # a test seed planted among the tuning runs: the report refuses the comparison
    leaked = next(p for p in sweep_dir.rglob("result.json") if json.loads(p.read_text())["config"]["trial.role"]
                  == "tuning")  # fmt: skip
    result = json.loads(leaked.read_text())
    result["seed"] = 1000
    leaked.write_text(json.dumps(result))
    with pytest.raises(TunedError, match=r"seed\(s\) \[1000\] both tuned and tested"):
        load(sweep_dir)


def test_a_presets_grid_makes_the_cells_and_its_seeds_give_way() -> None:
    from experiments.sweep.tuned_study import grid_arguments

    preset = {"attention.num_heads": "1,8,32", "seed": "0,1,2", "optim.lr": None}
    args = grid_arguments(preset, ["attention.num_heads=1,8", "trainer.max_steps=10"])
    _, cells, fixed = split_cells({"optim.lr": "interval(1e-4, 1e-2)"}, args)
    assert cells == [["attention.num_heads=1"], ["attention.num_heads=8"]] and fixed == ["trainer.max_steps=10"]
    assert split_cells({}, grid_arguments(preset, []))[1] == [[f"attention.num_heads={h}"] for h in (1, 8, 32)]
