"""What a run shows a person at its end: status, headline metrics, the per-length table,
cost, and where the result, the report command and the W&B run are."""

from __future__ import annotations

import glob
import os
import shlex
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from experiments.model.attention_stats import headline_layer
from experiments.sweep.grid import report_command

HEADLINE = ("test/seq_acc", "test/token_acc", "test/acc", "test/bleu", "test/chrf", "test/ppl", "test/bpc", "val/loss")


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def wandb_location(result: dict[str, Any], run_dir: Path) -> str | None:
    """The W&B run: its folder and the command that uploads it (offline), or its folder (online)."""
    found = sorted(glob.glob(str(run_dir / "wandb" / f"*run-*-{result.get('run_id')}")))
    if not found:
        return None
    folder = found[-1]
    if Path(folder).name.startswith("offline-"):
        return f"{folder}  (upload: {shlex.join(['wandb', 'sync', folder])})"
    return folder


def length_table(result: dict[str, Any]) -> Table | None:
    """One row per evaluation length: accuracy, and the alignment and entropy ratio of the headline layer."""
    by_length = result.get("by_length") or {}
    if not by_length:
        return None
    stats = result.get("attention_stats") or {}
    train = result.get("train_lengths")
    layer = headline_layer(stats, train)
    columns = [c for c in ("token_acc", "seq_acc", "acc", "loss", "bpc") if any(c in v for v in by_length.values())]
    table = Table(
        title="by evaluation length" + (f" (training lengths {train[0]}-{train[1]})" if train else ""),
        title_justify="left",
    )
    table.add_column("length", justify="right")
    for column in columns:
        table.add_column(column, justify="right")
    layer_stats = stats.get(layer, {}) if layer else {}
    with_align = any(v.get("align_acc") is not None for v in layer_stats.values())
    if with_align:
        table.add_column(f"alignment {layer}", justify="right")
    if layer_stats:
        table.add_column(f"entropy ratio {layer}", justify="right")
    for length in sorted(by_length, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n)):
        inside = train and length.isdigit() and train[0] <= int(length) <= train[1]
        row = [f"{length}{'' if inside or not train else ' *'}"]
        row += [_num(by_length[length].get(c)) for c in columns]
        s = layer_stats.get(length, {})
        if with_align:
            row.append(_num(s.get("align_acc")))
        if layer_stats:
            row.append(_num(s.get("entropy_ratio")))
        table.add_row(*row)
    if train:
        table.caption = "* outside the training lengths"
        table.caption_justify = "left"
    return table


def cost_line(cost: dict[str, Any]) -> str:
    parts = []
    if cost.get("params") is not None:
        parts.append(f"{cost['params']:,} parameters")
    if cost.get("steps") is not None and cost.get("train_seconds") is not None:
        parts.append(f"{cost['steps']} steps in {cost['train_seconds']:.1f} s")
    if cost.get("tokens_per_second"):
        parts.append(f"{cost['tokens_per_second']:,.0f} tokens/s")
    if cost.get("peak_memory_mb") is not None:
        parts.append(f"peak memory {cost['peak_memory_mb']:.0f} MB")
    if cost.get("test_seconds"):
        text = f"test {cost['test_seconds']:.1f} s"
        if cost.get("attention_stats_seconds") is not None:
            text += f" (attention statistics {100 * cost['attention_stats_seconds'] / cost['test_seconds']:.0f}%)"
        parts.append(text)
    return " · ".join(parts)


def print_summary(result: dict[str, Any], run_dir: Path, console: Console | None = None) -> None:
    """Print the closing summary of a completed run."""
    console = console or Console(highlight=False, soft_wrap=True)
    what = f"{result.get('task')} · {result.get('attention')} + {result.get('position')} · seed {result.get('seed')}"
    console.print(f"[bold]attnlab[/bold] {result.get('status')}: {what}")
    metrics = result.get("metrics") or {}
    shown = [f"{k} {_num(metrics[k])}" for k in HEADLINE if metrics.get(k) is not None]
    if shown:
        console.print("  " + "   ".join(shown))
    table = length_table(result)
    if table is not None:
        console.print(table)
    line = cost_line(result.get("cost") or {})
    if line:
        console.print(f"cost    {line}")
    # paths as they are: rich would read "[x]" in a folder name as markup and drop it
    console.print(f"result  {run_dir / 'result.json'}", markup=False)
    console.print(f"report  {report_command(run_dir)}", markup=False)
    console.print(f"W&B     {wandb_line(result, run_dir)}", markup=False)


def wandb_line(result: dict[str, Any], run_dir: Path) -> str:
    """Where the W&B run is; else why there is none: no W&B logger chosen (``logger=csv``), W&B disabled, or a
    W&B logger that did not start."""
    where = wandb_location(result, run_dir)
    if where:
        return where
    config = result.get("config") or {}
    loggers = sorted({key.split(".")[1] for key in config if key.startswith("logger.") and key.count(".") >= 2})
    if "wandb" not in loggers:
        return f"not used (loggers: {', '.join(loggers) or 'none'}; logger=default or logger=wandb adds W&B)"
    if config.get("logger.wandb.mode") == "disabled":
        return "off (logger.wandb.mode=disabled)"
    if config.get("logger.wandb.mode") is None and os.environ.get("WANDB_MODE") == "disabled":
        return "off (WANDB_MODE=disabled)"
    return "chosen, but it did not start (no W&B run folder under the run)"
