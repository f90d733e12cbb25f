"""The runs frame as a pandas user expects it: times as datetimes, integer settings as nullable integers, variant
names as categories, and all of it kept by a parquet round trip."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest

from analysis.collect import collect, learning_curves
from tests.helpers.results import result_dict, write_csv_log, write_result

pytest.importorskip("pyarrow")

# (attention, seed, attention.window or None: the soft run has no window, started_at as the run wrote it)
RUNS = [
    ("local", 0, 4, "2026-01-01T10:00:00+00:00"),
    ("soft", 1, None, "2026-01-02T12:30:00+02:00"),  # another offset: the same instant as 10:30 UTC
    ("local", 2, 8, "2026-01-03T10:00:00+00:00"),
]


def _sweep(root: Path) -> Path:
    for attention, seed, window, started in RUNS:
        by_length = {"8": {"token_acc": 0.9 - seed / 10}, "16": {"token_acc": 0.5 - seed / 10}}
        result = result_dict("reverse", attention, "rope", seed, metrics={"test/loss": 1.0 + seed}, by_length=by_length)
        if window is not None:
            result["config"]["attention.window"] = window
        result["config"]["optim.grad_clip"] = 1.0  # a float setting that happens to be whole: stays a float
        result["config"]["logger"] = {}  # logger=none: an empty mapping, which parquet cannot hold as a struct
        result["config"]["trainer.devices"] = "auto" if seed == 0 else 1  # text and numbers in one column
        result["started_at"] = started
        write_result(root / f"run{seed}", result)
        write_csv_log(root / f"run{seed}", final_loss=1.0 + seed)
    return root


def test_columns_are_typed(tmp_path: Path) -> None:
    runs = collect([_sweep(tmp_path)]).runs.sort_values("seed").reset_index(drop=True)

    assert str(runs["started_at"].dtype).startswith("datetime64") and str(runs["started_at"].dt.tz) == "UTC"
    # the instants, computed here by the standard library from the text each run wrote
    expected = [datetime.fromisoformat(s).astimezone(timezone.utc) for *_, s in RUNS]
    assert [t.to_pydatetime() for t in runs["started_at"]] == expected

    window = runs["config.attention.window"]
    assert window.dtype == "Int64"
    assert window.tolist()[0] == 4 and window.isna().tolist() == [False, True, False] and window.tolist()[2] == 8
    assert runs["config.model.d_model"].dtype == "Int64"  # every run has it: an integer all the same
    assert runs["config.optim.grad_clip"].dtype == "float64"
    assert runs["config.optim.lr"].dtype == "float64"

    for column in ("task", "attention", "position"):
        assert isinstance(runs[column].dtype, pd.CategoricalDtype), column
    assert list(runs["attention"].cat.categories) == ["local", "soft"]
    # the factor the cells are told apart by (present only for local: a sub-factor) is an integer column too
    assert runs["attention.window"].dtype == "Int64"
    assert runs["config.logger"].isna().all()
    assert runs["config.trainer.devices"].tolist() == ["auto", "1", "1"]  # mixed kinds: text, for parquet
    curves = learning_curves(runs)
    assert isinstance(curves["attention"].dtype, pd.CategoricalDtype) and set(curves["attention"]) == {"local", "soft"}


def test_parquet_round_trip_keeps_values_and_dtypes(tmp_path: Path) -> None:
    runs = collect([_sweep(tmp_path / "sweep")])
    path = tmp_path / "runs.parquet"
    runs.runs.to_parquet(path)
    back = pd.read_parquet(path)
    pd.testing.assert_series_equal(back.dtypes, runs.runs.dtypes)
    scalar = [c for c in runs.runs.columns if runs.runs[c].dtype != object]  # dict and list cells: see dtypes.py
    pd.testing.assert_frame_equal(back[scalar], runs.runs[scalar])

    runs.by_length.to_parquet(tmp_path / "by_length.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "by_length.parquet"), runs.by_length)


def test_results_csv_writes_the_times_as_iso_8601(tmp_path: Path) -> None:
    from analysis.report.sections.tables import results_frame_for_csv

    runs = collect([_sweep(tmp_path)]).runs.sort_values("seed")
    expected = [datetime.fromisoformat(s).astimezone(timezone.utc).isoformat() for *_, s in RUNS]
    assert results_frame_for_csv(runs)["started_at"].tolist() == expected
