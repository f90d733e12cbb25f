"""Task datamodules: determinism, correctness of every generator, batch contracts, file handling, errors."""

from __future__ import annotations

import gzip
import os
import random
import stat
from pathlib import Path

import lightning as L
import pytest
import torch
from omegaconf import OmegaConf

from experiments.tasks import TASKS, TaskConfigError, TaskDataModule
from experiments.tasks.base import BOS_ID, EOS_ID, FIRST_SYMBOL_ID, PAD_ID, SEP_ID
from experiments.tasks.batches import REPEATED, lm_io
from tests.helpers.paths import SHARED_DATA
from variants.registry import RegistryError

SEQ2SEQ = ["addition", "copy", "recall", "reverse", "sort"]
CLASSIFY = ["listops", "parity"]
SYNTHETIC = SEQ2SEQ + CLASSIFY

# Small but with eval lengths beyond the training range, as real runs use them.
SMALL = dict(train_lengths=[2, 6], eval_lengths=[4, 6, 9], train_size=96, val_size=24, test_size=10)
SMALL_LISTOPS = dict(
    train_lengths=[4, 20], eval_lengths=[12, 20, 30], max_depth=3, max_args=4, train_size=96, val_size=24, test_size=10
)


# -- corpora written into tmp_path ------------------------------------------------------------------
def write_text_corpus(path: Path, chars: int = 6000) -> str:
    rng = random.Random(0)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "naïve", "café"]
    text = ""
    while len(text) < chars:
        text += " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))).capitalize() + ".\n"
    path.write_text(text, encoding="utf-8")
    return text


LEXICON = {
    "a": "ein",
    "man": "Mann",
    "woman": "Frau",
    "dog": "Hund",
    "child": "Kind",
    "runs": "läuft",
    "sits": "sitzt",
    "on": "auf",
    "the": "der",
    "street": "Straße",
    "grass": "Gras",
    "with": "mit",
    "ball": "Ball",
    "red": "rote",
    "small": "kleine",
    "near": "nahe",
    "water": "Wasser",
    "plays": "spielt",
}


def parallel_sentences(count: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    english = list(LEXICON)
    src, tgt = [], []
    for _ in range(count):
        words = [rng.choice(english) for _ in range(rng.randint(2, 9))]
        src.append(" ".join(LEXICON[w] for w in words).capitalize() + ".")
        tgt.append(" ".join(words).capitalize() + ".")
    return src, tgt


def write_lines(path: Path, lines: list[str]) -> Path:
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def make_corpus(tmp_path: Path) -> dict[str, str]:
    """A tiny German-English corpus in ``tmp_path/data``; the German training side is gzipped."""
    data = tmp_path / "data"
    data.mkdir()
    files = {}
    for split, count, seed in [("train", 300, 0), ("val", 40, 1), ("test", 40, 2)]:
        de, en = parallel_sentences(count, seed)
        files[f"{split}_src"] = str(write_lines(data / (f"{split}.de.gz" if split == "train" else f"{split}.de"), de))
        files[f"{split}_tgt"] = str(write_lines(data / f"{split}.en", en))
    return files


@pytest.fixture
def corpus(tmp_path: Path) -> dict[str, str]:
    return make_corpus(tmp_path)


def build(name: str, tmp_path: Path, seed: int = 0, **params) -> TaskDataModule:
    """Any registered task, small, with files written into ``tmp_path`` where it needs them."""
    if name == "charlm":
        text_file = tmp_path / "text.txt"
        if not text_file.exists():
            write_text_corpus(text_file)
        params = (
            dict(
                path=str(text_file),
                context=16,
                eval_contexts=[16, 32],
                val_fraction=0.2,
                train_batches_per_epoch=3,
                val_windows=6,
            )
            | params
        )
    elif name == "translation":
        if not (tmp_path / "data").exists():
            make_corpus(tmp_path)
        data = tmp_path / "data"
        params = (
            dict(
                train_src=str(data / "train.de.gz"),
                train_tgt=str(data / "train.en"),
                val_src=str(data / "val.de"),
                val_tgt=str(data / "val.en"),
                test_src=str(data / "test.de"),
                test_tgt=str(data / "test.en"),
                vocab_size=200,
                cache_dir=str(tmp_path / "run"),
            )
            | params
        )
    elif name == "listops":
        params = SMALL_LISTOPS | params
    else:
        params = SMALL | params
    return TASKS.build(name, **({"seed": seed, "batch_size": 8} | params))


def all_batches(data: TaskDataModule) -> dict[str, list[dict[str, torch.Tensor]]]:
    data.setup("fit")
    data.setup("test")
    return {
        "train": list(data.train_dataloader()),
        "val": list(data.val_dataloader()),
        "test": list(data.test_dataloader()),
    }


def unpadded(row: torch.Tensor) -> list[int]:
    ids = row.tolist()
    while ids and ids[-1] == PAD_ID:
        ids.pop()
    return ids


def same(a: list[dict[str, torch.Tensor]], b: list[dict[str, torch.Tensor]]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x) for x, y in zip(a, b)
    )


