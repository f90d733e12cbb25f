"""Cells are configurations: which runs are seeds of one cell, and which config keys are the report's factors.

A **cell** is a run's resolved configuration minus the seed and minus the keys
that do not change the computation (``NOISE_PREFIXES``: logging, progress,
threads, checkpoint cadence, names). Runs are seeds of one cell only when every
other key is equal; a cell's id is a hash of that configuration, so two sweeps
of one configuration share their cells.

The **factors** are the config keys that vary across the runs, named by their
dotted path (``optim.lr``, ``attention.window``), except that a registry group
is named by the group (``config.attention.name`` is the factor ``attention``,
``config.model.cross_attention.name`` is ``model.cross_attention``).

A key nested under a registry group (``attention.window`` under ``attention``)
is a **sub-factor** of that group: it is compared only among runs with the same
group value. ``attention.window`` varies when some ``local`` runs have window 4
and others 8; it does not vary when it exists only for ``local`` runs (absent,
i.e. missing, for ``multihead``), nor when ``relative`` has ``max_distance`` 16
and ``t5`` 128: that difference is part of what the group's value means. A
missing value (a key absent from a run, or null) is a value of its own when it
is compared, so a key that exists in some runs of one group value and not in
others does vary. Two keys that hold the same value in every run (one interpolated from the other,
such as ``trainer.gradient_clip_val`` from ``optim.grad_clip``) are one factor,
named by the first in report order. ``task`` is always a grouping key and never a factor:
factors are found within each task. Factors are found among the completed runs
only: a failed run's settings never make a factor, nor a diverged run's (a rerun
at a higher learning rate that blew up would otherwise make lr, warm-up and
clipping factors and relabel every cell). A setting the built model did not use is null in its result
(``experiments.config.unused``), so it never makes a factor or a cell either.

**Designed factors and confounds.** Budget and provenance keys
(``BUDGET_KEYS``, ``PROVENANCE_KEYS``: the training budget, data sizes, device
and kernel choices) are never factors the user asked for unless named with
``--factors``: they still separate cells (never pooled) but the report flags
them as confounds; the report also requires a controlled comparison
(``analysis.report.plan.layout.asked_factors``, rule in ``analysis.data.confounds``).

Two folders holding the same run (same cell and seed, different run ids) count
once: ``drop_duplicate_runs`` keeps one and reports the others.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

# the cell identity lives in attnlab/ (a training run names its W&B cell with it); is_missing and normalise are
# re-exported for the analysis
from attnlab.cell_identity import GROUP_COLUMNS, cell_id, identity, is_missing, normalise  # noqa: F401

# Budget: how long and on how much data a run trained or was evaluated.
BUDGET_KEYS = (
    "trainer.max_steps",
    "trainer.max_epochs",
    "trainer.max_time",
    "trainer.limit_train_batches",
    "trainer.limit_val_batches",
    "trainer.limit_test_batches",
    "trainer.fast_dev_run",
    "trainer.accumulate_grad_batches",
    "task.train_size",
    "task.val_size",
    "task.test_size",
)
# Provenance: where and with which kernels a run was computed.
PROVENANCE_KEYS = ("trainer.accelerator", "trainer.devices", "trainer.num_nodes", "trainer.strategy", "backend")
GROUPING = ("task",)
FACTOR_ORDER = ("attention", "position")
NO_FACTOR_LABEL = "(no varying factor)"
NO_FACTOR_STATUSES = ("failed", "diverged")  # run statuses whose settings never make a factor


def format_value(value: Any) -> str:
    """How a factor value reads in labels and tables; a missing value is "—"."""
    value = normalise(value)
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parent(key: str, groups: Iterable[str]) -> str | None:
    """The registry group a key is nested under (the longest one), or None."""
    parts = key.split(".")
    groups = set(groups)
    for cut in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in groups:
            return prefix
    return None


def registry_groups(configs: Iterable[Mapping[str, Any]]) -> set[str]:
    """The keys that name a registry entry: task, attention, position, and any ``<group>.name`` in the configs.

    In an identity a group's name sits under the group's own key beside its
    parameters (``attention`` beside ``attention.window``), so a key that is also
    the prefix of another key is a group.
    """
    groups = set(GROUP_COLUMNS)
    for config in configs:
        prefixes = {".".join(k.split(".")[:cut]) for k in config for cut in range(1, k.count(".") + 1)}
        groups.update(prefixes & set(config))
    return groups


def discover_factors(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The keys that vary across the configurations, each sub-factor only within one value of its group.

    Discovery is per task: a key that differs only between tasks is a property
    of the tasks, not a factor.
    """
    groups = registry_groups(configs)
    keys = sorted({k for c in configs for k in c if k not in GROUPING})
    factors = []
    for key in keys:
        top = parent(key, groups)
        seen: dict[tuple, set] = {}
        for config in configs:
            where = (tuple(config.get(g) for g in GROUPING), config.get(top) if top else None)
            seen.setdefault(where, set()).add(json.dumps(config.get(key), sort_keys=True, default=str))
        if any(len(values) > 1 for values in seen.values()):
            factors.append(key)
    return drop_linked(order_factors(factors), configs)


