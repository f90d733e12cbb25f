"""The loop bench (experiments/bench/loop.py): its plain loop evaluates what attnlab evaluates, its probe
books each block where it belongs, and its check fails a slow step."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from experiments.bench import _loop_probe
from experiments.bench._loop_plain import PlainLoop
from experiments.bench.loop import generated_corpus
from experiments.config.schema import OptimConf
from experiments.model.transformer import ModelSpec, VariantSpec


def _text(path, characters=6000):
    rng = np.random.default_rng(1)
    path.write_text("".join(rng.choice(list("abcdef ghij\nKLM"), size=characters)), encoding="utf-8")
    return path


def _plain(path, **kwargs):
    spec = ModelSpec(
        vocab_size=4 + 15,
        d_model=16,
        decoder_layers=1,
        ffn_dim=32,
        arch="decoder",
        norm="pre",
        attention=VariantSpec("multihead", {"num_heads": 2}),
        position=VariantSpec("learned", {}),
        dropout=0.0,
    )
    options = dict(context=8, batch_size=4, val_fraction=0.1, val_windows=10, eval_contexts=[8, 16], max_steps=20)
    return PlainLoop(path, spec, OptimConf(), device=torch.device("cpu"), seed=0, **{**options, **kwargs})


def test_plain_loop_reads_the_held_out_windows_the_task_validates_on(tmp_path):
    """Windows of the last 10% at evenly spaced starts, by hand from the text, for the plain loop and CharLM."""
    from experiments.tasks.charlm import CharLM

    path = _text(tmp_path / "t.txt")
    text = path.read_text(encoding="utf-8")
    held = text[len(text) - round(len(text) * 0.1) :]
    starts = [round(s) for s in np.linspace(0, len(held) - 9, num=10)]
    expected = [held[s : s + 9] for s in starts]
    alphabet = sorted(set(text))

    def chars(rows):
        return ["".join(alphabet[i - 4] for i in row.tolist()) for row in rows]

    plain = _plain(path)
    assert chars(torch.cat(plain.val_batches)) == expected
    task = CharLM(path=str(path), context=8, val_windows=10, eval_contexts=[8, 16], batch_size=4)
    assert chars(torch.stack([e["tokens"] for e in task.build_split("val")])) == expected


def test_plain_loss_is_the_mean_cross_entropy_over_every_position(tmp_path):
    """The evaluation's mean, against a per-window sum of -log softmax taken by hand."""
    plain = _plain(_text(tmp_path / "t.txt"))
    total, count = 0.0, 0
    with torch.no_grad():
        plain.model.eval()
        for tokens in plain.val_batches:
            for row in tokens:
                logp = torch.log_softmax(plain.model(tgt_in=row[None, :-1])[0].double(), -1)  # (T, V)
                total -= float(logp[torch.arange(len(row) - 1), row[1:]].sum())
                count += len(row) - 1
    assert plain.loss(plain.val_batches) == pytest.approx(total / count, rel=1e-5)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakePlain:
    """Takes ``ms`` per step and 0.5 s per evaluation on the fake clock."""

    def __init__(self, clock: FakeClock, ms: float) -> None:
        self.clock, self.ms, self.blocks, self.evaluations = clock, ms, [], 0

    def block(self, steps: int) -> float:
        self.blocks.append(steps)
        self.clock.now += steps * self.ms / 1000
        return self.ms

    def evaluate(self) -> float:
        self.evaluations += 1
        self.clock.now += 0.5
        return 0.0