# -- the registry and the shared contract -----------------------------------------------------------
def test_every_task_is_registered() -> None:
    assert set(TASKS.names()) == {*SYNTHETIC, "charlm", "translation"}


@pytest.mark.parametrize("name", TASKS.names())
def test_batches_follow_the_contract_of_their_kind(name: str, tmp_path: Path) -> None:
    data = build(name, tmp_path)
    assert (data.pad_id, data.bos_id, data.eos_id, data.sep_id) == (PAD_ID, BOS_ID, EOS_ID, SEP_ID) == (0, 1, 2, 3)
    longest_src = longest_tgt = 0
    for split, batches in all_batches(data).items():
        assert batches, f"{name}: empty {split} loader"
        for batch in batches:
            assert all(t.dtype == torch.long for t in batch.values())
            lengths = batch["length"]
            if data.kind == "lm":
                tokens = batch["tokens"]
                assert set(batch) == {"tokens", "length"}
                # every row is a full window of context + 1 real tokens
                assert (tokens != PAD_ID).all() and (lengths == tokens.shape[1] - 1).all()
                assert tokens.min() >= FIRST_SYMBOL_ID and tokens.max() < data.vocab_size
                longest_src = max(longest_src, tokens.shape[1] - 1)
                continue
            src = batch["src"]
            assert src.max() < data.vocab_size and src.min() >= 0
            for row in src:
                ids = unpadded(row)
                assert ids and PAD_ID not in ids, "padding only on the right"
                longest_src = max(longest_src, len(ids))
            if data.kind == "seq2seq":
                assert set(batch) == {"src", "tgt", "length"}
                for row in batch["tgt"]:
                    ids = unpadded(row)
                    assert ids[-1] == EOS_ID and EOS_ID not in ids[:-1] and BOS_ID not in ids
                    longest_tgt = max(longest_tgt, len(ids))
            else:
                assert set(batch) == {"src", "label", "length"}
                labels = batch["label"]
                assert data.num_classes is not None and 0 <= labels.min() and labels.max() < data.num_classes
    # the up-front bounds (used to size learned positions) hold for everything the loaders produce
    assert longest_src <= data.max_source_length()
    assert longest_tgt <= data.max_target_length()
    example = data.example()
    assert all(v.shape[0] == 1 for v in example.values())
    low, high = data.train_lengths
    assert low <= int(example["length"]) <= high


@pytest.mark.parametrize("name", TASKS.names())
def test_same_seed_same_batches_other_seed_other_batches(name: str, tmp_path: Path) -> None:
    first, again = all_batches(build(name, tmp_path, seed=3)), all_batches(build(name, tmp_path, seed=3))
    for split in first:
        assert same(first[split], again[split]), f"{name}: {split} differs for one seed"
    other = all_batches(build(name, tmp_path, seed=4))
    assert not same(first["train"], other["train"])
    if name in SYNTHETIC:  # file tasks hold the same held-out data whatever the seed
        assert not same(first["test"], other["test"])


