"""``python -m experiments.evaluate``: a checkpoint evaluated alone measures what its run measured.

The expected values are the runs' own result.json, written by the training path (fit, then test in the same
process), which shares no code with the evaluation's reading of the checkpoint, its rebuilding of the model and
the data, or its overrides. Prediction is checked against the test metric's definition, computed here by hand.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from experiments.config.spec import build_spec
from tests.helpers.config import TINY

# a seq2seq run long enough that its accuracy is not 0 (a metric of 0 would match any broken evaluation)
REVERSE = [
    *TINY,
    "task=reverse",
    "trainer.max_steps=30",
    "optim.lr=0.01",
    "optim.warmup_steps=1",
    "model.dropout=0.0",
    "task.train_lengths=[2,6]",
    "task.eval_lengths=[3,6]",
    "task.num_symbols=4",
]


def train(overrides: list[str], run_dir: Path) -> dict:
    from experiments.app.api import run

    result = run(overrides, run_dir=run_dir)
    assert result["status"] == "completed", result.get("error")
    return result


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A sweep folder of two tiny reverse runs (seeds 0 and 1), each with its checkpoint."""
    root = tmp_path_factory.mktemp("sweep")
    for seed in (0, 1):
        train([*REVERSE, f"seed={seed}"], root / f"seed={seed}")
    return root


def result_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "result.json").read_text())


def exit_line(argv: list[str], capsys) -> tuple[int, str]:
    """The exit code and stderr of ``python -m experiments.evaluate argv``, run in this process."""
    from experiments.app.evaluate import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    return stop.value.code, capsys.readouterr().err.strip()


@pytest.mark.slow
def test_evaluate_equals_the_runs_own_test_metrics(sweep):
    from experiments.training.evaluate_checkpoint import evaluate_checkpoint

    run_dir = sweep / "seed=0"
    expected = result_of(run_dir)
    evaluated, folder = evaluate_checkpoint(str(run_dir), [])
    assert expected["metrics"]["test/token_acc"] > 0  # a metric that a wrong model would not match by chance
    assert set(evaluated["metrics"]) == set(expected["metrics"])
    for name, value in expected["metrics"].items():
        assert evaluated["metrics"][name] == pytest.approx(value, rel=1e-6, abs=1e-7), name
    assert set(evaluated["by_length"]) == set(expected["by_length"])
    for length, metrics in expected["by_length"].items():
        assert evaluated["by_length"][length] == pytest.approx(metrics, rel=1e-6), length
    # marked as an evaluation of that checkpoint, in the run's eval/ folder, never as another result.json
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    record = evaluated["evaluation"]
    assert record["checkpoint"] == str(checkpoint.resolve())
    assert record["sha256"] == hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    assert record["step"] == expected["cost"]["steps"] == 30
    assert evaluated["run_id"] == expected["run_id"]
    assert folder.parent == run_dir / "eval" and json.loads((folder / "evaluation.json").read_text()) == json.loads(
        json.dumps(evaluated)
    )
    assert not (folder / "result.json").exists()


@pytest.mark.slow
def test_new_lengths_give_by_length_rows_for_those_lengths(sweep):
    from experiments.training.evaluate_checkpoint import evaluate_checkpoint

    run_dir = sweep / "seed=1"
    expected = result_of(run_dir)
    evaluated, _ = evaluate_checkpoint(str(run_dir / "checkpoints" / "last.ckpt"), ["task.eval_lengths=[6,9]"])
    assert set(evaluated["by_length"]) == {"6", "9"}
    # a length the run tested too is the same examples (one random stream per length), so the same numbers
    assert evaluated["by_length"]["6"] == pytest.approx(expected["by_length"]["6"], rel=1e-6)
    assert evaluated["config"]["task.eval_lengths"] == [6, 9]


