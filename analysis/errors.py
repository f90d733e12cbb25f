"""User errors raised by the analysis package: one line, naming what was found and what is needed."""
from __future__ import annotations


class AnalysisError(ValueError):
    """Bad input to the analysis (a user error, not a bug): the CLI prints it and exits with code 2."""


class CollectError(AnalysisError):
    """A sweep path that does not exist or cannot be read."""


class ReportError(AnalysisError):
    """Results that cannot make a report as asked (no runs, no common metric, unknown baseline ...)."""
