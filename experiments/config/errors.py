"""Errors caused by the user's input, reported in one line and never with a traceback.

Their own module, so that the training entry, the builder, the preflight and the checks can name them without
importing each other (which made import circles).
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key, the value and what is allowed."""


def user_error_types() -> tuple[type[BaseException], ...]:
    """Errors caused by the user's input: reported in one line, never with a traceback."""
    from experiments.tasks.base import TaskConfigError  # here, so that naming the errors does not import torch
    from variants.checks import VariantConfigError
    from variants.registry import RegistryError

    return ConfigError, TaskConfigError, VariantConfigError, RegistryError