@pytest.mark.parametrize("name", TASKS.names())
def test_test_loader_holds_one_length_per_batch_and_every_eval_length(name: str, tmp_path: Path) -> None:
    data = build(name, tmp_path)
    data.setup("test")
    seen = []
    for batch in data.test_dataloader():
        tags = batch["length"].unique().tolist()
        assert len(tags) == 1
        seen.append(tags[0])
    assert sorted(set(seen)) == data.eval_lengths
    assert seen == sorted(seen), "lengths come in ascending order"


@pytest.mark.parametrize("name", SYNTHETIC)
def test_val_examples_lie_in_the_training_range(name: str, tmp_path: Path) -> None:
    data = build(name, tmp_path)
    low, high = data.train_lengths
    tags = {int(e["length"]) for e in data.split("train") + data.split("val")}
    assert tags and min(tags) >= low and max(tags) <= high


def test_adding_an_eval_length_leaves_the_others_unchanged(tmp_path: Path) -> None:
    few = build("reverse", tmp_path, eval_lengths=[6]).split("test")
    more = build("reverse", tmp_path, eval_lengths=[6, 12]).split("test")
    at_six = [e for e in more if e["length"] == 6]
    assert len(at_six) == len(few)
    assert all(torch.equal(a["src"], b["src"]) for a, b in zip(few, at_six))


def test_train_loader_reshuffles_each_epoch_and_workers_change_nothing(tmp_path: Path) -> None:
    data = build("copy", tmp_path)
    loader = data.train_dataloader()
    epoch1, epoch2 = list(loader), list(loader)
    assert not same(epoch1, epoch2)

    def contents(epoch: list[dict[str, torch.Tensor]]) -> list[tuple[int, ...]]:
        return sorted(tuple(unpadded(row)) for batch in epoch for row in batch["src"])

    assert contents(epoch1) == contents(epoch2), "an epoch is a permutation of the train set"
    with_workers = build("copy", tmp_path, num_workers=2)
    assert same(epoch1, list(with_workers.train_dataloader()))


