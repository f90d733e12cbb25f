"""The adaptive sweeper's grid, built on Hydra's public Sweeper API, is the grid Hydra's basic sweeper builds.

The sweeper subclassed Hydra's private ``BasicSweeper`` for its grid; it now builds the grid itself. Expected
grids are written out by hand, and Hydra's own basic sweeper (the installed hydra-core's) is the reference for
a larger one.
"""

from __future__ import annotations

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from hydra_plugins.attnlab_launcher.adaptive_sweeper import AdaptiveSeedSweeper, _product


def parsed(*lines: str) -> list:
    return OverridesParser.create().parse_overrides(list(lines))


def test_every_combination_with_the_last_key_varying_fastest() -> None:
    assert _product(parsed("attention=soft,local", "lr=1,2")) == [
        ["attention=soft", "lr=1"],
        ["attention=soft", "lr=2"],
        ["attention=local", "lr=1"],
        ["attention=local", "lr=2"],
    ]


def test_a_later_override_of_a_key_replaces_the_earlier_in_its_place() -> None:
    # a preset's params first, then the command line: attention keeps the first place with the command line's value
    assert _product(parsed("attention=soft,local", "task=copy", "position=rope,alibi", "attention=linear")) == [
        ["attention=linear", "task=copy", "position=rope"],
        ["attention=linear", "task=copy", "position=alibi"],
    ]


def test_the_grid_equals_the_basic_sweepers_of_the_installed_hydra() -> None:
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # the reference only

    lines = ("a=1,2,3", "+b=x", "c=range(0,3)", "~d", "a=4,5", "e='p,q'", "f=choice(u,v)")
    assert _product(parsed(*lines)) == BasicSweeper.split_arguments(parsed(*lines), None)[0]


def test_a_range_sweep_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"lr=interval\(0.1,1\): the adaptive sweeper takes lists of values"):
        _product(parsed("lr=interval(0.1,1)"))


def test_the_sweeper_uses_hydras_public_plugin_class_only() -> None:
    from hydra.plugins.sweeper import Sweeper

    private = [c.__module__ for c in AdaptiveSeedSweeper.__mro__ if c.__module__.startswith("hydra._internal")]
    assert issubclass(AdaptiveSeedSweeper, Sweeper) and not private
