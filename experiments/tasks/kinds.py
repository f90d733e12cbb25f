"""The kinds of task (seq2seq, lm, classify): the architectures each fits and the metrics each logs.

A task declares its kind on its class; its registry entry (``experiments.tasks.registry.TaskEntry``) reads the
architectures and metric names from here, so the config checks and the sweepers learn them from the registry
without building data or a model. A new kind is a row here and an adapter in
``experiments/training/task_adapters.py``; ``tests/experiments/tasks/test_plugin_tasks.py`` holds every task's
declared metrics equal to what its adapter logs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskKind:
    """One kind: the model architectures it fits and the metrics a run logs besides ``<stage>/loss`` (``val``:
    every validation; ``test``: the final test)."""

    architectures: tuple[str, ...]
    val: tuple[str, ...]
    test: tuple[str, ...]

    def metrics(self, text_scores: bool) -> tuple[str, ...]:
        """Every metric name a run of this kind logs; ``text_scores``: the test also scores decoded text."""
        val = ("val/loss", *(f"val/{m}" for m in self.val))
        test = ("test/loss", *(f"test/{m}" for m in self.test), *(TEXT_SCORES if text_scores else ()))
        return ("train/loss", *val, *test)


# seq2seq validates teacher-forced tokens and tests whole sequences too (greedy decoding); a decoder-only model
# reads a seq2seq example as source, separator, target
TASK_KINDS = {
    "seq2seq": TaskKind(("seq2seq", "decoder"), val=("token_acc",), test=("token_acc", "seq_acc")),
    "lm": TaskKind(("decoder",), val=("token_acc", "ppl", "bpc"), test=("token_acc", "ppl", "bpc")),
    "classify": TaskKind(("encoder",), val=("acc",), test=("acc",)),
}
# corpus BLEU and chrF of the decoded test set, for a task whose class sets bleu_at_test
TEXT_SCORES = ("test/bleu", "test/chrf")


def task_kind(kind: str, owner: str) -> TaskKind:
    """The kind named ``kind`` (declared by ``owner``, a task class), or a one-line error naming the kinds."""
    if kind not in TASK_KINDS:
        raise TypeError(f"{owner}.kind={kind!r}; choose one of {list(TASK_KINDS)}")
    return TASK_KINDS[kind]
