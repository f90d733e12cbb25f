"""hparams_search=tuned: every cell tuned with the same budget on tuning seeds, its best configuration and the
shared defaults tested on fresh seeds; the tuned report (analysis/report/tuned.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from analysis.report.sections.tuned import TunedError, load, ranking_sentence, tuned_section
from experiments.sweep.optuna_study import StudyError
from experiments.sweep.tuned_study import check_seeds, split_cells
from tests.helpers.cli import train_cli
from tests.helpers.env import ENV
from tests.helpers.studies import QUICK, tuned_sweep


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
    proc = train_cli(
        "-m",
        "hparams_search=tuned",
        *QUICK,
        "attention=soft,linear",
        "optim.warmup_steps=0",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.final_seeds=[1000]",
        f"hydra.sweep.dir={sweep_dir}",
        env=ENV,
        cwd=tmp_path,
    )
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


def _lead_text(sweep: Path, out: Path) -> str:
    """The report's lead summary (everything before the contents) as Markdown text."""
    from analysis.report.build import build_report

    build_report([sweep], out, bench=False, paper_files=False)
    return (out / "report.md").read_text().split("Summary — tuned comparison", 1)[1].split("\n#", 1)[0]


@pytest.mark.parametrize(
    "scores, said",
    [
        # local worse at the defaults, better tuned, both by far more than the seeds' spread: a real flip
        ({"soft": {"default": [2.00, 2.01, 2.02], "tuned": [1.90, 1.91, 1.92]},
          "local": {"default": [2.50, 2.51, 2.52], "tuned": [1.50, 1.51, 1.52]}},
         r"differs from the shared defaults \(rank at defaults → tuned: attention=local 2 → 1; attention=soft 1 → 2\)"
         r"; the change is beyond noise for attention=soft vs attention=local"),
        # the same swap, but within the seeds' spread: within noise
        ({"soft": {"default": [2.00, 2.30, 1.70], "tuned": [1.90, 2.30, 1.60]},
          "local": {"default": [2.10, 2.40, 1.80], "tuned": [1.80, 2.20, 1.50]}},
         r"attention=local 2 → 1; attention=soft 1 → 2\); the change is within noise"),
        # tuning helps both, the order stays
        ({"soft": {"default": [2.00, 2.01, 2.02], "tuned": [1.50, 1.51, 1.52]},
          "local": {"default": [2.50, 2.51, 2.52], "tuned": [1.90, 1.91, 1.92]}},
         r"the ranking is the same at tuned settings \(attention=soft ≻ attention=local\)"),
    ],
)  # fmt: skip
def test_the_lead_summary_says_whether_tuning_changes_the_ranking(tmp_path: Path, scores: dict, said: str) -> None:
    from scipy.stats import ttest_ind

    lead = _lead_text(tuned_sweep(tmp_path, scores), tmp_path / "out")
    assert re.search(said, lead), lead
    # the verdict agrees with Welch's test computed here on the raw scores (one swapped pair: Holm is a no-op)
    if "→" in said:
        soft, local = scores["soft"], scores["local"]
        p = [ttest_ind(soft[r], local[r], equal_var=False).pvalue for r in ("default", "tuned")]
        assert ("beyond noise" in lead) == all(v < 0.05 for v in p)


TUNED_PRESETS = ["study/vaswani_heads_tuned", "study/vaswani_heads_tuned_cpu"]


def _preset_checks(cfg: Any, cli: list[str] = ()) -> dict[str, Any]:
    """The tuned sweeper's own checks before any trial (TunedSweeper.plan), on a composed preset."""
    from hydra.utils import instantiate

    sweeper = instantiate(cfg.hydra.sweeper)
    sweeper.config = cfg  # what Hydra's setup hands it; plan() needs no launcher
    return sweeper.plan(list(cli))


@pytest.mark.parametrize("preset", TUNED_PRESETS)
def test_a_tuned_preset_is_a_runnable_comparison_in_one_line(preset: str) -> None:
    from tests.helpers.studies import composed

    cfg = composed(f"experiment={preset}")
    planned = _preset_checks(cfg)
    assert cfg.hydra.sweeper._target_.endswith("TunedSweeper") and cfg.objective == "val/loss"
    assert planned["cells"] == [["attention.num_heads=1"], ["attention.num_heads=8"]]
    assert set(planned["space"]) == {"optim.lr", "optim.warmup_steps"}
    # the study's own learning rate lies inside the space searched, so tuning can find the defaults again
    lr = planned["space"]["optim.lr"]
    assert lr.low <= cfg.optim.lr <= lr.high


def test_the_cpu_preset_spends_a_fraction_of_the_gpu_budget() -> None:
    from tests.helpers.studies import composed

    def steps(cfg: Any) -> int:
        sweeper = cfg.hydra.sweeper
        runs = len(sweeper.tuning_seeds) * sweeper.n_trials + 2 * len(sweeper.final_seeds)
        return runs * cfg.trainer.max_steps

    gpu, cpu = (composed(f"experiment={p}") for p in TUNED_PRESETS)
    assert steps(cpu) * 10 < steps(gpu)


@pytest.mark.parametrize(
    "overrides, cli, said",
    [
        (["++hydra.sweeper.space.lrr='interval(1e-4, 1e-2)'"], [], "hydra.sweeper.space.lrr: no config has the key"),
        # every searched key pinned on the command line leaves nothing to search
        ([], ["optim.lr=0.001", "optim.warmup_steps=0"], "hydra.sweeper.space: the search space is empty"),
        (["hydra.sweeper.n_trials=0"], [], "hydra.sweeper.n_trials=0: the budget must be an integer of at least 1"),
        (["hydra/sweeper/pruner=median", "hydra.sweeper.pruning_metric=test/bleu"], [], "not logged at validation"),
        (["hydra.sweeper.final_seeds=[0]"], [], r"seed\(s\) \[0\] also in tuning_seeds"),
    ],
)  # fmt: skip
def test_a_tuned_preset_with_bad_input_is_refused_by_name(overrides: list[str], cli: list[str], said: str) -> None:
    from tests.helpers.studies import composed

    cfg = composed(f"experiment={TUNED_PRESETS[1]}", *overrides)
    with pytest.raises(StudyError, match=said):
        _preset_checks(cfg, cli)