def test_probe_times_clean_blocks_and_gives_the_plain_loop_its_turns(monkeypatch):
    """13 steps of 10 ms in blocks of 4, a validation of 2 s after step 6: blocks 0-3 and 8-11 time at
    10 ms a step, block 4-7 (the validation's) is left out, step 12's block never closes; the plain loop
    steps 4 at each of the 3 boundaries and evaluates once, and none of its time is in attnlab's blocks."""
    clock = FakeClock()
    plain = FakePlain(clock, ms=7.0)
    monkeypatch.setattr(_loop_probe, "PLAIN", plain)
    probe = _loop_probe.LoopProbe(block=4)
    trainer = SimpleNamespace(global_step=0, sanity_checking=False, state=SimpleNamespace(fn="fit"))
    module = SimpleNamespace(device=torch.device("cpu"))
    for step in range(13):
        trainer.global_step = step
        probe.on_train_batch_start(trainer, module, None, step)
        clock.now += 0.010
        if step == 6:
            probe.on_validation_start(trainer, module)
            clock.now += 2.0
            probe.on_validation_end(trainer, module)
    trainer.global_step = 13
    probe.on_train_end(trainer, module)
    assert probe.times.steps_ms == pytest.approx([10.0, 10.0])
    assert probe.times.evals == pytest.approx([2.0])
    assert plain.blocks == [4, 4, 4] and plain.evaluations == 1
    assert probe.times.plain_seconds == pytest.approx(3 * 4 * 0.007 + 0.5)
    assert probe.times.first_step == 0.0
    # 13 steps, 2 s of validation and the plain loop's turns
    assert probe.times.train_end == pytest.approx(0.13 + 2.0 + 3 * 4 * 0.007 + 0.5)


def test_generated_corpus_has_shakespeares_alphabet_size_and_length(tmp_path):
    text = generated_corpus(tmp_path / "c.txt", characters=50_000).read_text(encoding="utf-8")
    assert len(text) == 50_000
    assert len(set(text)) == 65  # 26 + 26 letters, 11 punctuation marks and digits, space and newline
    assert generated_corpus(tmp_path / "d.txt", characters=50_000).read_text(encoding="utf-8") == text


@pytest.mark.slow
def test_bench_fails_a_step_ratio_above_the_allowed_one_and_still_reports(tmp_path, capsys):
    """The whole command on a tiny model: attnlab's real run completes beside the plain loop, every phase
    is measured, and an impossible --max-step-ratio makes it exit 1."""
    from experiments.bench import main

    out = tmp_path / "loop.json"
    tiny = ["model.d_model=16", "model.ffn_dim=32", "model.decoder_layers=1", "attention.num_heads=2"]
    argv = ["loop", "--data", str(tmp_path / "absent.txt"), "--steps", "24", "--block", "4", "--val-every", "12"]
    code = main([*argv, "--work", str(tmp_path / "w"), "--max-step-ratio", "0.01", "--out", str(out), *tiny])
    assert code == 1
    assert "FAIL: attnlab's step is" in capsys.readouterr().err
    figures = json.loads(out.read_text())
    assert figures["setup"]["data"] == "generated"
    # 24 steps in blocks of 4: 5 closed at a boundary (steps 4 to 20), the one holding the validation after
    # step 12 left out; the plain loop steps 4 at each of the 5 boundaries
    assert figures["blocks"] == {"attnlab": 4, "plain": 5}
    assert all(v > 0 for v in figures["ratios"].values())
    assert figures["val_loss"]["attnlab"] == pytest.approx(figures["val_loss"]["plain"], abs=0.5)


