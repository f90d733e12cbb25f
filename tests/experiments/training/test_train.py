"""The training app end to end: result.json, every pair through Hydra, learning, the file-based tasks."""

from __future__ import annotations

import gzip
import json
import math
import os
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments.config.spec import build_spec
from experiments.tasks.base import FIRST_SYMBOL_ID
from tests.helpers.cases import skip_if_incompatible
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY, compose
from tests.helpers.env import environment
from tests.helpers.results import RESULT_KEYS
from tests.helpers.runs import run
from variants import ATTENTION, POSITION


def all_finite(tree) -> bool:
    if isinstance(tree, dict):
        return all(all_finite(v) for v in tree.values())
    if isinstance(tree, float):
        return math.isfinite(tree)
    return True


def test_cli_writes_a_valid_result(tmp_path: Path) -> None:
    out = tmp_path / "run"
    overrides = [*TINY, "trainer.max_steps=3", "logger=default", "eval.attention_maps=true"]
    proc = train_cli(*overrides, f"hydra.run.dir={out}", env=environment(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    assert RESULT_KEYS <= set(result)
    assert result["schema"] == 1 and result["status"] == "completed" and result["error"] is None
    assert {"val/loss", "test/token_acc", "test/seq_acc"} <= set(result["metrics"])
    assert set(result["by_length"]) == {"8", "12", "16", "24"}
    assert all_finite(result["metrics"]) and all_finite(result["by_length"]) and all_finite(result["cost"])
    assert result["cost"]["steps"] == 3 and result["cost"]["params"] > 0
    assert result["config"]["trainer.max_steps"] == 3
    assert result["env"]["torch"] and result["env"]["git_sha"]
    assert (out / "csv" / "metrics.csv").exists() and (out / "attention_maps.npz").exists()
    assert list((out / "wandb").glob("offline-run-*"))
    assert not list(out.glob(".result.json*")), "no temp file left behind"


@pytest.mark.parametrize("position", POSITION.names())
@pytest.mark.parametrize("attention", ATTENTION.names())
@pytest.mark.parametrize("arch", ["seq2seq", "decoder"])
def test_every_pair_composes_and_runs(arch: str, attention: str, position: str, tmp_path: Path) -> None:
    skip_if_incompatible(attention, position)
    overrides = [
        *TINY,
        f"model.arch={arch}",
        f"attention={attention}",
        f"position={position}",
        "trainer.fast_dev_run=true",
        "trainer.max_steps=1",
    ]
    result = run(overrides, tmp_path)
    assert result["status"] == "completed", result["error"]
    assert math.isfinite(result["metrics"]["test/loss"])


@pytest.mark.slow
def test_reverse_is_learned(tmp_path: Path) -> None:
    """Learning really happens: generated outputs at the training lengths are >= 95% right."""
    overrides = [
        "task=reverse",
        "attention=multihead",
        "position=sinusoidal",
        "logger=none",
        "attention.num_heads=4",
        "model.dropout=0.0",
        "model.ffn_dim=128",
        "optim.lr=3e-3",
        "optim.warmup_steps=50",
        "optim.schedule=cosine",
        "task.train_lengths=[2,8]",
        "task.eval_lengths=[4,8]",
        "task.test_size=64",
        "task.val_size=128",
        "trainer.max_steps=500",
        "trainer.val_check_interval=500",
        "progress_bar=false",
        "eval.attention_maps=false",
        "checkpoint_every_n_steps=1000",
    ]
    result = run(overrides, tmp_path)
    assert result["status"] == "completed", result["error"]
    for length in ("4", "8"):
        assert result["by_length"][length]["token_acc"] >= 0.95, result["by_length"]


def write_text(path: Path, n_lines: int = 400) -> None:
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home"]
    lines = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(3 + i % 5)) for i in range(n_lines)]
    path.write_text("\n".join(lines) + "\n")


