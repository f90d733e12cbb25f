"""Benchmarks are one registry kind: every registered benchmark is a subcommand whose defaults pass the checks,
and a throwaway one, registered here, is covered by the same check with no edit to it."""

from __future__ import annotations

import argparse

import pytest

from attnlab.registry import registry
from experiments import bench
from experiments.bench.registry import BENCHMARKS


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def benchmark_problems() -> tuple[list[str], list[str]]:
    """(the benchmarks checked, what is wrong with any): each is a subcommand with its declared help, and its
    default options pass ``check_arguments`` (a bench started with no option is never refused)."""
    parser = bench.build_parser()
    listed, problems = subcommands(parser), []
    for name in BENCHMARKS.names():
        if name not in listed:
            problems.append(f"{name}: not a subcommand")
            continue
        if listed[name].description != BENCHMARKS.declared(name).help:
            problems.append(f"{name}: help {listed[name].description!r} is not the declared one")
        try:
            bench.check_arguments(parser.parse_args([name]))
        except ValueError as err:
            problems.append(f"{name}: its defaults are refused ({err})")
    return BENCHMARKS.names(), problems


@pytest.mark.slow  # imports every benchmark module, torch with them (about 10 s)
def test_every_benchmark_is_a_subcommand_whose_defaults_pass_the_checks():
    checked, problems = benchmark_problems()
    assert problems == [] and {"scaling", "peers", "decode"} <= set(checked)
    assert registry("benchmark") is BENCHMARKS


@pytest.mark.slow  # imports every benchmark module, torch with them (about 10 s)
def test_a_throwaway_benchmark_is_one_registered_function(capsys):
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--repeats", type=int, default=3)

    @BENCHMARKS.register("throwaway-bench", help="counts to its repeats", arguments=arguments)
    def throwaway(args: argparse.Namespace) -> int:
        print(list(range(args.repeats)))
        return 0

    try:
        checked, problems = benchmark_problems()
        assert "throwaway-bench" in checked and problems == []
        with pytest.raises(SystemExit) as done:
            bench.main(["--help"])
        assert done.value.code == 0
        assert "throwaway-bench" in capsys.readouterr().out
        assert bench.main(["throwaway-bench", "--repeats", "2"]) == 0
        assert capsys.readouterr().out == "[0, 1]\n"
        with pytest.raises(SystemExit):  # the same checks as every benchmark's: a repeat count below 1
            bench.main(["throwaway-bench", "--repeats", "0"])
        assert "--repeats=0 is not allowed; it must be >= 1" in capsys.readouterr().err
    finally:
        BENCHMARKS.unregister("throwaway-bench")