class RecordLengths(L.LightningModule):
    """Trains nothing; records the length tags Lightning hands to each step."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(()))
        self.seen: dict[str, list[list[int]]] = {"train": [], "val": [], "test": []}

    def training_step(self, batch: dict[str, torch.Tensor], index: int) -> torch.Tensor:
        self.seen["train"].append(batch["length"].tolist())
        return self.weight * 0.0 + self.weight

    def validation_step(self, batch: dict[str, torch.Tensor], index: int) -> None:
        self.seen["val"].append(batch["length"].tolist())

    def test_step(self, batch: dict[str, torch.Tensor], index: int) -> None:
        self.seen["test"].append(batch["length"].tolist())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.parametrize("name", ["reverse", "charlm"])
def test_a_lightning_trainer_gets_the_batches_unchanged(name: str, tmp_path: Path) -> None:
    data, model = build(name, tmp_path), RecordLengths()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        limit_train_batches=3,
        limit_val_batches=2,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, datamodule=data)
    trainer.test(model, datamodule=data, verbose=False)
    assert len(model.seen["train"]) == 3 and len(model.seen["val"]) == min(2, len(data.val_dataloader()))
    assert [len(set(tags)) for tags in model.seen["test"]] == [1] * len(model.seen["test"])
    assert sorted({tags[0] for tags in model.seen["test"]}) == data.eval_lengths
    assert [tags for batch in data.test_dataloader() for tags in [batch["length"].tolist()]] == model.seen["test"]


def test_hydra_list_configs_are_accepted(tmp_path: Path) -> None:
    data = build("sort", tmp_path, train_lengths=OmegaConf.create([3, 5]), eval_lengths=OmegaConf.create([7, 5]))
    assert data.train_lengths == (3, 5) and data.eval_lengths == [5, 7]


# -- correctness of each generator, checked on decoded text -----------------------------------------
def decoded_pairs(data: TaskDataModule) -> list[tuple[list[str], list[str], int]]:
    pairs = []
    for split in ("train", "test"):
        for e in data.split(split):
            src = data.decode(e["src"]).split()
            out = data.decode(e["tgt"]).split() if "tgt" in e else e["label"]
            pairs.append((src, out, int(e["length"])))
    return pairs


def test_copy_target_is_the_source(tmp_path: Path) -> None:
    for src, tgt, n in decoded_pairs(build("copy", tmp_path)):
        assert tgt == src and len(src) == n


def test_reverse_of_the_target_is_the_source(tmp_path: Path) -> None:
    for src, tgt, n in decoded_pairs(build("reverse", tmp_path)):
        assert tgt[::-1] == src and len(src) == n


def test_sort_target_is_the_sorted_source(tmp_path: Path) -> None:
    pairs = decoded_pairs(build("sort", tmp_path, num_symbols=12))
    for src, tgt, _ in pairs:
        assert tgt == sorted(src, key=int)
    assert any(src != tgt for src, tgt, _ in pairs), "not everything arrives sorted"


def test_addition_target_is_the_sum(tmp_path: Path) -> None:
    data = build("addition", tmp_path, eval_lengths=[4, 6, 30])  # 30 digits: past 64-bit integers
    for src, tgt, n in decoded_pairs(data):
        plus = src.index("+")
        a, b = src[:plus], src[plus + 1 :]
        assert len(a) == len(b) == n and len(tgt) == n + 1
        assert int("".join(a)) + int("".join(b)) == int("".join(tgt))
    assert data.decode(data.split("val")[0]["src"]).count("+") == 1


def test_recall_answer_is_the_value_of_the_queried_key(tmp_path: Path) -> None:
    for src, tgt, n in decoded_pairs(build("recall", tmp_path, num_symbols=20)):
        *pairs, query = src  # decode drops SEP
        keys, values = pairs[0::2], pairs[1::2]
        assert len(keys) == n and len(set(keys)) == n, "keys are distinct"
        assert all(k.startswith("k") for k in keys) and all(v.startswith("v") for v in values)
        assert query in keys and tgt == [values[keys.index(query)]]
    first = build("recall", tmp_path, num_symbols=20).split("val")[0]["src"].tolist()
    assert first[-2] == SEP_ID


def evaluate_listops(text: str) -> int:
    """A stack evaluator written apart from the generator's recursive one."""
    stack: list[list] = []
    result = None
    for token in text.split():
        if token.startswith("["):
            stack.append([token[1:]])
        elif token == "]":
            op, *args = stack.pop()
            ordered = sorted(args)
            value = {
                "MAX": ordered[-1],
                "MIN": ordered[0],
                "MED": ordered[(len(ordered) - 1) // 2],
                "SM": sum(args) % 10,
            }[op]
            if stack:
                stack[-1].append(value)
            else:
                result = value
        else:
            stack[-1].append(int(token))
    assert result is not None and not stack
    return result


def test_listops_label_matches_an_independent_evaluator(tmp_path: Path) -> None:
    data = build("listops", tmp_path)
    labels = []
    for src, label, n in decoded_pairs(data):
        assert len(src) == n, "every expression has exactly its requested length"
        assert evaluate_listops(" ".join(src)) == label
        depth = max_depth = 0
        for token in src:
            depth += token.startswith("[")
            depth -= token == "]"
            max_depth = max(max_depth, depth)
        assert 1 <= max_depth <= 3
        labels.append(label)
    assert len(set(labels)) >= 5, "labels are spread over the classes"


def test_listops_reaches_long_exact_lengths(tmp_path: Path) -> None:
    data = build(
        "listops",
        tmp_path,
        max_depth=6,
        max_args=6,
        train_lengths=[200, 400],
        eval_lengths=[500],
        train_size=300,
        test_size=50,
    )
    assert [len(e["src"]) for e in data.split("test")] == [500] * 50


def test_parity_label_counts_ones(tmp_path: Path) -> None:
    pairs = decoded_pairs(build("parity", tmp_path))
    for src, label, n in pairs:
        assert len(src) == n and label == src.count("1") % 2
    assert {label for _, label, _ in pairs} == {0, 1}


# -- charlm -----------------------------------------------------------------------------------------
def test_charlm_vocab_windows_and_shift(tmp_path: Path) -> None:
    text = write_text_corpus(tmp_path / "text.txt")
    data = build("charlm", tmp_path)
    assert data.vocab_size == FIRST_SYMBOL_ID + len(set(text))
    assert [data.decode([i]) for i in range(FIRST_SYMBOL_ID, data.vocab_size)] == sorted(set(text))
    assert data.decode(data.encode("naïve café")) == "naïve café"
    held_out = text[len(text) - round(len(text) * 0.2) :]
    batches = all_batches(data)
    for batch in batches["train"]:
        for row in batch["tokens"]:
            window = data.decode(row)
            assert len(window) == 17 and window in text[: len(text) - len(held_out)]
        # What the model sees and is scored on: the target at position t is the next character of the
        # text after the input at position t, so the input shifted left by one is the target minus its last.
        inputs, targets = lm_io(batch["tokens"])
        for seen, due in zip(inputs, targets):
            seen, due = data.decode(seen), data.decode(due)
            assert len(seen) == len(due) == 16
            assert seen[1:] == due[:-1] and seen + due[-1] in text[: len(text) - len(held_out)]
    for split in ("val", "test"):
        for batch in batches[split]:
            assert all(data.decode(row) in held_out for row in batch["tokens"])
    assert {int(b["length"][0]) for b in batches["test"]} == {16, 32}
    assert sum(len(b["tokens"]) for b in batches["train"]) == 3 * 8


@pytest.mark.parametrize(
    "content, why",
    [
        (None, "no such file"),
        (b"", "empty"),
        (b"text\0more", "binary"),
        (b"caf\xe9 latin-1", "UTF-8"),
        (b"too short", "shorter"),
    ],
)
def test_charlm_refuses_bad_files(tmp_path: Path, content: bytes | None, why: str) -> None:
    path = tmp_path / "bad.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TaskConfigError, match="task.path=") as error:
        TASKS.build("charlm", path=str(path), seed=0, batch_size=4)
    assert why in str(error.value) and "\n" not in str(error.value)


# -- translation ------------------------------------------------------------------------------------
def test_translation_trains_caches_and_reuses_its_tokenizer(corpus: dict[str, str], tmp_path: Path) -> None:
    first = TASKS.build("translation", **corpus, seed=0, batch_size=8, vocab_size=200)
    cached = Path(corpus["train_src"]).parent / ".attnlab_cache"
    assert not first.tokenizer_cached and first.tokenizer_path is not None
    assert first.tokenizer_path.parent == cached and first.tokenizer_path.suffix == ".json"
    stamp = first.tokenizer_path.stat().st_mtime_ns
    second = TASKS.build("translation", **corpus, seed=1, batch_size=8, vocab_size=200)
    assert second.tokenizer_cached and second.tokenizer_path == first.tokenizer_path
    assert second.tokenizer_path.stat().st_mtime_ns == stamp
    assert second.vocab_size == first.vocab_size
    assert same(list(first.test_dataloader()), list(second.test_dataloader()))
    # another tokenizer setting is another cache entry
    third = TASKS.build("translation", **corpus, seed=0, batch_size=8, vocab_size=120)
    assert not third.tokenizer_cached and len(list(cached.glob("*.json"))) == 2


@pytest.mark.parametrize("tokenizer", ["bpe", "char"])
def test_translation_decode_inverts_encode(corpus: dict[str, str], tokenizer: str) -> None:
    data = TASKS.build("translation", **corpus, seed=0, batch_size=8, vocab_size=200, tokenizer=tokenizer)
    src, tgt = parallel_sentences(40, 9)
    for text in src + tgt:
        assert data.decode(data.encode(text) + [EOS_ID, 7, 7]) == text
    # the reference side of a test batch reads back as the file's lines
    lines = Path(corpus["test_tgt"]).read_text(encoding="utf-8").splitlines()
    decoded = {data.decode(row) for batch in data.test_dataloader() for row in batch["tgt"]}
    assert decoded == set(lines)
    # a character never seen in training is dropped, the rest survives
    assert data.decode(data.encode("Mann ж Hund")).split() == ["Mann", "Hund"]


def test_translation_length_tags_are_source_buckets(corpus: dict[str, str]) -> None:
    data = TASKS.build("translation", **corpus, seed=0, batch_size=8, vocab_size=200, max_length=12)
    for split in ("train", "test"):
        for e in data.split(split):
            n = len(e["src"])
            assert e["length"] >= n and (e["length"] == 8 or e["length"] // 2 < n)
    assert all(max(len(e["src"]), len(e["tgt"])) <= 12 for e in data.split("train"))
    assert data.dropped["train"] > 0 and data.dropped["test"] == 0, "only training pairs are dropped"


def test_translation_test_defaults_to_val(corpus: dict[str, str]) -> None:
    files = {k: v for k, v in corpus.items() if not k.startswith("test")}
    data = TASKS.build("translation", **files, seed=0, batch_size=8, vocab_size=200)
    assert [e["src"].tolist() for e in data.split("test")] == [e["src"].tolist() for e in data.split("val")]
    with pytest.raises(TaskConfigError, match="task.test_src="):
        TASKS.build("translation", **files, test_src=corpus["test_src"], seed=0, batch_size=8)


def test_translation_refuses_mismatched_line_counts(corpus: dict[str, str], tmp_path: Path) -> None:
    short = write_lines(tmp_path / "short.en", parallel_sentences(299, 0)[1])
    with pytest.raises(TaskConfigError) as error:
        TASKS.build("translation", **(corpus | {"train_tgt": str(short)}), seed=0, batch_size=8)
    message = str(error.value)
    assert "task.train_src=" in message and "task.train_tgt=" in message
    assert "300" in message and "299" in message and "\n" not in message


@pytest.mark.parametrize("key, content", [("val_src", None), ("val_tgt", b""), ("test_src", b"\x00\x01")])
def test_translation_refuses_bad_files(corpus: dict[str, str], tmp_path: Path, key: str, content) -> None:
    path = tmp_path / "bad.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TaskConfigError, match=f"task.{key}="):
        TASKS.build("translation", **(corpus | {key: str(path)}), seed=0, batch_size=8)


def test_translation_falls_back_to_cache_dir_when_data_is_read_only(corpus: dict[str, str], tmp_path: Path) -> None:
    data_dir = Path(corpus["train_src"]).parent
    # A file where the cache folder would go defeats even root, who ignores permission bits.
    (data_dir / ".attnlab_cache").write_text("not a folder")
    mode = data_dir.stat().st_mode
    data_dir.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        before = sorted(os.listdir(data_dir))
        run_dir = tmp_path / "run"
        data = TASKS.build("translation", **corpus, seed=0, batch_size=8, vocab_size=200, cache_dir=str(run_dir))
        assert data.tokenizer_path is not None and data.tokenizer_path.parent == run_dir
        assert sorted(os.listdir(data_dir)) == before
        again = TASKS.build("translation", **corpus, seed=0, batch_size=8, vocab_size=200, cache_dir=str(run_dir))
        assert again.tokenizer_cached and again.tokenizer_path == data.tokenizer_path
    finally:
        data_dir.chmod(mode)


@pytest.mark.parametrize("name", ["../escape", "a/../../b", "/abs/path"])
def test_translation_refuses_a_cache_name_outside_the_data_folder(corpus: dict[str, str], name: str) -> None:
    with pytest.raises(TaskConfigError, match="task.cache_name="):
        TASKS.build("translation", **corpus, seed=0, batch_size=8, cache_name=name)


# -- bad parameters ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, params, key",
    [
        ("copy", dict(train_lengths=[9, 4]), "train_lengths"),
        ("copy", dict(train_lengths=[]), "train_lengths"),
        ("reverse", dict(train_lengths=[0, 4]), "train_lengths"),
        ("sort", dict(eval_lengths=[]), "eval_lengths"),
        ("copy", dict(num_symbols=1), "num_symbols"),
        ("recall", dict(num_symbols=16), "num_symbols"),  # eval length 9 needs 18
        ("addition", dict(train_size=0), "train_size"),
        ("parity", dict(test_size=-1), "test_size"),
        ("parity", dict(batch_size=0), "batch_size"),
        ("copy", dict(seed=-1), "seed"),
        ("listops", dict(max_depth=0), "max_depth"),
        ("listops", dict(max_args=1), "max_args"),
        ("listops", dict(train_lengths=[1, 3]), "train_lengths"),
        ("listops", dict(max_depth=1, max_args=3, eval_lengths=[40]), "eval_lengths"),
        ("charlm", dict(context=0), "context"),
        ("charlm", dict(val_fraction=1.0), "val_fraction"),
        ("charlm", dict(eval_contexts=[16, 4000]), "path"),
        ("charlm", dict(path=None), "path"),
        ("translation", dict(tokenizer="wordpiece"), "tokenizer"),
        ("translation", dict(train_limit=0), "train_limit"),
        ("translation", dict(max_length=1), "max_length"),
    ],
)
def test_bad_parameters_are_refused_with_one_line_naming_the_key(
    name: str, params: dict, key: str, tmp_path: Path
) -> None:
    with pytest.raises(TaskConfigError, match=f"task.{key}=") as error:
        build(name, tmp_path, **params)
    assert "\n" not in str(error.value)


def test_inverted_range_message_names_value_and_rule(tmp_path: Path) -> None:
    with pytest.raises(TaskConfigError) as error:
        build("copy", tmp_path, train_lengths=[9, 4])
    assert str(error.value) == "task.train_lengths=[9, 4] is not allowed; it must be [min, max] with 1 <= min <= max"


def test_unknown_parameters_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="num_symbols"):
        build("addition", tmp_path, num_symbols=10)