def drop_linked(factors: Sequence[str], configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The factors less each one that equals an earlier factor in every configuration: one setting under two names.

    ``trainer.gradient_clip_val`` interpolated from ``optim.grad_clip`` (or any two keys that hold the same value
    in every run) is one factor, named by the key that comes first in report order; counted as two, no cell
    would differ in either alone and both would read as uncontrolled confounds.
    """

    def column(key: str) -> list[str]:  # as JSON, so True and 1 are not one value
        return [json.dumps(normalise(c.get(key)), sort_keys=True, default=str) for c in configs]

    kept: list[str] = []
    for key in factors:
        if column(key) not in [column(k) for k in kept]:
            kept.append(key)
    return kept


def is_budget(key: str) -> bool:
    return key in BUDGET_KEYS or key in PROVENANCE_KEYS


def order_factors(factors: Iterable[str]) -> list[str]:
    """attention, position, then designed keys alphabetically, then budget and provenance keys."""
    factors = list(dict.fromkeys(factors))
    return sorted(
        factors,
        key=lambda k: (k not in FACTOR_ORDER, FACTOR_ORDER.index(k) if k in FACTOR_ORDER else 0, is_budget(k), k),
    )


def label(config: Mapping[str, Any], factors: Sequence[str]) -> str:
    """``attention=local, attention.window=4``: the cell's factor values, missing ones left out."""
    parts = [f"{k}={format_value(config.get(k))}" for k in factors if config.get(k) is not None]
    return ", ".join(parts) or NO_FACTOR_LABEL


def makes_factors(status: Any) -> bool:
    """Whether a run of this status has settings that may make factors: not a failed or diverged one."""
    return status not in NO_FACTOR_STATUSES


def computed_configs(configs: Sequence[Mapping[str, Any]], runs: pd.DataFrame) -> list[Mapping[str, Any]]:
    """The configurations with a result: a failed or diverged run's settings never make a factor
    (ten failed runs of a broken command line, or one diverged rerun at a higher learning rate, would
    otherwise label every cell with their keys)."""
    if "status" not in runs.columns:
        return list(configs)
    return [c for c, status in zip(configs, runs["status"]) if makes_factors(status)]


def assign_cells(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The runs frame with ``cell``, ``cell_label`` and one column per factor; and the factors, in report order.

    A factor column holds the run's value (None where the key is missing, e.g.
    ``attention.window`` for a ``multihead`` run; ``analysis.data.dtypes`` then makes a column of integers
    Int64, missing as ``<NA>``). The input is not modified.
    """
    out = runs.copy()
    configs = [identity(row) for row in runs.to_dict("records")]
    factors = discover_factors(computed_configs(configs, runs))
    out["cell"] = pd.Series([cell_id(c) for c in configs], index=runs.index, dtype=object)
    out["cell_label"] = pd.Series([label(c, factors) for c in configs], index=runs.index, dtype=object)
    for key in factors:
        if key in GROUP_COLUMNS:
            continue  # the result's own column already holds it
        out[key] = pd.Series([c.get(key) for c in configs], index=runs.index, dtype=object)
    return out, factors


def drop_duplicate_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kept, dropped): one run per (cell, seed); ``dropped`` has a ``duplicate_of`` column naming the kept run.

    Two runs of one configuration and seed are one run read twice (a copied or
    re-run folder), never two seeds. The kept one is a completed run when there
    is one, else the first read.
    """
    if runs.empty:
        return runs, runs.assign(duplicate_of=pd.Series(dtype=object))
    rank = (runs["status"] != "completed").astype(int)
    order = runs.assign(_rank=rank, _pos=range(len(runs))).sort_values(["_rank", "_pos"], kind="stable")
    first = order.drop_duplicates(["cell", "seed"], keep="first")
    kept_ids = first.set_index(["cell", "seed"])["run_id"]
    dropped_mask = ~runs.index.isin(first.index)
    dropped = runs[dropped_mask].copy()
    dropped["duplicate_of"] = [kept_ids[(c, s)] for c, s in zip(dropped["cell"], dropped["seed"])]
    return runs[~dropped_mask], dropped


def factor_parent(key: str, keys: Iterable[str]) -> str | None:
    """The longest other key (or registry group) that ``key`` is nested under."""
    candidates = set(keys) | set(GROUP_COLUMNS)
    parts = key.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in candidates:
            return prefix
    return None