@pytest.mark.parametrize(
    ("ratios", "attempts", "calls", "code"),
    [
        ([1.2, 1.05, 1.0], 3, 2, 0),  # noise above the limit once, then within: passes at the second
        ([1.2, 1.3, 1.15], 3, 3, 1),  # above in every attempt: fails after all three
        ([1.2, 1.0], 1, 1, 1),  # one attempt allowed
        ([1.0, 1.3], 3, 1, 0),  # within at once: measured once
    ],
)
def test_the_check_measures_again_while_above_the_limit_and_fails_only_when_every_attempt_is(
    monkeypatch, tmp_path, capsys, ratios, attempts, calls, code
):
    from experiments.bench import loop as bench_loop
    from experiments.bench import main

    made = []

    def canned(args, data, work, cuda):
        made.append(work)
        return {"ratios": {"step": ratios[len(made) - 1]}}

    monkeypatch.setattr(bench_loop, "measure_once", canned)
    monkeypatch.setattr(bench_loop, "_print", lambda figures: None)
    monkeypatch.setattr(bench_loop, "generated_corpus", lambda path: path)  # 4 s of text the canned runs never read
    argv = ["loop", "--data", str(tmp_path / "absent.txt"), "--work", str(tmp_path / "w")]
    assert main([*argv, "--max-step-ratio", "1.1", "--attempts", str(attempts)]) == code
    assert len(made) == calls and len(set(made)) == calls  # each attempt in a folder of its own
    if code:
        assert f"in {calls} attempt(s) (allowed: 1.1x)" in capsys.readouterr().err


class Turns:
    """A stand-in plain loop whose blocks take the given milliseconds per step, noting the turns taken."""

    def __init__(self, name: str, ms: list[float], turns: list[tuple[str, int]]) -> None:
        self.name, self.ms, self.turns = name, list(ms), turns
        self.times = SimpleNamespace(steps_ms=[])

    def block(self, steps: int) -> float:
        self.turns.append((self.name, steps))
        self.times.steps_ms.append(self.ms.pop(0))
        return self.times.steps_ms[-1]


def test_the_aa_mode_alternates_two_loops_first_then_second_and_reports_their_ratio():
    from experiments.bench.loop import noise_figures

    turns: list[tuple[str, int]] = []
    first = Turns("first", [50.0, 10.0, 12.0, 11.0, 30.0], turns)
    second = Turns("second", [40.0, 10.0, 10.0, 12.0, 10.0], turns)
    # 23 steps in turns of 5: 4 whole turns each, the last 3 steps left out as the bench's plain loop leaves them
    figures = noise_figures(first, second, steps=23, block=5)
    assert turns == [("first", 5), ("second", 5)] * 4
    # by hand: the first block (warm-up) out; medians of [10, 12, 11] and [10, 10, 12]; block ratios 1, 1.2, 11/12
    assert figures["step_ms"] == {"first": 11.0, "second": 10.0}
    assert figures["ratios"]["step"] == pytest.approx(1.1)
    assert figures["paired_step_ratio"] == pytest.approx({"median": 1.0, "min": 11 / 12, "max": 1.2})
    assert figures["blocks"] == 4


@pytest.mark.parametrize("option", [["--max-step-ratio", "1.1"], ["--val-every", "10"]])
def test_the_aa_mode_refuses_what_it_would_not_use_before_any_work(tmp_path, capsys, monkeypatch, option):
    from experiments.bench import loop as bench_loop
    from experiments.bench import main

    monkeypatch.setattr(bench_loop, "measure_noise", lambda *a: pytest.fail("measured before refusing"))
    with pytest.raises(SystemExit) as info:
        main(["loop", "--aa", *option, "--data", str(tmp_path / "absent.txt")])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"{option[0]} is not allowed with --aa" in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_the_aa_mode_runs_two_real_plain_loops_of_the_preset_and_writes_its_figures(tmp_path, capsys):
    from experiments.bench import main

    out = tmp_path / "aa.json"
    tiny = ["model.d_model=16", "model.ffn_dim=32", "model.decoder_layers=1", "attention.num_heads=2"]
    argv = ["loop", "--aa", "--data", str(tmp_path / "absent.txt"), "--steps", "8", "--block", "2"]
    assert main([*argv, "--work", str(tmp_path / "w"), "--out", str(out), *tiny]) == 0
    figures = json.loads(out.read_text())
    assert figures["blocks"] == 4 and len(figures["block_step_ms"]["second"]) == 4
    assert figures["ratios"]["step"] == pytest.approx(figures["step_ms"]["first"] / figures["step_ms"]["second"])
    assert "loop bench, A/A: two identical plain loops" in capsys.readouterr().out
