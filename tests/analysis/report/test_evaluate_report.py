"""Evaluations in the report and the collector: read as evaluations, one row each, never as runs (hand-written
evaluation.json files, so the expected table is known without running anything)."""

from __future__ import annotations

import json
from pathlib import Path

from analysis.collect import collect, collect_evaluations
from analysis.report.sections.evaluations_section import evaluations_section


def evaluation(run_id: str, attention: str, seed: int, by_length: dict, overrides: list[str]) -> dict:
    return {
        "schema": 1,
        "run_id": run_id,
        "status": "completed",
        "task": "reverse",
        "attention": attention,
        "position": "sinusoidal",
        "seed": seed,
        "metrics": {"test/seq_acc": 0.5},
        "by_length": by_length,
        "config": {"task.name": "reverse", "seed": seed},
        "evaluation": {"id": f"ev-{run_id}", "checkpoint": f"/{run_id}/last.ckpt", "step": 300, "overrides": overrides},
    }


def write(path: Path, payload: dict) -> None:
    path.mkdir(parents=True)
    (path / "evaluation.json").write_text(json.dumps(payload))


def test_evaluations_are_a_table_per_task_with_a_column_per_length(tmp_path: Path) -> None:
    lengths = ["task.eval_lengths=[32,64]"]
    write(
        tmp_path / "a" / "eval" / "t1",
        evaluation("a", "multihead", 0, {"32": {"seq_acc": 0.25, "token_acc": 0.9}, "64": {"seq_acc": 0.125}}, lengths),
    )
    write(tmp_path / "b" / "eval" / "t1", evaluation("b", "local", 1, {"32": {"seq_acc": 0.75}}, lengths))
    # an evaluation kept aside with an earlier run of the folder is not one of the sweep's
    (tmp_path / "b" / "result.json").write_text("{}")
    write(tmp_path / "b" / "previous" / "old" / "eval" / "t0", evaluation("old", "local", 1, {"8": {}}, []))

    section = evaluations_section([tmp_path])
    assert section is not None and section.title == "Evaluations of checkpoints"
    (table,) = [b for b in section.blocks if hasattr(b, "header")]
    assert table.header == ["run", "variant", "seed", "step", "overrides", "seq_acc @ 32", "seq_acc @ 64"]
    # rows ordered by variant: local before multihead; a length an evaluation lacks is shown as missing
    assert table.rows == [
        ["b", "local+sinusoidal", "1", "300", "task.eval_lengths=[32,64]", "0.750", "—"],
        ["a", "multihead+sinusoidal", "0", "300", "task.eval_lengths=[32,64]", "0.250", "0.125"],
    ]


def test_no_evaluation_no_section_and_the_collector_reads_none_as_a_run(tmp_path: Path) -> None:
    assert evaluations_section([tmp_path]) is None
    write(tmp_path / "a" / "eval" / "t1", evaluation("a", "multihead", 0, {"32": {"seq_acc": 0.25}}, []))
    assert collect_evaluations(tmp_path).runs["kind"].tolist() == ["evaluation"]
    assert collect(tmp_path).runs.empty
