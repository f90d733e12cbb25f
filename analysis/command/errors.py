"""User errors raised by the analysis package: one line, naming what was found and what is needed."""

from __future__ import annotations

import sys
import warnings
from typing import Callable, TypeVar

from attnlab.claims import ClaimError

T = TypeVar("T")


class AnalysisError(ValueError):
    """Bad input to the analysis (a user error, not a bug): the CLI prints it and exits with code 2."""


class CollectError(AnalysisError):
    """A sweep path that does not exist or cannot be read."""


class ReportError(AnalysisError):
    """Results that cannot make a report as asked (no runs, no common metric, unknown baseline ...)."""


# What a command prints as one line and exits 2 on: the analysis's own errors, and a claim that cannot be
# tested as written (its class lives in attnlab.claims, beside the schema the training checks also use).
USER_ERRORS = (AnalysisError, ClaimError)


# scipy's RuntimeWarnings (precision loss on constant samples) are numerical notices, not problems with the inputs
LIBRARY_NOTICES = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, RuntimeWarning)


def run_cli(work: Callable[[], T], quiet: tuple[type[Warning], ...] = LIBRARY_NOTICES) -> tuple[T | None, int]:
    """``work()`` as a command runs it: (its value, 0), or (None, 2) after printing a user error as one line.

    Every warning raised meanwhile (a skipped file, a duplicate run) is printed as one line, except the
    ``quiet`` categories: library notices that say nothing about the user's inputs.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = work()
        except USER_ERRORS as err:
            _print_warnings(caught, quiet)
            print(f"error: {err}", file=sys.stderr)
            return None, 2
    _print_warnings(caught, quiet)
    return value, 0


def _print_warnings(caught: list[warnings.WarningMessage], quiet: tuple[type[Warning], ...]) -> None:
    for w in caught:
        if not issubclass(w.category, quiet):
            print(f"warning: {w.message}", file=sys.stderr)
