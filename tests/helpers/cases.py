"""Shared pieces of the variant tests: one parameter case per registered variation, one thread."""

from __future__ import annotations

import pytest
import torch

from variants import POSITION


def cases(registry) -> list:
    """One pytest case per (name, variation) of a registry: new variants are covered unedited."""
    return [
        pytest.param(name, params, id="-".join([name] + [f"{k}={v}" for k, v in params.items()]))
        for name in registry.names()
        for params in registry.variations(name)
    ]


# small enough that the short test sequences span several windows, blocks and chunks
SMALL = {"window": 2, "block_size": 3, "chunk_size": 3}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors: waking a second intra-op thread costs far more than it saves, and
    ``pytest -n 2`` already keeps both cores busy."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def skip_if_incompatible(attention: str, position: str, p_params: dict | None = None) -> None:
    """Skip a (type, encoding) pair that cannot compose, by what the two declare (``variants.pairs``):
    a type that forms no score matrix with an encoding that biases it. Never by name."""
    from variants import ATTENTION, POSITION
    from variants.pairs import pair_problem

    problem = pair_problem(
        ATTENTION.get(attention), POSITION.build(position, d_model=16, num_heads=2, **(p_params or {}))
    )
    if problem is not None:
        pytest.skip(f"attention={attention} cannot take position={position}: {problem} (refused at build time)")


# one case per (encoding, variation): a test parametrised with it covers a new encoding unedited
positions = pytest.mark.parametrize("position, p_params", cases(POSITION))
