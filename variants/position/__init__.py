"""Position encodings; importing this package registers every built-in one."""
from variants.position import alibi, learned, none, relative, rope, sinusoidal, t5  # noqa: F401
from variants.position.base import PositionEncoding

__all__ = ["PositionEncoding"]