# -- real corpora, when the shared data folder is present ------------------------------------------
@pytest.mark.data
@pytest.mark.skipif(not (SHARED_DATA / "multi30k").is_dir(), reason="shared multi30k data not present")
def test_multi30k_translation(tmp_path: Path) -> None:
    # Links in tmp_path keep the tokenizer cache out of the shared folder.
    for name in ("train.de.gz", "train.en.gz", "val.de.gz", "val.en.gz"):
        (tmp_path / name).symlink_to(SHARED_DATA / "multi30k" / name)
    data = TASKS.build(
        "translation",
        train_src=str(tmp_path / "train.de.gz"),
        train_tgt=str(tmp_path / "train.en.gz"),
        val_src=str(tmp_path / "val.de.gz"),
        val_tgt=str(tmp_path / "val.en.gz"),
        seed=0,
        batch_size=32,
        vocab_size=2000,
        train_limit=2000,
    )
    assert len(data.split("train")) <= 2000 and len(data.split("val")) == 1014
    batch = next(iter(data.test_dataloader()))
    assert len(batch["length"].unique()) == 1
    lines = gzip.decompress((SHARED_DATA / "multi30k" / "val.en.gz").read_bytes()).decode().splitlines()
    exact = sum(data.decode(e["tgt"]) == line.strip() for e, line in zip(data.split("val"), lines))
    assert exact / len(lines) > 0.95, "references read back as the original text"


