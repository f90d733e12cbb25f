"""lightning.Trainer's keywords read from its source (no import of Lightning) equal the imported Trainer's:
every name in order, and every annotation, a class the reader does not import compared by its name."""

from __future__ import annotations

import inspect
import typing

import lightning
import pytest

from experiments.config.errors import ConfigError
from experiments.config.trainer_signature import trainer_parameters
from experiments.training.lightning_parts import check_trainer_key


def shape(annotation: typing.Any) -> typing.Any:
    """An annotation as nested tuples: a typing construct by its origin and arguments, a class by its name,
    a Literal's value as itself."""
    origin = typing.get_origin(annotation)
    if origin is not None:
        return (repr(origin), tuple(shape(a) for a in typing.get_args(annotation)))
    if isinstance(annotation, type):
        return annotation.__name__
    return repr(annotation)


def test_keywords_read_from_the_source_are_the_imported_trainers() -> None:
    real = inspect.signature(lightning.Trainer.__init__).parameters
    expected = {name: shape(p.annotation) for name, p in real.items() if name != "self"}
    read = trainer_parameters()
    assert list(read) == list(expected)
    assert {name: shape(a) for name, a in read.items()} == expected


# Lightning's documented precision values (an alias, _PRECISION_INPUT, defined two modules away from the
# Trainer) and deterministic's "warn" (a Literal alias beside the Trainer): plain values the check must pass
@pytest.mark.parametrize("key, value", [("precision", 16), ("precision", "bf16-mixed"), ("deterministic", "warn")])
def test_a_value_of_an_aliased_type_is_accepted(key: str, value: object) -> None:
    check_trainer_key(key, value)


@pytest.mark.parametrize("key, value", [("precision", "bf17-mixed"), ("precision", 8), ("deterministic", "wrn")])
def test_a_value_outside_an_aliased_type_is_refused(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"trainer\.{key}="):
        check_trainer_key(key, value)