@pytest.mark.slow
def test_predict_returns_what_the_test_scores(sweep):
    """Greedy generations from ``trainer.predict``, scored by the test metrics' definitions (token accuracy over
    the target's real tokens, sequence accuracy: every real token right), equal the run's test metrics."""
    import lightning as L

    from experiments.training import build
    from experiments.training.eval_config import evaluation_config
    from experiments.training.evaluate_checkpoint import rebuilt_module
    from experiments.training.predictions import texts, token_lists
    from experiments.training.run_checkpoint import read_run_checkpoint

    run_dir = sweep / "seed=0"
    expected = result_of(run_dir)
    checkpoint = read_run_checkpoint(str(run_dir))
    cfg = evaluation_config(checkpoint, {})
    data = build.build_datamodule(build_spec(cfg), run_dir)
    module = rebuilt_module(checkpoint, build_spec(cfg), data)
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    outputs = trainer.predict(module, dataloaders=data.test_dataloader())

    hits = sum(int((o["predicted"].eq(o["target"]) & o["scored"]).sum()) for o in outputs)
    tokens = sum(int(o["scored"].sum()) for o in outputs)
    whole = torch.cat([(o["predicted"].eq(o["target"]) | ~o["scored"]).all(1) for o in outputs])
    assert hits / tokens == pytest.approx(expected["metrics"]["test/token_acc"], rel=1e-6)
    assert whole.float().mean().item() == pytest.approx(expected["metrics"]["test/seq_acc"], abs=1e-7)
    for length, metrics in expected["by_length"].items():
        mine = [o for o in outputs if int(o["length"][0]) == int(length)]
        acc = sum(int((o["predicted"].eq(o["target"]) & o["scored"]).sum()) for o in mine) / sum(
            int(o["scored"].sum()) for o in mine
        )
        assert acc == pytest.approx(metrics["token_acc"], rel=1e-6), length
    assert len(token_lists(outputs)) == len(texts(outputs, data.decode)) == sum(len(o["target"]) for o in outputs)


def test_prediction_helpers_cut_at_eos_and_keep_scored_positions():
    from experiments.training.predictions import texts, token_lists

    outputs = [
        {
            "predicted": torch.tensor([[5, 6, 2, 7], [7, 2, 9, 9], [4, 8, 8, 0]]),
            "scored": torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 1, 0]]).bool(),
        },
        {"predicted": torch.tensor([3, 1]), "scored": torch.tensor([True, True])},  # a classifier's labels
    ]
    assert token_lists(outputs) == [[5, 6], [7], [4, 8], [3], [1]]
    assert texts(outputs[:1], lambda ids: "-".join(map(str, ids))) == ["5-6", "7", "4-8"]