@pytest.mark.data
@pytest.mark.skipif(not (SHARED_DATA / "tinyshakespeare").is_dir(), reason="shared tinyshakespeare data not present")
def test_tinyshakespeare_charlm() -> None:
    path = SHARED_DATA / "tinyshakespeare" / "input.txt"
    data = TASKS.build("charlm", path=str(path), seed=0, batch_size=12, context=64, eval_contexts=[64, 256])
    text = path.read_text(encoding="utf-8")
    assert data.vocab_size == FIRST_SYMBOL_ID + len(set(text))
    batch = next(iter(data.train_dataloader()))
    assert batch["tokens"].shape == (12, 65) and all(data.decode(row) in text for row in batch["tokens"])


# -- sharding across DDP ranks ----------------------------------------------------------------------
class RankOf:
    """The parts of a Trainer the datamodule's loaders read: rank, world size, epoch and step."""

    def __init__(self, rank: int, world: int, epoch: int = 0, step: int = 0) -> None:
        self.global_rank, self.world_size, self.current_epoch, self.global_step = rank, world, epoch, step
        self.accumulate_grad_batches = 1


def example_rows(batches: list[dict[str, torch.Tensor]]) -> list[tuple]:
    """One hashable row per example, padding stripped (batch composition changes the padding)."""
    rows = []
    for batch in batches:
        for i in range(len(next(iter(batch.values())))):
            rows.append(
                tuple((k, tuple(unpadded(v[i])) if v.dim() > 1 else int(v[i])) for k, v in sorted(batch.items()))
            )
    return rows


