"""The claim schema, shared by the training checks (a preset's ``claims:`` is well formed before any cell
trains) and the analysis (``python -m analysis.claims`` tests the claims on the results).

A claim names a metric, two sides given as factor values and what it expects::

    claims:
      - name: ALiBi extrapolates better than sinusoidal positions
        metric: token_acc@32            # a metric column, or a per-length metric NAME@LENGTH
        a: {position: alibi}
        b: {position: sinusoidal}
        where: {task: copy}             # optional: pins keys for both sides
        expect: greater                 # greater | less | equivalent | ratio
        margin: 0.0
        min_effect: 0.05                # optional: the smallest effect worth deciding (prices the seeds needed)
        source: Press et al. 2022       # optional: where the claim comes from
        paper: ...                      # optional: the number the paper reports
        assume: no_divergence           # optional: a declared assumption the verdict then rests on (below)

``assume: no_divergence`` declares that neither cell's seeds diverge. A mean-based verdict on a bounded metric (an
accuracy, a BLEU) otherwise holds whatever divergence rate the seeds leave possible, which few seeds cannot make
small (10 seeds without a divergence still allow a rate of 0.26 at 95%); under the assumption the seeds' values are
tested as they are. The verdict names the assumption beside it, and a seed that diverges refutes it: the claim is
then decided as without it, and says so.

Standard library only: ``experiments`` and ``analysis`` both import it, and it imports neither.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

EXPECTS = ("greater", "less", "equivalent", "ratio")
FIELDS = (
    "name",
    "metric",
    "a",
    "b",
    "where",
    "expect",
    "margin",
    "over",
    "bounds",
    "min_effect",
    "source",
    "paper",
    "assume",
)
NO_DIVERGENCE = "no_divergence"
ASSUMPTIONS = (NO_DIVERGENCE,)


class ClaimError(ValueError):
    """A claim that cannot be tested as written: one line naming the field."""


@dataclass(frozen=True)
class Claim:
    """One parsed claim; ``where`` says where it was written (``claims.yaml: claims[2]``)."""

    name: str
    metric: str
    expect: str
    a: tuple[tuple[str, Any], ...]
    b: tuple[tuple[str, Any], ...] | None
    filters: tuple[tuple[str, Any], ...] = ()
    margin: float = 0.0
    over: int | None = None
    bounds: tuple[float | None, float | None] | None = None
    min_effect: float | None = None  # beyond the claim's boundary: the truth "seeds that would decide" is priced at
    source: str | None = None
    paper: str | None = None
    assume: str | None = None  # a declared assumption (ASSUMPTIONS) the verdict rests on and names
    origin: str = "claims"

    @property
    def length(self) -> int | None:
        return split_metric(self.metric)[1]

    def key(self) -> str:
        """The claim's content, without where it was written: two copies of one claim are one claim."""
        content = {
            f: getattr(self, f)
            for f in ("name", "metric", "expect", "a", "b", "filters", "margin", "over", "bounds", "min_effect")
            + ("source", "paper")
        }
        if self.assume is not None:  # absent when undeclared: sweeps started before the field still resume
            content["assume"] = self.assume
        return json.dumps(content, sort_keys=True, default=str)

    def hypothesis(self) -> str:
        """What the claim tests, whatever it is called: metric, sides, expectation and margin. ``a > b`` and
        ``b < a`` are one hypothesis, and so are ``a ≡ b`` and ``b ≡ a``; two claims of one hypothesis would count
        one test twice in Holm's correction."""
        a, b, expect = self.a, self.b, self.expect
        if b is not None and (expect == "less" or (expect == "equivalent" and repr(b) < repr(a))):
            a, b, expect = b, a, {"less": "greater"}.get(expect, expect)
        content = [self.metric, expect, a, b, self.filters, self.margin, self.over, self.bounds]
        return json.dumps(content, sort_keys=True, default=str)


def split_metric(metric: str) -> tuple[str, int | None]:
    """``token_acc@16`` -> (``token_acc``, 16); ``test/bleu`` -> (``test/bleu``, None)."""
    name, at, length = metric.rpartition("@")
    if not at:
        return metric, None
    return name, int(length)


