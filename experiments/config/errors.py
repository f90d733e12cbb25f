"""Errors caused by the user's input, reported in one line and never with a traceback.

Their own module, so that the training entry, the builder, the preflight and the checks can name them without
importing each other (which made import circles).
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key, the value and what is allowed."""


def require(ok: bool, message: str) -> None:
    """Raise ``message`` as a ``ConfigError`` unless ``ok``."""
    if not ok:
        raise ConfigError(message)


def choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    """``value`` is one of ``allowed``; otherwise one line naming the key, the choices and the nearest one."""
    if value in allowed:
        return
    import difflib

    near = difflib.get_close_matches(str(value), allowed, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    raise ConfigError(f"{key}={value} is not allowed; choose one of {list(allowed)}{hint}")


# the other user errors, by module: experiments.tasks imports Lightning, variants imports torch
USER_ERRORS = (
    ("experiments.tasks.base", "TaskConfigError"),
    ("variants.checks", "VariantConfigError"),
    ("variants.registry", "RegistryError"),
)


def user_error_types() -> tuple[type[BaseException], ...]:
    """Errors caused by the user's input: reported in one line, never with a traceback.

    Only those of modules already imported: an error whose class was never imported cannot have been
    raised, and importing its module to name it would cost a refusal seconds (Lightning, torch)."""
    import sys

    loaded = (getattr(sys.modules.get(module), name, None) for module, name in USER_ERRORS)
    return (ConfigError, *(error for error in loaded if error is not None))