def entropy_bits(text: str) -> float:
    """Bits per character of the best context-free guess: the text's own character frequencies."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def test_charlm_runs_end_to_end(tmp_path: Path) -> None:
    """60 steps take the bits per character below a uniform guess over the vocabulary, and below the
    character frequencies alone (3.63 bits on this corpus; the run reaches about 2.8)."""
    text = tmp_path / "corpus.txt"
    write_text(text)
    overrides = [
        "task=charlm",
        f"task.path={text}",
        "task.context=16",
        "task.eval_contexts=[16,32]",
        "task.train_batches_per_epoch=4",
        "task.val_windows=8",
        "task.batch_size=4",
        "model.arch=decoder",
        "model.d_model=16",
        "model.ffn_dim=32",
        "model.decoder_layers=1",
        "attention.num_heads=2",
        "optim.lr=1e-2",
        "optim.warmup_steps=10",
        "trainer.max_steps=60",
        "trainer.val_check_interval=60",
        "progress_bar=false",
        "logger=none",
        "eval.attention_maps=false",
    ]
    result = run(overrides, tmp_path / "run")
    assert result["status"] == "completed", result["error"]
    m = result["metrics"]
    assert math.isclose(m["test/ppl"], math.exp(m["test/loss"]), rel_tol=1e-4)
    assert math.isclose(m["test/bpc"], m["test/loss"] / math.log(2), rel_tol=1e-4)
    assert set(result["by_length"]) == {"16", "32"}
    corpus = text.read_text()
    uniform = math.log2(FIRST_SYMBOL_ID + len(set(corpus)))  # 4.39 bits
    for bpc in (m["test/bpc"], *(r["bpc"] for r in result["by_length"].values())):
        assert bpc < entropy_bits(corpus) < uniform, (bpc, result["by_length"])


def write_parallel(folder: Path, n: int = 300) -> dict[str, Path]:
    words_en = ["a", "man", "woman", "dog", "runs", "sits", "on", "the", "street", "grass", "red", "big"]
    words_de = ["ein", "mann", "frau", "hund", "läuft", "sitzt", "auf", "der", "straße", "wiese", "rot", "groß"]
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, size in (("train", n), ("val", 20)):
        idx = [[(i * 5 + j * 7 + (split == "val")) % len(words_en) for j in range(3 + i % 4)] for i in range(size)]
        en = "\n".join(" ".join(words_en[k] for k in row) for row in idx) + "\n"
        de = "\n".join(" ".join(words_de[k] for k in row) for row in idx) + "\n"
        files[f"{split}_src"] = folder / f"{split}.de.gz"
        with gzip.open(files[f"{split}_src"], "wt", encoding="utf-8") as f:
            f.write(de)
        files[f"{split}_tgt"] = folder / f"{split}.en"
        files[f"{split}_tgt"].write_text(en)
    return files


def test_translation_runs_end_to_end_and_reports_bleu(tmp_path: Path) -> None:
    """24 training pairs, tested on the same pairs: 60 steps overfit them to a BLEU near 70 (chrF near 75);
    generation, decoding or scoring that goes wrong gives much less."""
    files = write_parallel(tmp_path / "data", n=24)
    files |= {"test_src": files["train_src"], "test_tgt": files["train_tgt"]}
    overrides = [
        "task=translation",
        *(f"task.{k}={v}" for k, v in files.items()),
        "task.vocab_size=64",
        "task.batch_size=8",
        "model.d_model=32",
        "model.ffn_dim=64",
        "model.encoder_layers=1",
        "model.decoder_layers=1",
        "model.dropout=0.0",
        "attention.num_heads=2",
        "optim.lr=3e-3",
        "optim.warmup_steps=20",
        "trainer.max_steps=60",
        "trainer.val_check_interval=60",
        "progress_bar=false",
        "logger=none",
        "eval.attention_maps=false",
    ]
    result = run(overrides, tmp_path / "run")
    assert result["status"] == "completed", result["error"]
    assert result["metrics"]["test/bleu"] >= 40.0, result["metrics"]
    assert result["metrics"]["test/chrf"] >= 50.0, result["metrics"]


# Worked by hand: a 6-word hypothesis against an 8-word reference has n-gram precisions 6/6, 3/5, 2/4, 1/3
# and the brevity penalty e^(1 - 8/6); swapped, precisions 6/8, 3/7, 2/6, 1/5 and no penalty.
SHORT, LONG = "a dog runs on the grass", "a big dog runs on the green grass"


def test_bleu_helper_scores_hypotheses_against_references() -> None:
    import sacrebleu

    from experiments.training.module import TransformerModule

    def scores(hypotheses: list[str], references: list[str]) -> dict[str, float]:
        return TransformerModule.bleu_scores(SimpleNamespace(hypotheses=hypotheses, references=references))

    assert scores([SHORT], [LONG])["test/bleu"] == pytest.approx(
        100 * math.exp(1 - 8 / 6) * (6 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25
    )  # 40.29
    assert scores([LONG], [SHORT])["test/bleu"] == pytest.approx(100 * (6 / 8 * 3 / 7 * 2 / 6 * 1 / 5) ** 0.25)
    # chrF weighs recall twice as much as precision: the short hypothesis scores less than its swap.
    chrf = sacrebleu.metrics.CHRF()
    assert scores([SHORT], [LONG])["test/chrf"] == pytest.approx(chrf.sentence_score(SHORT, [LONG]).score)  # 61.7
    assert scores([LONG], [SHORT])["test/chrf"] == pytest.approx(chrf.sentence_score(LONG, [SHORT]).score)  # 78.9
    # A corpus is scored as one (n-gram counts summed over sentences), not as a mean of sentence scores.
    hypotheses = [SHORT, "two men sit on a red bench", "the woman reads"]
    references = [LONG, "two men are sitting on a bench", "the woman reads a big book"]
    corpus = scores(hypotheses, references)
    assert corpus["test/bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert corpus["test/chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score)
    sentence_mean = sum(sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(hypotheses, references)) / 3
    assert corpus["test/bleu"] != pytest.approx(sentence_mean)
    assert scores([], []) == {}


@pytest.mark.parametrize("task", ["reverse", "translation"])
def test_bleu_at_test_is_what_the_task_declares_not_its_name(
    task: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module scores BLEU when its datamodule declares it: flipping the declaration flips the module, whatever
    the task is called (reverse made to declare it, translation made not to)."""
    from experiments.tasks.base import TaskDataModule
    from experiments.tasks.translation import Translation
    from experiments.training.build import assemble

    overrides = [f"task={task}", *(o for o in TINY if not o.startswith("task.")), "trainer.max_steps=1"]
    if task == "translation":
        files = write_parallel(tmp_path / "data", n=8)
        overrides += [*(f"task.{k}={v}" for k, v in files.items()), "task.tokenizer=char", "task.batch_size=4"]
    else:
        overrides += ["task.train_size=16", "task.val_size=8", "task.test_size=8", "task.batch_size=8"]
    declared = {}
    for flipped in (False, True):
        if flipped:  # the subclass's own declaration, else the default every task inherits
            owner = Translation if task == "translation" else TaskDataModule
            monkeypatch.setattr(owner, "bleu_at_test", not owner.bleu_at_test)
        parts = assemble(build_spec(compose(overrides)), tmp_path / str(flipped), run_id="bleu")
        assert parts.module.bleu is parts.datamodule.bleu_at_test
        declared[flipped] = parts.module.bleu
    assert declared == {False: task == "translation", True: task != "translation"}


