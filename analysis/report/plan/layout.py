"""How the cells of one task are laid out in tables: two factors as axes, every other factor fixed per table.

A table (``Grid``) never holds two cells in one position, so nothing in it is
averaged across configurations. The factors of a task (``task_factors``) that
the user asked for (``asked_factors``), and any other factor needed to tell the
cells apart (``layout_keys``), form **axis groups**: a factor and the
sub-factors nested under it (``attention`` with ``attention.window``), so a
level reads ``local (window=4)`` and ``multihead`` needs no window. Two groups
are the rows and columns (``--factors`` picks them; by default attention,
position, then the other asked factors alphabetically, confounds last); every
combination of the remaining groups present in the runs gets its own table. A
confound that is not needed to tell cells apart (a learning rate changed in one
cell only) is folded out: the cell keeps its place, with the differing value as
a note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from analysis.command.errors import ReportError
from analysis.data.cells import (
    factor_parent,
    format_value,
    is_budget,
    is_missing,
    makes_factors,
    normalise,
    order_factors,
)

MAX_AXES = 2


def _values(frame: pd.DataFrame, key: str) -> list:
    return [normalise(v) for v in frame[key]] if key in frame.columns else [None] * len(frame)


def task_factors(frame: pd.DataFrame, factors: Sequence[str]) -> list[str]:
    """The factors that vary within one task's runs (each sub-factor within one value of its parent)."""
    out = []
    for key in factors:
        top = factor_parent(key, factors)
        parents = _values(frame, top) if top else [None] * len(frame)
        seen: dict[str, set] = {}
        for p, v in zip(parents, _values(frame, key)):
            seen.setdefault(repr(p), set()).add(repr(v))
        if any(len(vs) > 1 for vs in seen.values()):
            out.append(key)
    return order_factors(out)


@dataclass(frozen=True)
class Axis:
    """A factor and the sub-factors folded into its levels."""

    keys: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.keys[0]

    def level(self, row: Mapping[str, Any]) -> str:
        """``local (window=4)``: the top value, then each sub-factor that the cell has."""
        top, *subs = self.keys
        text = format_value(row.get(top))
        extra = [
            f"{k[len(top) + 1 :] if k.startswith(top + '.') else k}={format_value(row.get(k))}"
            for k in subs
            if not is_missing(row.get(k))
        ]
        return f"{text} ({', '.join(extra)})" if extra else text

    def sort_key(self, row: Mapping[str, Any]) -> tuple:
        return tuple(_order(row.get(k)) for k in self.keys)


def _order(value: Any) -> tuple:
    """Numbers by value, then text, missing last: 2 < 16 (not "16" < "2")."""
    value = normalise(value)
    if value is None:
        return (2, 0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0, str(value))


def axis_groups(factors: Sequence[str]) -> list[Axis]:
    """Each top-level factor with the factors nested under it, in factor order."""
    groups: dict[str, list[str]] = {}
    for key in factors:
        top = key
        while (up := factor_parent(top, factors)) is not None and up in factors:
            top = up
        groups.setdefault(top, []).append(key)
    return [Axis(tuple(keys)) for keys in groups.values()]


def choose_axes(factors: Sequence[str], asked: Sequence[str] | None) -> tuple[list[Axis], list[Axis]]:
    """(axes, sliced): the row and column groups, and the groups that get one table per combination."""
    named = [k for k in (asked or []) if k in factors]
    if not named:  # nothing asked, or what was asked does not vary in this task
        groups = axis_groups(factors)
        return groups[:MAX_AXES], groups[MAX_AXES:]
    # A named factor takes its unnamed sub-factors with it; the rest are grouped as usual.
    axes = []
    for key in named:
        subs = [
            k
            for k in factors
            if k.startswith(key + ".")
            and k not in named
            and not any(k.startswith(n + ".") and len(n) > len(key) for n in named)
        ]
        axes.append(Axis((key, *subs)))
    used = {k for a in axes for k in a.keys}
    rest = [k for k in factors if k not in used]
    return axes, axis_groups(rest)


@dataclass
class Grid:
    """One table of one task: cells by row level × column level, with the other groups fixed (``where``)."""

    task: str
    rows: Axis | None
    columns: Axis | None
    where: dict[str, str] = field(default_factory=dict)
    cells: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per cell: cell, cell_label, row, column
    row_levels: list[str] = field(default_factory=list)
    column_levels: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.where.items())

    def header(self) -> list[str]:
        corner = self.rows.name if self.rows else "cell"
        if self.columns is None:
            return [corner]
        return [f"{corner} \\ {self.columns.name}", *self.column_levels]

    def cell_at(self, row: str, column: str | None) -> pd.Series | None:
        hit = self.cells[(self.cells["row"] == row) & (self.cells["column"] == (column or ""))]
        return None if hit.empty else hit.iloc[0]