def _number(value: Any, field_name: str, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ClaimError(f"{field_name}={value!r} is not allowed; it must be {allowed}")
    return float(value)


def _side(value: Any, field_name: str) -> tuple[tuple[str, Any], ...]:
    if not isinstance(value, Mapping) or not value:
        raise ClaimError(
            f"{field_name}={value!r} is not allowed; it must be a mapping of factor values, e.g. {{position: alibi}}"
        )
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ClaimError(f"{field_name} has the key {key!r}; keys are factor or config names, e.g. position")
        if isinstance(item, (Mapping, list, tuple)) or item is None:
            raise ClaimError(
                f"{field_name}.{key}={item!r} is not allowed; a factor value is a string, number or boolean"
            )
    return tuple(sorted(value.items()))


def _text(value: Any, field_name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ClaimError(f"{field_name}={value!r} is not allowed; it must be text")
    return str(value)


def _min_effect(raw: Mapping, expect: str, bounds, origin: str) -> float | None:
    if raw.get("min_effect") is None:
        return None
    min_effect = _number(raw["min_effect"], f"{origin}.min_effect", "a number > 0 (the smallest effect worth deciding)")
    if min_effect <= 0:
        raise ClaimError(f"{origin}.min_effect={raw['min_effect']!r} is not allowed; it must be a number > 0")
    if expect == "equivalent" or (bounds is not None and None not in bounds):
        raise ClaimError(
            f"{origin}.min_effect is not used by a claim with two edges (an equivalence, a ratio within two "
            "bounds): its seeds are priced with the truth midway between them"
        )
    return min_effect


def _assumption(assume: Any, expect: str, origin: str) -> str | None:
    if assume is None:
        return None
    if assume not in ASSUMPTIONS:
        raise ClaimError(f"{origin}.assume={assume!r} is not allowed; choose one of {list(ASSUMPTIONS)}")
    if expect == "ratio":
        raise ClaimError(
            f"{origin}.assume is not used by expect=ratio; a ratio of means is not bounded over divergence "
            "rates, so there is nothing for the assumption to set aside"
        )
    return str(assume)


def _fields(raw: Any, origin: str) -> Mapping:
    """The claim's mapping, with only known fields and the required ones present."""
    if not isinstance(raw, Mapping):
        raise ClaimError(f"{origin}={raw!r} is not a claim; a claim is a mapping with metric, a, b and expect")
    unknown = [k for k in raw if k not in FIELDS]
    if unknown:
        raise ClaimError(f"{origin}.{unknown[0]} is not a claim field; fields: {', '.join(FIELDS)}")
    for required in ("metric", "a", "expect"):
        if raw.get(required) is None:
            raise ClaimError(f"{origin}.{required} is missing; a claim needs metric, a, b (except a ratio) and expect")
    return raw


def _expect(raw: Mapping, origin: str) -> str:
    expect = raw["expect"]
    if expect not in EXPECTS:
        raise ClaimError(f"{origin}.expect={expect!r} is not allowed; choose one of {list(EXPECTS)}")
    return str(expect)


def _metric(raw: Mapping, origin: str) -> str:
    metric = raw["metric"]
    if not isinstance(metric, str) or not re.fullmatch(r"[^@\s]+(@\d+)?", metric):
        raise ClaimError(
            f"{origin}.metric={metric!r} is not allowed; give a metric name (test/bleu) or a "
            "per-length one, NAME@LENGTH (token_acc@16)"
        )
    return metric


def _filters(raw: Mapping, a: tuple[tuple[str, Any], ...], origin: str) -> tuple[tuple[str, Any], ...]:
    """``where``: keys pinned for both sides, none of them also set on a side."""
    filters = _side(raw["where"], f"{origin}.where") if raw.get("where") is not None else ()
    for key, _ in filters:
        if key in dict(a) or (isinstance(raw.get("b"), Mapping) and key in raw["b"]):
            raise ClaimError(f"{origin}.where.{key} is also set on a side; a key is pinned in where or on the sides")
    return filters


def _ratio(raw: Mapping, metric: str, origin: str) -> tuple[int, tuple[float | None, float | None]]:
    """An ``expect: ratio`` claim's ``over`` (the denominator's length) and ``bounds``; it has no b and no margin."""
    for misplaced in ("b", "margin"):
        if raw.get(misplaced) is not None:
            raise ClaimError(
                f"{origin}.{misplaced} is not used by expect=ratio; a ratio claim tests side a against bounds"
            )
    if split_metric(metric)[1] is None:
        raise ClaimError(
            f"{origin}.metric={metric!r} is not allowed for expect=ratio; give the length, NAME@LENGTH (token_acc@32)"
        )
    over = raw.get("over")
    if isinstance(over, bool) or not isinstance(over, int) or over <= 0:
        raise ClaimError(
            f"{origin}.over={over!r} is not allowed; expect=ratio needs the length whose value "
            "is the denominator, a positive integer"
        )
    if over == split_metric(metric)[1]:
        raise ClaimError(f"{origin}.over={over} is the metric's own length; a ratio needs two lengths")
    return over, _bounds(raw.get("bounds"), origin)


def _bounds(raw_bounds: Any, origin: str) -> tuple[float | None, float | None]:
    """A ratio's [low, high], either open (null), low below high."""
    if not isinstance(raw_bounds, (list, tuple)) or len(raw_bounds) != 2 or raw_bounds == [None, None]:
        raise ClaimError(
            f"{origin}.bounds={raw_bounds!r} is not allowed; expect=ratio needs [low, high], "
            "either may be null, e.g. [0.9, null]"
        )
    low, high = (
        None if v is None else _number(v, f"{origin}.bounds", "a pair of numbers or nulls") for v in raw_bounds
    )
    if low is not None and high is not None and not low < high:
        raise ClaimError(f"{origin}.bounds={list(raw_bounds)} is not allowed; low must be below high")
    return low, high


def _comparison(raw: Mapping, expect: str, origin: str) -> tuple[tuple[tuple[str, Any], ...], float]:
    """A two-sided claim's side b and margin (> 0 for an equivalence); it has no over and no bounds."""
    for misplaced in ("over", "bounds"):
        if raw.get(misplaced) is not None:
            raise ClaimError(f"{origin}.{misplaced} is only used by expect=ratio")
    if raw.get("b") is None:
        raise ClaimError(f"{origin}.b is missing; expect={expect} compares side a with side b")
    b = _side(raw["b"], f"{origin}.b")
    if expect != "equivalent":
        return b, _number(raw.get("margin", 0.0), f"{origin}.margin", "a number (0: any difference)")
    margin = _number(raw.get("margin"), f"{origin}.margin", "a number > 0 for expect=equivalent")
    if margin <= 0:
        raise ClaimError(
            f"{origin}.margin={raw.get('margin')!r} is not allowed; expect=equivalent needs "
            "a margin > 0 (the largest difference that still counts as equal)"
        )
    return b, margin


def parse_claim(raw: Any, origin: str) -> Claim:
    """One claim from its YAML mapping; a bad field raises ClaimError naming ``origin.field``."""
    raw = _fields(raw, origin)
    expect = _expect(raw, origin)
    metric = _metric(raw, origin)
    a = _side(raw["a"], f"{origin}.a")
    filters = _filters(raw, a, origin)
    over = bounds = b = None
    margin = 0.0
    if expect == "ratio":
        over, bounds = _ratio(raw, metric, origin)
    else:
        b, margin = _comparison(raw, expect, origin)
    min_effect = _min_effect(raw, expect, bounds, origin)
    assume = _assumption(raw.get("assume"), expect, origin)
    name = _text(raw.get("name"), f"{origin}.name") or origin
    return Claim(
        name=name,
        metric=metric,
        expect=expect,
        a=a,
        b=b,
        filters=filters,
        margin=margin,
        over=over,
        bounds=bounds,
        min_effect=min_effect,
        source=_text(raw.get("source"), f"{origin}.source"),
        paper=_text(raw.get("paper"), f"{origin}.paper"),
        assume=assume,
        origin=origin,
    )


def parse_claims(raw: Any, origin: str = "claims") -> list[Claim]:
    """A list of claims (``claims:`` in a preset or a file); ``origin`` prefixes every error."""
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise ClaimError(f"{origin}={raw!r} is not allowed; claims is a list of claims")
    claims = [parse_claim(item, f"{origin}[{i}]") for i, item in enumerate(raw)]
    first: dict[str, Claim] = {}
    for claim in claims:
        twin = first.setdefault(claim.hypothesis(), claim)
        if twin is not claim:
            raise ClaimError(
                f"{claim.origin} ({claim.name!r}) tests the same hypothesis as {twin.origin} ({twin.name!r}): "
                "same metric, sides, expectation and margin; remove one (Holm's correction would count it twice)"
            )
    check_names(claims)
    return claims


def check_names(claims: list[Claim]) -> None:
    """Two claims of one name would be two rows no reader can tell apart: refused, naming both."""
    named: dict[str, Claim] = {}
    for claim in claims:
        twin = named.setdefault(claim.name, claim)
        if twin is not claim:
            raise ClaimError(
                f"{claim.origin} has the name {claim.name!r} of {twin.origin}; each claim needs its own name"
            )
