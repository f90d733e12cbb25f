"""ListOps (Long Range Arena): evaluate a nested list expression over digits; ten classes.

``[MAX 4 3 [MIN 2 3 ] 1 0 ]`` -> 4. Operators take 2 .. ``max_args`` arguments,
each a digit or another expression, nested at most ``max_depth`` levels:

- ``MAX``, ``MIN``;
- ``MED``: the median; for an even count, the lower of the two middle values;
- ``SM``: the sum modulo 10.

Every example has *exactly* the token length it was asked for (its length tag),
so accuracy per length is exact. A feasibility table says which lengths an
expression of bounded depth and width can have (not all can: with
``max_args=2`` nothing has 5 tokens); the sampler only ever picks splits the
table allows, so it never backtracks.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from experiments.tasks.base import FIRST_SYMBOL_ID, integer, refuse
from experiments.tasks.registry import TASKS
from experiments.tasks.synthetic import SyntheticTask

DIGITS = [str(d) for d in range(10)]
OPERATORS = ["[MAX", "[MIN", "[MED", "[SM"]
CLOSE = "]"
TOKENS = DIGITS + OPERATORS + [CLOSE]
OPERATOR_ID = {name: FIRST_SYMBOL_ID + TOKENS.index(name) for name in OPERATORS}
CLOSE_ID = FIRST_SYMBOL_ID + TOKENS.index(CLOSE)
SHORTEST = 4  # "[OP d d ]": the root is always an operator


def apply(operator: str, args: list[int]) -> int:
    if operator == "[MAX":
        return max(args)
    if operator == "[MIN":
        return min(args)
    if operator == "[MED":
        return sorted(args)[(len(args) - 1) // 2]
    return sum(args) % 10


class Grammar:
    """Which token lengths expressions can have, and sampling of one with an exact length.

    ``fits[d][L]``: some expression nested at most ``d`` deep has ``L`` tokens.
    ``sums[d][k][T]``: ``k`` such expressions can have ``T`` tokens together.
    An operator at depth budget ``d`` holds 2 brackets plus ``k`` children of budget ``d - 1``.
    """

    def __init__(self, max_depth: int, max_args: int, longest: int) -> None:
        self.max_depth, self.max_args = max_depth, max_args
        size = longest + 1
        leaf = np.zeros(size, dtype=bool)
        leaf[1] = True
        self.fits = [leaf]
        self.sums: list[list[np.ndarray]] = []
        for depth in range(max_depth):
            sums = [np.zeros(size, dtype=bool)]
            sums[0][0] = True
            for _ in range(max_args):
                sums.append(np.convolve(sums[-1], self.fits[depth])[:size] > 0)
            self.sums.append(sums)
            inner = np.any(sums[2:], axis=0)  # 2 .. max_args children
            fits = leaf.copy()
            fits[2:] |= inner[: size - 2]
            self.fits.append(fits)

    def lengths(self) -> np.ndarray:
        """Every possible length of a whole expression (root an operator), up to ``longest``."""
        lengths = np.flatnonzero(self.fits[self.max_depth])
        return lengths[lengths >= SHORTEST]

    def sample(self, rng: random.Random, length: int) -> tuple[list[int], int]:
        """Token ids and value of a random expression of exactly ``length`` tokens (must be feasible)."""
        return self._node(rng, self.max_depth, length)

    def _node(self, rng: random.Random, budget: int, length: int) -> tuple[list[int], int]:
        if length == 1:
            digit = rng.randrange(10)
            return [FIRST_SYMBOL_ID + digit], digit
        inner = length - 2
        sums = self.sums[budget - 1]
        arity = rng.choice([k for k in range(2, self.max_args + 1) if sums[k][inner]])
        sizes = []
        for left in range(arity - 1, -1, -1):  # ``left`` children still to place after this one
            size = self._child_size(rng, budget - 1, inner, left)
            sizes.append(size)
            inner -= size
        rng.shuffle(sizes)  # the last child absorbs the remainder; do not let it always sit last
        operator = OPERATORS[rng.randrange(len(OPERATORS))]
        tokens, values = [OPERATOR_ID[operator]], []
        for size in sizes:
            child, value = self._node(rng, budget - 1, size)
            tokens += child
            values.append(value)
        tokens.append(CLOSE_ID)
        return tokens, apply(operator, values)

    def _child_size(self, rng: random.Random, budget: int, total: int, left: int) -> int:
        """A child length ``s`` such that the other ``left`` children can still fill ``total - s``."""
        fits, rest = self.fits[budget], self.sums[budget][left]
        if left == 0:
            return total
        # Digits half the time, as in LRA's lists; otherwise a uniform draw that is almost always valid.
        if rest[total - 1] and rng.random() < 0.5:
            return 1
        for _ in range(16):
            size = rng.randint(1, total - left)
            if fits[size] and rest[total - size]:
                return size
        sizes = np.arange(1, total - left + 1)
        valid = sizes[fits[1 : total - left + 1] & rest[total - sizes]]
        return int(valid[rng.randrange(len(valid))])


@TASKS.register("listops", references=("nangia2018listops", "tay2021long"))
class ListOps(SyntheticTask):
    kind = "classify"
    num_classes = 10

    default_train_lengths = (8, 48)
    default_eval_lengths = (32, 48, 64, 96)
    vocab_size = FIRST_SYMBOL_ID + len(TOKENS)

    def __init__(self, *, max_depth: int = 4, max_args: int = 5, **shared: Any) -> None:
        super().__init__(**shared)
        self.max_depth = integer("max_depth", max_depth, minimum=1)
        self.max_args = integer("max_args", max_args, minimum=2)
        longest = max(self.train_lengths[1], *self.eval_lengths)
        self.grammar = Grammar(self.max_depth, self.max_args, longest)
        possible = self.grammar.lengths()
        low, high = self.train_lengths
        self._training_sizes = possible[(possible >= low) & (possible <= high)]
        if len(self._training_sizes) == 0:
            raise refuse("train_lengths", list(self.train_lengths), self._allowed(possible))
        impossible = [n for n in self.eval_lengths if n not in set(possible.tolist())]
        if impossible:
            raise refuse("eval_lengths", self.eval_lengths, f"{impossible} cannot be built; {self._allowed(possible)}")

    def _allowed(self, possible: np.ndarray) -> str:
        shape = f"with max_depth={self.max_depth}, max_args={self.max_args}"
        if len(possible) == 0:
            return f"no expression {shape} fits; lengths must be >= {SHORTEST}"
        gaps = sorted(set(range(SHORTEST, int(possible[-1]) + 1)) - set(possible.tolist()))
        top = int(possible[-1])
        deepest = "" if top < len(self.grammar.fits[0]) - 1 else " or more"
        gap_note = f" except {gaps[:8]}{'...' if len(gaps) > 8 else ''}" if gaps else ""
        return f"expressions {shape} have {SHORTEST} to {top}{deepest} tokens{gap_note}"

    def training_sizes(self) -> np.ndarray:
        return self._training_sizes

    def generate(self, rng: np.random.Generator, n: int, count: int) -> dict[str, np.ndarray]:
        # Python's generator draws scalars far faster than numpy's; seeded from the block's stream.
        local = random.Random(int(rng.integers(2**63)))
        src = np.empty((count, n), dtype=np.int64)
        label = np.empty(count, dtype=np.int64)
        for i in range(count):
            tokens, label[i] = self.grammar.sample(local, n)
            src[i] = tokens
        return {"src": src, "label": label}

    def source_length(self, n: int) -> int:
        return n

    def symbol(self, token_id: int) -> str:
        return TOKENS[token_id - FIRST_SYMBOL_ID]
