"""Position encodings; every module in this folder is imported, which registers its encodings."""

import sys

from variants.discovery import import_submodules

import_submodules(sys.modules[__name__])

from variants.position.base import PositionEncoding  # noqa: E402

__all__ = ["PositionEncoding"]