def _key(values: Iterable[Any]) -> str:
    return repr(tuple(normalise(v) for v in values))


def has_contrast(cells: pd.DataFrame, key: str, factors: Sequence[str]) -> bool:
    """True when two cells differ in ``key`` (and keys nested under it) alone: a controlled comparison exists."""
    others = [f for f in factors if f != key and not f.startswith(key + ".")]
    seen: dict[str, set] = {}
    for row in cells.to_dict("records"):
        seen.setdefault(_key(row.get(f) for f in others), set()).add(_key([row.get(key)]))
    return any(len(values) > 1 for values in seen.values())


def asked_factors(task_runs: pd.DataFrame, here: Sequence[str], asked: Sequence[str] | None) -> list[str]:
    """The factors of one task the user asked for (the rule is in ``analysis.data.confounds``).

    Named with ``--factors``: those. Otherwise every varying key but budget and
    provenance keys, and only where two cells differ in it alone: a learning rate
    changed in one cell only, or two keys that always change together, compare
    nothing under control and are confounds.
    """
    if asked:
        return [k for k in here if k in asked]
    cells = task_runs.drop_duplicates("cell")
    return [k for k in here if not is_budget(k) and has_contrast(cells, k, here)]


def layout_keys(task_runs: pd.DataFrame, here: Sequence[str], designed: Sequence[str]) -> list[str]:
    """The asked factors, plus the other factors still needed to tell the cells apart (asked ones first).

    A confound that no two cells of otherwise equal factors differ in is folded
    out of the layout: its cells keep their place in the table, marked ⚠.
    """
    cells = task_runs.drop_duplicates("cell")
    keys = list(here)
    for key in reversed([k for k in here if k not in designed]):
        trial = [k for k in keys if k != key]
        if not cells.apply(lambda r, trial=trial: _key(r.get(k) for k in trial), axis=1).duplicated().any():
            keys = trial
    return [k for k in keys if k in designed] + [k for k in keys if k not in designed]


def placed_runs(task_runs: pd.DataFrame, here: Sequence[str]) -> pd.DataFrame:
    """The runs whose cells get a table position: every cell with a completed run, and a cell of failed or
    diverged runs only where no other cell has its factor values.

    Failed and diverged runs make no factors (``analysis.data.cells``), so such runs of settings no completed run
    has read as the same factor values; they are listed with the failures, not pooled into one table position.
    """
    if "status" not in task_runs.columns:
        return task_runs
    computed = set(task_runs.loc[task_runs["status"].map(makes_factors), "cell"])
    taken = {_key(r.get(k) for k in here) for r in task_runs[task_runs["cell"].isin(computed)].to_dict("records")}
    kept = set(computed)
    for r in task_runs[~task_runs["cell"].isin(computed)].drop_duplicates("cell").to_dict("records"):
        position = _key(r.get(k) for k in here)
        if position not in taken:
            taken.add(position)
            kept.add(r["cell"])
    return task_runs[task_runs["cell"].isin(kept)]


def grids(frame: pd.DataFrame, task: str, factors: Sequence[str], asked: Sequence[str] | None = None) -> list[Grid]:
    """The tables of one task: one per combination of the factor groups that are not axes."""
    task_runs = frame[frame["task"] == task]
    here = task_factors(task_runs, factors)
    task_runs = placed_runs(task_runs, here)
    designed = asked_factors(task_runs, here, asked)
    placed = layout_keys(task_runs, here, designed)
    folded = [k for k in here if k not in placed]
    axes, sliced = choose_axes(placed, asked)
    rows = axes[0] if axes else None
    columns = axes[1] if len(axes) > 1 else None
    records = task_runs.drop_duplicates("cell").to_dict("records")
    out: dict[tuple, list[dict]] = {}
    order: dict[tuple, tuple] = {}
    for r in records:
        where = tuple(a.level(r) for a in sliced)
        order.setdefault(where, tuple(a.sort_key(r) for a in sliced))
        out.setdefault(where, []).append(r)
    result = []
    for where in sorted(out, key=lambda w: order[w]):
        cells = out[where]
        table = pd.DataFrame(
            {
                "cell": [r["cell"] for r in cells],
                "cell_label": [r["cell_label"] for r in cells],
                "row": [rows.level(r) if rows else r["cell_label"] for r in cells],
                "column": [columns.level(r) if columns else "" for r in cells],
                "note": _folded_notes(cells, folded),
            }
        )
        positions = table[["row", "column"]].apply(tuple, axis=1)
        if positions.duplicated().any():  # would be a pooling bug: two configurations in one table position
            raise AssertionError(f"two cells share a table position in task {task}: {list(table['cell_label'])}")
        row_sorted = sorted(cells, key=lambda r: rows.sort_key(r) if rows else (r["cell_label"],))
        col_sorted = sorted(cells, key=lambda r: columns.sort_key(r)) if columns else []
        grid = Grid(
            task,
            rows,
            columns,
            dict(zip((a.name for a in sliced), where)),
            table,
            list(dict.fromkeys(rows.level(r) if rows else r["cell_label"] for r in row_sorted)),
            list(dict.fromkeys(columns.level(r) for r in col_sorted)) if columns else [],
        )
        # Table order (row level, then column level), so comparisons and costs read as the tables do.
        rank_row = {v: i for i, v in enumerate(grid.row_levels)}
        rank_col = {v: i for i, v in enumerate(grid.column_levels)}
        grid.cells = (
            table.assign(_r=table["row"].map(rank_row), _c=table["column"].map(rank_col).fillna(0))
            .sort_values(["_r", "_c"], kind="stable")
            .drop(columns=["_r", "_c"])
            .reset_index(drop=True)
        )
        result.append(grid)
    return result


