"""What ``trainer.predict`` returns for a task, as token ids or text.

    data = TASKS.build("reverse", seed=0, eval_lengths=[16])            # or the run's own task
    outputs = trainer.predict(module, dataloaders=data.test_dataloader())  # one dict per batch
    token_lists(outputs)           # [[7, 5, 9, ...], ...]: each example's prediction, to its first EOS
    texts(outputs, data.decode)    # ["7 5 9 ...", ...]

Each batch's dict is ``TransformerModule.predict_step``'s: ``predicted`` and ``target`` aligned, ``scored`` where
they count (the test's accuracy counts the same positions), ``length`` the example's tag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from torch import Tensor

from experiments.tasks.base import EOS_ID


def token_lists(outputs: Iterable[Mapping[str, Tensor]], eos_id: int = EOS_ID) -> list[list[int]]:
    """Each example's predicted ids at its scored positions, in order, up to (not including) the first EOS;
    a classifier's ``[label]``."""
    found: list[list[int]] = []
    for batch in outputs:
        predicted, scored = batch["predicted"].cpu(), batch["scored"].cpu()
        if predicted.dim() == 1:  # classify: (B,) labels
            found.extend([int(label)] for label in predicted)
            continue
        for row, keep in zip(predicted, scored):  # (T,) each
            ids = row[keep].tolist()
            found.append(ids[: ids.index(eos_id)] if eos_id in ids else ids)
    return found


def texts(outputs: Iterable[Mapping[str, Tensor]], decode: Callable[[Sequence[int]], str]) -> list[str]:
    """Each example's prediction as text, by the task's ``decode`` (``TaskDataModule.decode``: specials left out)."""
    return [decode(ids) for ids in token_lists(outputs)]
