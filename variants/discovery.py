"""Import every module of a variants package, so dropping in a file is enough to register it."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def import_submodules(package: ModuleType) -> None:
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{info.name}")


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
