"""Tasks are one registry kind: every task's entry declares its kind, the architectures it fits and the metrics it
logs; the declared metrics are what its adapter logs, and a throwaway task registered here passes the config
checks and trains with no other edit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from attnlab.registry import registry
from experiments.config.checks import check_config, check_task_fit
from experiments.config.errors import ConfigError
from experiments.config.metric_names import logged_metrics
from experiments.config.spec import build_spec
from experiments.tasks import TASKS
from experiments.tasks.base import FIRST_SYMBOL_ID
from experiments.tasks.synthetic import SyntheticTask, with_eos
from experiments.training.task_adapters import adapter_for
from tests.helpers.config import TINY, compose
from tests.helpers.paths import ROOT

BLEU = {"test/bleu", "test/chrf"}  # what TaskModule adds to result.json when the task's test decodes text


def adapter_logs(kind: str, arch: str, text_scores: bool) -> dict[str, set[str]]:
    """The metric names the training module logs for a task of ``kind`` on ``arch``, asked of its adapter (as
    experiments/training/module.py does), per stage of ``logged_metrics``."""
    adapter = adapter_for(kind, arch, pad_id=0, bos_id=1, sep_id=2)
    zero = torch.zeros(())
    val = {"val/loss", *adapter.epoch_metrics("val", zero, zero)}
    test = {"test/loss", *adapter.epoch_metrics("test", zero, zero, zero)} | (BLEU if text_scores else set())
    return {"val": {"train/loss", *val}, "result": val | test}


def task_problems(names: list[str]) -> list[str]:
    """What is wrong with any of the tasks ``names``: on every architecture it declares, the metrics its entry
    gives (``logged_metrics``) are those its adapter logs; and one architecture it does not declare is refused."""
    problems = []
    for name in names:
        entry, cls = TASKS.declared(name), TASKS.get(name)
        for arch in entry.architectures:
            cfg = compose([f"task={name}" if (ROOT / "conf" / "task" / f"{name}.yaml").exists() else "task=copy"])
            cfg.task.name, cfg.model.arch = name, arch
            expected = adapter_logs(entry.kind, arch, cls.bleu_at_test)
            for stage in ("val", "result"):
                if logged_metrics(cfg, stage) != expected[stage]:
                    problems.append(f"{name} on {arch}, {stage}: {sorted(logged_metrics(cfg, stage))}")
        other = sorted({"seq2seq", "decoder", "encoder"} - set(entry.architectures))
        if other:
            cfg = compose(["task=copy", f"model.arch={other[0]}"])
            cfg.task.name = name
            fake = type("Data", (), {"kind": entry.kind})
            try:
                check_task_fit(build_spec(cfg), fake)
                problems.append(f"{name}: model.arch={other[0]} is not refused")
            except ConfigError as err:
                if str(entry.architectures[0]) not in str(err):
                    problems.append(f"{name}: the refusal does not name what is allowed: {err}")
    return problems


@pytest.mark.slow  # composes every task's config on each architecture (about 15 s)
def test_every_task_declares_what_it_logs_and_fits():
    assert task_problems(TASKS.names()) == []
    assert registry("task") is TASKS
    assert {"copy", "reverse", "translation", "listops", "charlm"} <= set(TASKS.names())


class Mirror(SyntheticTask):
    """A throwaway task: the symbols of the source and then the same symbols reversed."""

    kind = "seq2seq"
    default_train_lengths = (2, 6)
    default_eval_lengths = (8,)

    def __init__(self, *, num_symbols: int = 5, **shared: Any) -> None:
        super().__init__(**shared)
        self.num_symbols, self.vocab_size = num_symbols, FIRST_SYMBOL_ID + num_symbols

    def generate(self, rng: np.random.Generator, n: int, count: int) -> dict[str, np.ndarray]:
        src = FIRST_SYMBOL_ID + rng.integers(0, self.num_symbols, size=(count, n))  # (count, n)
        return {"src": src, "tgt": with_eos(np.concatenate([src, src[:, ::-1]], axis=1))}  # (count, 2n + 1)

    def source_length(self, n: int) -> int:
        return n

    def target_length(self, n: int) -> int:
        return 2 * n + 1


@pytest.mark.slow  # trains two steps (about 10 s)
def test_a_throwaway_task_is_one_registered_class(tmp_path: Path):
    from experiments.training.single_run import train

    TASKS.register("mirror_throwaway")(Mirror)
    try:
        assert TASKS.declared("mirror_throwaway").kind == "seq2seq"
        assert task_problems(["mirror_throwaway"]) == []
        overrides = ["task=copy", "task.name=mirror_throwaway", "task.eval_lengths=[8]", *TINY]
        cfg = compose(overrides)
        check_config(cfg)
        result = train(build_spec(cfg), tmp_path, overrides)
        assert result["status"] == "completed" and result["task"] == "mirror_throwaway"
        assert set(result["metrics"]) >= logged_metrics(cfg, "result")
    finally:
        TASKS.unregister("mirror_throwaway")
    with pytest.raises(ValueError, match="task='mirror_throwaway' is unknown; choose one of .*'copy'"):
        check_config(compose(["task=copy", "task.name=mirror_throwaway"]))
