"""Joint tokenizers for translation: subword BPE or characters, sharing the task specials.

Both kinds put ``<pad> <bos> <eos> <sep>`` at ids 0-3, then ``<unk>`` at 4 (text
outside the training alphabet), then real symbols. Source and target languages
share one vocabulary, so one embedding table could serve both sides.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from experiments.tasks.base import SPECIALS

UNK = "<unk>"
TOKENIZER_SPECIALS = [*SPECIALS, UNK]
UNK_ID = len(SPECIALS)


class TextTokenizer(Protocol):
    kind: str

    @property
    def vocab_size(self) -> int: ...

    def encode_batch(self, texts: list[str]) -> list[list[int]]: ...

    def decode(self, ids: list[int]) -> str: ...

    def save(self, path: Path) -> None: ...


class BpeTokenizer:
    """Byte-pair encoding over whitespace-marked words (SentencePiece-style ``▁``), so decoding restores spaces."""

    kind = "bpe"

    def __init__(self, tokenizer: Tokenizer) -> None:
        for expected, name in enumerate(TOKENIZER_SPECIALS):
            if tokenizer.token_to_id(name) != expected:
                raise ValueError(f"tokenizer has {name!r} at id {tokenizer.token_to_id(name)}; expected {expected}")
        self.tokenizer = tokenizer

    @classmethod
    def train(cls, texts: list[str], vocab_size: int) -> "BpeTokenizer":
        tokenizer = Tokenizer(models.BPE(unk_token=UNK))
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=TOKENIZER_SPECIALS, show_progress=False)
        tokenizer.train_from_iterator(texts, trainer, length=len(texts))
        return cls(tokenizer)

    @classmethod
    def load(cls, path: Path) -> "BpeTokenizer":
        return cls(Tokenizer.from_file(str(path)))

    def save(self, path: Path) -> None:
        self.tokenizer.save(str(path))

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


class CharTokenizer:
    """One id per character seen in training text, in code-point order."""

    kind = "char"

    def __init__(self, chars: list[str]) -> None:
        self.chars = chars
        self.ids = {c: i for i, c in enumerate(chars, start=len(TOKENIZER_SPECIALS))}

    @classmethod
    def train(cls, texts: list[str]) -> "CharTokenizer":
        return cls(sorted(set("".join(texts))))

    @classmethod
    def load(cls, path: Path) -> "CharTokenizer":
        return cls(json.loads(path.read_text(encoding="utf-8"))["chars"])

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"kind": self.kind, "chars": self.chars}, ensure_ascii=False), encoding="utf-8")

    @property
    def vocab_size(self) -> int:
        return len(TOKENIZER_SPECIALS) + len(self.chars)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [[self.ids.get(c, UNK_ID) for c in text] for text in texts]

    def decode(self, ids: list[int]) -> str:
        first = len(TOKENIZER_SPECIALS)
        return "".join(self.chars[i - first] for i in ids if i >= first)


def train_tokenizer(kind: str, texts: list[str], vocab_size: int) -> TextTokenizer:
    return BpeTokenizer.train(texts, vocab_size) if kind == "bpe" else CharTokenizer.train(texts)


def load_tokenizer(kind: str, path: Path) -> TextTokenizer:
    return BpeTokenizer.load(path) if kind == "bpe" else CharTokenizer.load(path)
