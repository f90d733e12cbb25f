"""task.test_windows: the character LM's test reads that many evenly spaced held-out windows at each evaluation
context (null: val_windows), and the loop bench's plain loop tests on the same windows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experiments.tasks.charlm import CharLM
from tests.experiments.bench.test_bench_loop import _plain, _text


def _by_hand(text: str, context: int, count: int) -> list[str]:
    """``count`` windows of ``context + 1`` characters of the last 10% of ``text``, at evenly spaced starts."""
    held = text[len(text) - round(len(text) * 0.1) :]
    starts = [round(s) for s in np.linspace(0, len(held) - context - 1, num=count)]
    return [held[s : s + context + 1] for s in starts]


def _chars(rows: list[torch.Tensor], text: str) -> list[str]:
    alphabet = sorted(set(text))
    return ["".join(alphabet[i - 4] for i in row.tolist()) for row in rows]


@pytest.mark.parametrize("test_windows", [None, 3])
def test_the_test_split_holds_test_windows_evenly_spaced_windows_per_context(tmp_path, test_windows):
    path = _text(tmp_path / "t.txt")
    text = path.read_text(encoding="utf-8")
    task = CharLM(path=str(path), context=8, val_windows=10, eval_contexts=[8, 16], test_windows=test_windows)
    count = 10 if test_windows is None else test_windows
    expected = _by_hand(text, 8, count) + _by_hand(text, 16, count)
    tested = task.build_split("test")
    assert _chars([e["tokens"] for e in tested], text) == expected
    assert [e["length"] for e in tested] == [8] * count + [16] * count
    # validation keeps val_windows whatever the test reads
    assert _chars([e["tokens"] for e in task.build_split("val")], text) == _by_hand(text, 8, 10)


def test_the_plain_loop_tests_on_the_tasks_test_windows(tmp_path):
    path = _text(tmp_path / "t.txt")
    text = path.read_text(encoding="utf-8")
    plain = _plain(path, test_windows=3)
    rows = [row for batch in plain.test_batches for row in batch]
    assert _chars(rows, text) == _by_hand(text, 8, 3) + _by_hand(text, 16, 3)


def test_a_test_windows_below_one_is_refused_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match="test_windows"):
        CharLM(path=str(_text(tmp_path / "t.txt")), context=8, eval_contexts=[8], test_windows=0)
