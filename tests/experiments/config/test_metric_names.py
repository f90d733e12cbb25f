"""The metric names a run logs (experiments/config/metric_names.py), read before any datamodule exists, follow
what the task's class declares (``bleu_at_test``), never the task's name."""

from __future__ import annotations

import pytest

from experiments.config.metric_names import logged_metrics
from experiments.tasks import TASKS
from tests.helpers.config import compose

# the scores TaskModule.bleu_scores adds to result.json when the task's test decodes text
BLEU = {"test/bleu", "test/chrf"}


@pytest.mark.parametrize("name", TASKS.names())
def test_bleu_metrics_follow_the_tasks_declaration(name: str, monkeypatch) -> None:
    cfg = compose([f"task={name}"])
    task = TASKS.get(name)
    declared = task.bleu_at_test
    assert logged_metrics(cfg, "result") & BLEU == (BLEU if declared else set())
    # the other answer, declared by the same class: a task of any name that decodes text may score BLEU
    monkeypatch.setattr(task, "bleu_at_test", not declared)
    assert logged_metrics(cfg, "result") & BLEU == (set() if declared else BLEU)
    assert not logged_metrics(cfg, "val") & BLEU, "BLEU is scored at the test only"


def test_translation_is_the_built_in_task_that_scores_bleu() -> None:
    # the declaration a translation run's result.json follows (tests/experiments/training/test_train.py trains one
    # and finds test/bleu)
    assert [name for name in TASKS.names() if TASKS.get(name).bleu_at_test] == ["translation"]