@pytest.mark.data
def test_shared_corpora_train_briefly(shared_data: Path, tmp_path: Path) -> None:
    m30k, shakespeare = shared_data / "multi30k", shared_data / "tinyshakespeare" / "input.txt"
    common = [
        "model.d_model=32",
        "model.ffn_dim=64",
        "attention.num_heads=2",
        "trainer.max_steps=5",
        "trainer.val_check_interval=5",
        "trainer.limit_val_batches=2",
        "trainer.limit_test_batches=2",
        "progress_bar=false",
        "logger=none",
        "eval.attention_maps=false",
    ]
    translation = run(
        [
            "task=translation",
            f"task.train_src={m30k / 'train.de.gz'}",
            f"task.train_tgt={m30k / 'train.en.gz'}",
            f"task.val_src={m30k / 'val.de.gz'}",
            f"task.val_tgt={m30k / 'val.en.gz'}",
            "task.train_limit=2000",
            "task.vocab_size=500",
            f"task.cache_dir={tmp_path / 'cache'}",
            *common,
        ],
        tmp_path / "mt",
    )
    assert translation["status"] == "completed", translation["error"]
    assert "test/bleu" in translation["metrics"]
    # 20 steps at a higher rate bring the bits per character below a uniform guess (6.11 bits; about 4.9).
    charlm = run(
        [
            "task=charlm",
            f"task.path={shakespeare}",
            "model.arch=decoder",
            "task.eval_contexts=[64]",
            "task.train_batches_per_epoch=5",
            "task.val_windows=16",
            "task.batch_size=16",
            *common,
            "trainer.max_steps=20",
            "trainer.val_check_interval=20",
            "optim.lr=1e-2",
            "optim.warmup_steps=5",
        ],
        tmp_path / "lm",
    )
    assert charlm["status"] == "completed", charlm["error"]
    uniform = math.log2(FIRST_SYMBOL_ID + len(set(shakespeare.read_text(encoding="utf-8"))))
    assert charlm["metrics"]["test/bpc"] < uniform, charlm["metrics"]


def _gather_on_rank(rank: int, world: int, port: int, out_dir: Path) -> None:
    import torch.distributed as dist

    from experiments.training.testing import gather_texts

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        share = [f"{rank}-{i}" for i in range(rank + 1)]  # unequal shares, as uneven test shards give
        hyps, refs = gather_texts([f"h{s}" for s in share], [f"r{s}" for s in share])
        (out_dir / f"{rank}.json").write_text(json.dumps([hyps, refs]))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_bleu_sees_every_ranks_sentences(tmp_path: Path) -> None:
    import socket

    import torch.multiprocessing as mp

    from experiments.training.testing import gather_texts

    assert gather_texts(["a"], ["b"]) == (["a"], ["b"])  # one process: unchanged
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_gather_on_rank, args=(2, port, tmp_path), nprocs=2)
    for rank in range(2):
        hyps, refs = json.loads((tmp_path / f"{rank}.json").read_text())
        assert hyps == ["h0-0", "h1-0", "h1-1"] and refs == ["r0-0", "r1-0", "r1-1"]
