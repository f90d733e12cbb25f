"""What a W&B run holds beyond the scalars Lightning logs: metric definitions, the per-length
results and attention statistics as tables, and line plots of accuracy and alignment against
evaluation length, so a dashboard shows each run's length-generalisation curve."""

from __future__ import annotations

from typing import Any

from experiments.model.attention_stats import STATS, headline_layer

LENGTH = "length"  # the x axis of the per-length curves
BY_LENGTH = "by_length"  # prefix of the per-length metrics, and the name of their table
STATS_TABLE = "attention_stats"
STEP = "trainer/global_step"  # Lightning's step axis
EXTRA = ("align_acc_best_head",)


def define_metrics(run: Any) -> None:
    """Step axes and summaries: training curves against the step, each summary the final value."""
    run.define_metric(STEP)
    for prefix in ("train", "val", "test"):
        run.define_metric(f"{prefix}/*", step_metric=STEP, summary="last")
    run.define_metric(LENGTH)


def _inside(length: str, train: list[int] | None) -> bool | None:
    if not train or not length.isdigit():
        return None
    return train[0] <= int(length) <= train[1]


def _lengths(keys) -> list[str]:
    return sorted(keys, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))


def length_rows(result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of the per-length table: the metrics, and the headline layer's alignment."""
    by_length = result.get("by_length") or {}
    stats = result.get("attention_stats") or {}
    train = result.get("train_lengths")
    layer = headline_layer(stats, train)
    metrics = sorted({k for v in by_length.values() for k in v})
    extra = ["alignment", "alignment_share", "entropy_ratio"] if layer else []
    columns = [LENGTH, "in_training", *metrics, *extra, "layer"]
    rows = []
    for length in _lengths(set(by_length) | set(stats.get(layer, {}) if layer else {})):
        s = stats.get(layer, {}).get(length, {}) if layer else {}
        row = [int(length) if length.isdigit() else length, _inside(length, train)]
        row += [by_length.get(length, {}).get(m) for m in metrics]
        row += [s.get("align_acc"), s.get("align_share"), s.get("entropy_ratio")] if layer else []
        rows.append([*row, layer])
    return columns, rows


def stats_rows(result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Long table of the attention statistics: one row per layer and length."""
    stats = result.get("attention_stats") or {}
    train = result.get("train_lengths")
    columns = ["layer", "block", LENGTH, "in_training", *STATS, *EXTRA]
    rows = []
    for layer, by_length in stats.items():
        for length in _lengths(by_length):
            s = by_length[length]
            rows.append(
                [
                    layer,
                    layer.split("/")[0],
                    int(length) if length.isdigit() else length,
                    _inside(length, train),
                    *[s.get(k) for k in (*STATS, *EXTRA)],
                ]
            )
    return columns, rows


def log_result(run: Any, result: dict[str, Any]) -> None:
    """Per-length curves (as metrics against ``length``), both tables and two line plots."""
    import wandb

    columns, rows = length_rows(result)
    if rows:
        values = [c for c in columns if c not in (LENGTH, "in_training", "layer")]
        for name in values:
            # summary "none": the last length's value is no summary of a curve
            run.define_metric(f"{BY_LENGTH}/{name}", step_metric=LENGTH, summary="none")
        for row in rows:
            if isinstance(row[0], int):
                point = {f"{BY_LENGTH}/{c}": v for c, v in zip(columns, row) if c in values and v is not None}
                run.log({LENGTH: row[0], **point})
        table = wandb.Table(columns=columns, data=rows)
        logged: dict[str, Any] = {BY_LENGTH: table}
        accuracy = next((c for c in ("seq_acc", "acc", "token_acc") if c in columns), None)
        if accuracy:
            logged["charts/accuracy_vs_length"] = wandb.plot.line(
                table, LENGTH, accuracy, title=f"{accuracy} against evaluation length"
            )
        if "alignment" in columns:
            logged["charts/alignment_vs_length"] = wandb.plot.line(
                table, LENGTH, "alignment", title="attention alignment accuracy against evaluation length"
            )
        run.log(logged)
    columns, rows = stats_rows(result)
    if rows:
        run.log({STATS_TABLE: wandb.Table(columns=columns, data=rows)})
