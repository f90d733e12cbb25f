"""Which claims a report tests, and on which runs: those a preset carries in the runs' config (on the runs that
carry them) and those of a ``--claims FILE`` (on every run given)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import yaml

from attnlab.claims import Claim, ClaimError, check_names, parse_claims

CONFIG_KEY = "config.claims"


class ClaimsLoader(yaml.SafeLoader):
    """PyYAML's safe loader, reading a number with an exponent and no dot (``margin: 1e-3``) as a float, as
    YAML 1.2 and Hydra's presets do; YAML 1.1 reads it as the string "1e-3"."""


ClaimsLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def load_claims_file(path: str | Path) -> list[Claim]:
    """Claims from a YAML file: a list, or a mapping with a ``claims:`` key (a preset file works too)."""
    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=ClaimsLoader)
    except OSError as err:
        raise ClaimError(f"--claims {path}: cannot be read ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise ClaimError(f"--claims {path}: not valid YAML ({' '.join(str(err).split())})") from None
    if isinstance(data, Mapping):
        if "claims" not in data:
            raise ClaimError(f"--claims {path}: no 'claims' key; the file holds a list of claims or claims: [...]")
        data = data["claims"]
    claims = parse_claims(data, f"{path.name}: claims")
    if not claims:
        raise ClaimError(f"--claims {path}: the claims list is empty")
    return claims


def _carried(value: Any) -> list:
    """The claims list a run's config carries (a list, or its JSON text after a round trip)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return list(value) if isinstance(value, (list, tuple)) else []


def claims_in_runs(frame: pd.DataFrame) -> list[tuple[Claim, set[str]]]:
    """Every distinct claim carried in the runs' configs, with the run ids that carry it."""
    if CONFIG_KEY not in frame.columns:
        return []
    found: dict[str, tuple[Claim, set[str]]] = {}
    for run_id, sweep, value in zip(frame["run_id"], frame["sweep"], frame[CONFIG_KEY]):
        for claim in parse_claims(_carried(value), f"claims of sweep {sweep}") if _carried(value) else []:
            found.setdefault(claim.key(), (claim, set()))[1].add(run_id)
    return list(found.values())


def gather_claims(
    runs, claims_file: str | Path | None = None, carried: bool = True
) -> list[tuple[Claim, set[str] | None]]:
    """Claims to test and their scope: the run ids carrying a preset's claim (unless ``carried`` is False), or
    None (every run) for a file's.

    A file's claim named as a carried one replaces it on the runs that carry it: a finished sweep's claim
    that needs correcting (a side that covers several cells, a wrong margin) is corrected without
    touching its results.
    """
    gathered: list[tuple[Claim, set[str] | None]] = list(claims_in_runs(runs.runs)) if carried else []
    if claims_file is not None:
        given = load_claims_file(claims_file)
        by_name = {c.name: c for c in given}
        gathered = [(by_name.get(c.name, c), scope) for c, scope in gathered]
        seen = {c.hypothesis() for c, _ in gathered}  # a preset's claim repeated in the file is tested once
        gathered += [(c, None) for c in given if c.hypothesis() not in seen]
    check_names([c for c, _ in gathered])  # two sweeps may carry two claims of one name
    return gathered