@pytest.mark.slow
def test_an_lm_on_a_users_file_is_evaluated_from_anywhere_and_a_gone_file_is_named(tmp_path, monkeypatch, capsys):
    """charlm reads a file the user named by a relative path; evaluation from another folder reads it again
    from where the checkpoint recorded it, predict's next-token accuracy is the test's, and a file that has
    gone is named in one line (exit 2)."""
    import lightning as L

    from experiments.training import build
    from experiments.training.eval_config import evaluation_config
    from experiments.training.evaluate_checkpoint import evaluate_checkpoint, rebuilt_module
    from experiments.training.run_checkpoint import read_run_checkpoint

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "input.txt").write_text("abcab cabca bcabc " * 40)
    monkeypatch.chdir(data_dir)
    lm = [
        *TINY,
        "task=charlm",
        "task.path=input.txt",  # relative to where the run starts
        "model.arch=decoder",
        "task.context=8",
        "task.eval_contexts=[8,12]",
        "task.train_batches_per_epoch=4",
        "task.val_windows=8",
        "trainer.max_steps=12",
        "optim.lr=0.01",
        "optim.warmup_steps=1",
        "model.dropout=0.0",
    ]
    lm = [o for o in lm if not o.startswith(("task.train_size", "task.val_size", "task.test_size"))]
    run_dir = tmp_path / "lm"
    expected = train(lm, run_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    evaluated, _ = evaluate_checkpoint(str(run_dir), [])
    assert expected["metrics"]["test/token_acc"] > 0
    assert evaluated["metrics"]["test/token_acc"] == pytest.approx(expected["metrics"]["test/token_acc"], rel=1e-6)
    assert evaluated["metrics"]["test/loss"] == pytest.approx(expected["metrics"]["test/loss"], rel=1e-6)

    checkpoint = read_run_checkpoint(str(run_dir))
    cfg = evaluation_config(checkpoint, {})
    data = build.build_datamodule(build_spec(cfg), run_dir)
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    outputs = trainer.predict(rebuilt_module(checkpoint, build_spec(cfg), data), dataloaders=data.test_dataloader())
    # the test's token accuracy: the most likely next character given the true prefix, over scored positions
    hits = sum(int((o["predicted"].eq(o["target"]) & o["scored"]).sum()) for o in outputs)
    assert hits / sum(int(o["scored"].sum()) for o in outputs) == pytest.approx(
        expected["metrics"]["test/token_acc"], rel=1e-6
    )

    (data_dir / "input.txt").rename(data_dir / "moved.txt")
    code, err = exit_line([f"ckpt_path={run_dir}"], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert str(data_dir / "input.txt") in err and "task.path" in err


def fake_checkpoint(path: Path, **entries) -> Path:
    torch.save({"state_dict": {}, "global_step": 3, **entries}, path)
    return path


@pytest.mark.parametrize(
    "case,why",
    [
        ("missing", "no such file or folder"),
        ("corrupt", "is not a checkpoint torch can read"),
        ("no config", "holds no run config"),
        ("run folder without a checkpoint", "the folder has no checkpoints/last.ckpt"),
    ],
)
def test_bad_input_is_one_line_naming_the_path_and_exit_2(case, why, tmp_path, capsys):
    if case == "missing":
        given = tmp_path / "nowhere" / "last.ckpt"
    elif case == "corrupt":
        given = tmp_path / "last.ckpt"
        given.write_bytes(b"PK\x03\x04 not a whole checkpoint")
    elif case == "no config":  # a Lightning checkpoint from before checkpoints recorded the run's config
        given = fake_checkpoint(tmp_path / "old.ckpt", hyper_parameters={"model": {}, "task_kind": "seq2seq"})
    else:
        given = tmp_path / "run"
        given.mkdir()
        (given / "result.json").write_text("{}")
    code, err = exit_line([f"ckpt_path={given}"], capsys)
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("attnlab: ")
    assert str(given) in err and why in err


def test_an_override_of_the_model_is_refused_naming_the_key(tmp_path, capsys):
    config = {"task.name": "reverse", "task.eval_lengths": [8], "model.d_model": 16, "seed": 0}
    given = fake_checkpoint(
        tmp_path / "last.ckpt",
        attnlab_run={"config": config, "config_hash": "x"},
        hyper_parameters={"model": {}, "task_kind": "seq2seq"},
    )
    code, err = exit_line([f"ckpt_path={given}", "model.d_model=32"], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("attnlab: model.d_model=32") and "task.eval_lengths" in err
    # an evaluation key of another task (charlm's contexts) is named as one this task does not take
    code, err = exit_line([f"ckpt_path={given}", "task.eval_contexts=[16]"], capsys)
    assert code == 2 and "task=reverse takes no eval_contexts" in err and "'task.eval_contexts'" not in err
    code, err = exit_line(["task.eval_lengths=[8]"], capsys)  # neither ckpt_path nor sweep_dir
    assert code == 2 and "ckpt_path" in err and "sweep_dir" in err


@pytest.mark.slow
def test_a_sweep_is_evaluated_in_one_command_and_read_as_evaluations(sweep, capsys):
    from analysis.collect import collect, collect_evaluations
    from experiments.app.evaluate import main

    with pytest.raises(SystemExit) as stop:
        main([f"sweep_dir={sweep}", "task.eval_lengths=[9]"])
    assert stop.value.code == 0
    printed = capsys.readouterr().out
    for seed in (0, 1):
        assert str(sweep / f"seed={seed}" / "eval") in printed

    runs = collect(sweep).runs
    # evaluations are never read as runs: not as more seeds, nor in place of the run whose run_id they carry
    own = [str((sweep / f"seed={seed}" / "result.json").resolve()) for seed in (0, 1)]
    assert sorted(runs["source"]) == own
    evaluations = collect_evaluations(sweep)
    new = evaluations.runs[evaluations.runs["eval_overrides"].map(lambda o: o == ["task.eval_lengths=[9]"])]
    assert sorted(new["run_id"]) == sorted(runs["run_id"])
    assert set(new["kind"]) == {"evaluation"} and set(new["checkpoint_step"]) == {30}
    lengths = evaluations.by_length[evaluations.by_length["evaluation_id"].isin(new["evaluation_id"])]
    assert set(lengths["length"]) == {9} and set(lengths["metric"]) == {"token_acc", "seq_acc"}


def test_a_sweep_without_an_evaluable_run_names_each_run_left_out_and_exits_2(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    for name, status in (("a", "completed"), ("b", "failed")):
        (sweep / name).mkdir(parents=True)
        (sweep / name / "result.json").write_text(json.dumps({"status": status}))
    # an earlier run kept aside in a's folder, with a checkpoint: not a run of the sweep
    kept = sweep / "a" / "previous" / "2026-01-01" / "checkpoints"
    kept.mkdir(parents=True)
    (kept.parent / "result.json").write_text(json.dumps({"status": "completed"}))
    (kept / "last.ckpt").write_bytes(b"")
    code, err = exit_line([f"sweep_dir={sweep}", "task.eval_lengths=[9]"], capsys)
    lines = err.splitlines()
    assert code == 2
    assert lines == [
        f"attnlab: {sweep / 'a'}: no checkpoints/last.ckpt, not evaluated",
        f"attnlab: {sweep / 'b'}: failed, not evaluated",
        f"attnlab: sweep_dir={sweep}: no completed run with a checkpoint under it",
    ]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with a GPU evaluates a GPU run there")
def test_a_gpu_run_on_a_machine_without_one_is_told_to_use_the_cpu(tmp_path, capsys):
    config = {"task.name": "reverse", "trainer.accelerator": "gpu", "trainer.devices": 1, "seed": 0}
    given = fake_checkpoint(
        tmp_path / "last.ckpt",
        attnlab_run={"config": config, "config_hash": "x"},
        hyper_parameters={"model": {}, "task_kind": "seq2seq"},
    )
    code, err = exit_line([f"ckpt_path={given}"], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("attnlab: trainer.accelerator=gpu") and err.endswith("trainer.accelerator=cpu")


def test_the_runs_plugins_are_imported_before_its_names_are_looked_up(tmp_path, capsys):
    config = {"task.name": "reverse", "plugins": ["attnlab_no_such_plugin"], "seed": 0}
    given = fake_checkpoint(
        tmp_path / "last.ckpt",
        attnlab_run={"config": config, "config_hash": "x"},
        hyper_parameters={"model": {}, "task_kind": "seq2seq"},
    )
    code, err = exit_line([f"ckpt_path={given}"], capsys)
    assert code == 2 and err.startswith("attnlab: plugins: could not import 'attnlab_no_such_plugin'")


def test_a_run_folder_stands_for_the_checkpoint_its_test_read(tmp_path, capsys):
    """eval.checkpoint=best: the run's result.json names the best checkpoint it tested; that is the one read."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    tested = {"status": "completed", "tested_checkpoint": "checkpoints/step20.ckpt"}
    (run / "result.json").write_text(json.dumps(tested))
    for name in ("last.ckpt", "step20.ckpt"):  # neither holds a config: the line names the one that was read
        fake_checkpoint(run / "checkpoints" / name)
    code, err = exit_line([f"ckpt_path={run}"], capsys)
    assert code == 2 and f"ckpt_path={(run / 'checkpoints' / 'step20.ckpt').resolve()} holds no run config" in err
