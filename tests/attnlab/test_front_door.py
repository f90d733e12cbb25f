"""``import attnlab``'s public names are the commands' own functions, loaded on first use (each name against the
module the command line runs), and an unknown name is one line listing the public ones."""

from __future__ import annotations

import inspect

import pytest

import attnlab

# public name -> (module, function) of the command it stands for, written here rather than read from attnlab
COMMANDS = {
    "run": ("experiments.app.api", "run"),
    "sweep": ("experiments.app.api", "multirun"),
    "compose": ("experiments.app.api", "compose"),
    "collect": ("analysis.data.collect", "collect"),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_lazy_name_is_the_commands_own_function(name: str) -> None:
    module, function = COMMANDS[name]
    assert getattr(attnlab, name) is getattr(__import__(module, fromlist=[function]), function)


def test_the_registries_are_the_variants_own() -> None:
    import variants

    assert attnlab.ATTENTION is variants.ATTENTION and attnlab.POSITION is variants.POSITION
    assert {"soft", "local", "hard", "multihead"} <= set(attnlab.ATTENTION)


def test_evaluate_and_report_take_what_their_commands_take() -> None:
    assert list(inspect.signature(attnlab.evaluate).parameters) == ["ckpt_path", "overrides", "out"]
    with pytest.raises(TypeError, match="name at least one sweep or run folder"):
        attnlab.report()


def test_every_public_name_resolves_and_an_unknown_one_is_named() -> None:
    assert all(getattr(attnlab, name) is not None for name in attnlab.__all__)
    with pytest.raises(AttributeError, match=r"no attribute 'train'; its public names are \['ATTENTION'"):
        attnlab.train  # noqa: B018


def test_evaluate_refuses_a_missing_checkpoint_in_one_line(tmp_path) -> None:
    from experiments.training.run_checkpoint import CheckpointError

    with pytest.raises(CheckpointError) as refused:
        attnlab.evaluate(tmp_path / "nowhere")
    assert "\n" not in str(refused.value) and "nowhere" in str(refused.value)
