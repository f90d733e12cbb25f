"""Import every module of a variants package, so dropping in a file is enough to register it."""

from __future__ import annotations

import importlib
from types import ModuleType

from attnlab.registry import import_modules


def import_submodules(package: ModuleType) -> None:
    """Every module of ``package`` not named ``_*`` (the shared core's scan, ``attnlab.registry``)."""
    import_modules(package.__name__)


def import_plugins(modules: list[str]) -> None:
    """Import user modules that register their own variants (``plugins=[my.attention]``)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as err:
            from variants.checks import VariantConfigError

            raise VariantConfigError(
                f"plugins: could not import {name!r} ({err}); give an importable module path"
            ) from None