def loader_batches(data: TaskDataModule, split: str, trainer: RankOf | None) -> list[dict]:
    data.trainer = trainer
    try:
        return list(getattr(data, f"{split}_dataloader")())
    finally:
        data.trainer = None


def loader_rows(data: TaskDataModule, split: str, trainer: RankOf | None) -> list[tuple]:
    return example_rows(loader_batches(data, split, trainer))


@pytest.mark.parametrize("world", [2, 3, 64])
@pytest.mark.parametrize("name", TASKS.names())
def test_ranks_evaluate_every_example_exactly_once(name: str, world: int, tmp_path: Path) -> None:
    data = build(name, tmp_path)
    data.setup("fit")
    data.setup("test")
    for split in ("val", "test"):
        whole = loader_batches(data, split, None)
        assert not any(REPEATED in b for b in whole), "one process repeats nothing"
        shares = [loader_batches(data, split, RankOf(rank, world)) for rank in range(world)]
        # Every rank takes as many steps (64 ranks: more than there are batches); the repeats are marked.
        assert {len(share) for share in shares} == {-(-len(whole) // world)}, split
        counted = [b for share in shares for b in share if not b.get(REPEATED)]
        assert sorted(example_rows(counted)) == sorted(example_rows(whole)), split


@pytest.mark.parametrize("name", ["reverse", "charlm"])
def test_ranks_train_on_their_own_share_and_resume_it(name: str, tmp_path: Path) -> None:
    data = build(name, tmp_path)
    data.setup("fit")
    world = 3
    whole = loader_rows(data, "train", RankOf(0, 1))
    shares = [loader_rows(data, "train", RankOf(rank, world)) for rank in range(world)]
    per_rank = -(-len(whole) // world)
    assert [len(share) for share in shares] == [per_rank] * world, "equal steps on every rank"
    together = sorted(row for share in shares for row in share)
    assert set(together) == set(whole) and len(together) - len(whole) == per_rank * world - len(whole)
    # A rank resumed after 2 steps of epoch 0 reads the rest of its own share, not of another's.
    data.trainer = RankOf(1, world, epoch=0, step=2)
    resumed = example_rows(list(data.train_dataloader()))
    data.trainer = None
    assert resumed == shares[1][2 * data.batch_size :]
