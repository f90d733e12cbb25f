"""Up-front validation of variant parameters: one-line errors naming key, value and what is allowed."""

from __future__ import annotations

from typing import Any, Iterable


class VariantConfigError(ValueError):
    """A variant was given a parameter value it cannot work with."""


def one_of(key: str, value: Any, allowed: Iterable[Any]) -> Any:
    allowed = list(allowed)
    if value not in allowed:
        raise VariantConfigError(f"{key}={value!r} is not allowed; choose one of {allowed}")
    return value


def positive(key: str, value: Any, *, integer: bool = False) -> Any:
    kind = "a positive integer" if integer else "a positive number"
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not value > 0:
        raise VariantConfigError(f"{key}={value!r} is not allowed; it must be {kind}")
    return value


def non_negative_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise VariantConfigError(f"{key}={value!r} is not allowed; it must be an integer >= 0")
    return value


def probability(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise VariantConfigError(f"{key}={value!r} is not allowed; it must be a number in [0, 1)")
    return float(value)


def heads_divide(d_model: Any, num_heads: Any) -> None:
    positive("d_model", d_model, integer=True)
    positive("num_heads", num_heads, integer=True)
    if d_model % num_heads:
        divisors = [h for h in range(1, d_model + 1) if d_model % h == 0]
        raise VariantConfigError(
            f"num_heads={num_heads} does not divide d_model={d_model}; allowed num_heads: {divisors}"
        )


def even_head_dim(position: str, d_model: int, num_heads: int) -> None:
    """A rotary encoding turns pairs of dimensions: each head's width d_model / num_heads must be even."""
    head_dim = d_model // num_heads
    if head_dim % 2:
        raise VariantConfigError(
            f"position={position} needs an even head dimension; d_model={d_model} / num_heads={num_heads} = {head_dim}"
        )


def kv_heads_divide(num_heads: int, num_kv_heads: Any) -> int:
    """``num_kv_heads`` (None: one per query head) must be a positive divisor of ``num_heads``."""
    if num_kv_heads is None:
        return num_heads
    positive("num_kv_heads", num_kv_heads, integer=True)
    if num_heads % num_kv_heads:
        divisors = [h for h in range(1, num_heads + 1) if num_heads % h == 0]
        raise VariantConfigError(
            f"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}; allowed num_kv_heads: {divisors}"
        )
    return num_kv_heads