def _folded_notes(cells: list[dict], folded: Sequence[str]) -> list[str]:
    """``optim.lr=0.01`` for a cell whose folded confound differs from the table's most common value."""
    notes = []
    modes = {}
    for key in folded:
        counts: dict[str, int] = {}
        for r in cells:
            counts[format_value(r.get(key))] = counts.get(format_value(r.get(key)), 0) + 1
        modes[key] = max(sorted(counts), key=lambda v: counts[v])
    for r in cells:
        notes.append(", ".join(f"{k}={format_value(r.get(k))}" for k in folded if format_value(r.get(k)) != modes[k]))
    return notes


def check_asked(asked: Sequence[str] | None, factors: Sequence[str]) -> None:
    """``--factors`` names at most two factors, each one that varies."""
    if not asked:
        return
    if len(asked) > MAX_AXES:
        raise ReportError(
            f"--factors {' '.join(asked)}: at most {MAX_AXES} factors make a table; "
            "the others get one table per combination"
        )
    unknown = [k for k in asked if k not in factors]
    if unknown:
        raise ReportError(
            f"--factors {' '.join(unknown)}: not a factor of these runs; factors that vary: "
            f"{', '.join(factors) or 'none'}"
        )


# ---------------------------------------------------------------- --where and --baseline: factor values


def _lookup(frame: pd.DataFrame, key: str) -> pd.Series | None:
    """A factor column, or the constant config column of a key that does not vary."""
    for column in (key, f"config.{key}", f"config.{key}.name"):
        if column in frame.columns:
            return frame[column]
    return None


def equals(value: Any, text: str) -> bool:
    """A factor value against a value typed on the command line: numbers by value (3e-3 == 0.003)."""
    if format_value(value) == text:
        return True
    try:
        return not is_missing(value) and math.isclose(float(value), float(text), rel_tol=1e-12)
    except (TypeError, ValueError):
        return False


def parse_assignments(items: Sequence[str], option: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ReportError(f"{option} {item!r} must be KEY=VALUE, e.g. attention.window=8")
        out[key.strip()] = value.strip()
    return out


def match(frame: pd.DataFrame, values: Mapping[str, str], option: str) -> pd.Series:
    """Rows whose factor (or constant config) values equal ``values``; an unknown key is a ReportError."""
    mask = pd.Series(True, index=frame.index)
    for key, text in values.items():
        column = _lookup(frame, key)
        if column is None:
            raise ReportError(
                f"{option}: {key!r} is not a config key of these runs; use a dotted key such as "
                "attention, position, attention.window, optim.lr"
            )
        # a list, not Series.map: mapping a category column (attention, position) gives a category column
        mask &= pd.Series([equals(v, text) for v in column], index=frame.index, dtype=bool)
    return mask


def apply_where(frame: pd.DataFrame, where: Sequence[str] | None) -> pd.DataFrame:
    """The runs with every ``KEY=VALUE`` of ``--where``; none left is a ReportError naming the values found."""
    if not where:
        return frame
    values = parse_assignments(where, "--where")
    mask = match(frame, values, "--where")
    if not mask.any():
        found = "; ".join(f"{k}: {', '.join(sorted({format_value(v) for v in _lookup(frame, k)}))}" for k in values)
        raise ReportError(f"--where {' '.join(where)}: no run matches; values found: {found}")
    return frame[mask]
