"""``python -m experiments.bench ensemble-step``: its split arrangement computes the whole batch's gradient, its
line fit recovers a known line, and the command runs end to end on a tiny cell, one row per arrangement,
examples per member and thread count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from experiments.bench import build_parser, check_arguments
from experiments.bench.ensemble_step import _fit, _members, _rows_of, _steps, ensemble_step
from experiments.config.spec import build_spec
from tests.helpers.config import TINY, compose

# a seq2seq cell of two members, small enough for seconds; batches of 8 examples per member
CELL = [*TINY, "attention=multihead", "position=sinusoidal", "model.dropout=0.0"]


def _grads(params: list[torch.Tensor]) -> list[torch.Tensor]:
    out = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    return out


def test_the_split_step_sums_to_the_whole_batch_gradient(tmp_path: Path) -> None:
    """Two threads each on half the examples, each half's mean weighted by its share of the scored
    targets: the summed gradient is the whole batch's (torch's own backward of the unsplit step)."""
    parts, ensemble, stream = _members(build_spec(compose(CELL)), 2, tmp_path)
    batch = next(iter(stream))
    assert batch["targets"].shape[1] >= 2
    # halves of unequal scored targets: the weighting matters (the plain average of the two means would differ)
    half = batch["targets"].shape[1] // 2
    scored = (batch["targets"] != -100).flatten(2).sum(-1)  # (N, B)
    assert (scored[:, :half].sum(-1) != scored[:, half:].sum(-1)).any()
    whole, params = _steps(parts, ensemble, "ensemble")
    whole(batch)
    expected = _grads(params)
    split, same = _steps(parts, ensemble, "split")
    assert same == params
    split(batch)
    for got, want in zip(_grads(params), expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert any(w.abs().sum() > 0 for w in expected)


def test_the_rows_of_a_batch_are_every_members_first_examples(tmp_path: Path) -> None:
    parts, ensemble, stream = _members(build_spec(compose(CELL)), 2, tmp_path)
    batch = next(iter(stream))
    sub = _rows_of(batch, slice(0, 3))
    for key, value in batch["inputs"].items():
        assert torch.equal(sub["inputs"][key], value[:, :3])
    assert torch.equal(sub["targets"], batch["targets"][:, :3])


def test_the_line_fit_recovers_a_known_line() -> None:
    points = [(b, 15.0 + 2.25 * b) for b in (1, 8, 16, 32)]
    fixed, slope = _fit(points)
    assert fixed == pytest.approx(15.0) and slope == pytest.approx(2.25)
    assert _fit([(8, 30.0), (8, 31.0)]) is None  # one batch size: no line


def test_the_command_writes_a_row_per_arrangement_batch_and_thread(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rows.json"
    args = build_parser().parse_args(
        ["ensemble-step", "--cell", *CELL, "--seeds", "2", "--batches", "2", "4", "--threads", "1"]
        + ["--steps", "2", "--split", "--out", str(out)]
    )
    check_arguments(args)
    assert ensemble_step(args) == 0
    rows = json.loads(out.read_text())
    seen = {(r["arrangement"], r["batch"], r["threads"]) for r in rows}
    names = ("ensemble", "one-model-Nx", "N-models", "split")
    assert seen == {(a, b, 1) for a in names for b in (2, 4)}
    assert all(r["ms"] > 0 for r in rows)
    printed = capsys.readouterr().out
    assert "ms fixed +" in printed and "| split | 1 | 4 |" in printed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ensemble-step", "--seeds", "1"], "--seeds=1 is not allowed"),
        (["ensemble-step", "--only", "vmap"], "--only vmap is not allowed; choose among ensemble, one-model-Nx"),
        (
            ["ensemble-step", "--batches", "64"],
            "--batches=64 is not allowed; the cell's batches hold task.batch_size=32",
        ),
        (["ensemble-step", "--cell", "experiment=quick", "attention=sofft"], "attention=sofft is unknown"),
        (["ensemble", "--cell", "experiment=quick", "attention=sofft"], "attention=sofft is unknown"),
    ],
)
def test_bad_options_are_refused_in_one_line_before_any_work(
    argv: list[str], message: str, capsys, monkeypatch
) -> None:
    """Exit 2 and one line naming the option, before a member is assembled or a run started."""
    import experiments.ensemble.fit as fit
    from experiments.bench import main

    def no_work(*args, **kwargs):
        raise AssertionError("work began before the options were checked")

    monkeypatch.setattr(fit, "train_loaders", no_work)
    monkeypatch.setattr("experiments.bench.ensemble._time_each", no_work)
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
