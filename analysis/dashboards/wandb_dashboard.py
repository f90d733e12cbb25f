"""A W&B report comparing the runs of one sweep:
``python -m analysis.dashboards.wandb_dashboard --project P --group G``.

With network access and an API key it creates the report with ``wandb-workspaces``
(``pip install 'attnlab[dashboards]'``) and prints its URL. Without them (or with
``--dry-run``) it prints the panel specification it would create, as JSON, and exits 0.

The panels read what every training run logs (experiments/record/wandb_tables.py): the
per-length metrics ``by_length/*`` against ``length`` (accuracy, attention alignment,
entropy ratio), the training curves, the cost in the summary (``cost/*``) and the
attention maps (``attention/<block>/<layer>``). Runs are those of the group (the sweep
name), grouped by attention type and position encoding, so each line is a mean over seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

GROUP_BY = ["config.attention.name", "config.position.name"]
LENGTH_METRICS = (
    ("by_length/seq_acc", "sequence accuracy"),
    ("by_length/token_acc", "token accuracy"),
    ("by_length/alignment", "attention alignment accuracy"),
    ("by_length/entropy_ratio", "entropy ratio H / log n"),
)
COST_METRICS = (
    "cost/params",
    "cost/train_seconds",
    "cost/tokens_per_second",
    "cost/peak_memory_mb",
    "cost/attention_stats_seconds",
)
MAP_KEYS = ("attention/encoder_self/0", "attention/decoder_self/0", "attention/cross/0")


def specification(project: str, group: str, entity: str | None = None) -> dict[str, Any]:
    """The report as plain data: blocks of text and panel grids, each grid over the group's runs."""
    runset = {"entity": entity, "project": project, "name": group, "filters": f"Group = '{group}'", "groupby": GROUP_BY}
    line = [
        {"type": "LinePlot", "title": f"{title} against evaluation length", "x": "length", "y": [key]}
        for key, title in LENGTH_METRICS
    ]
    return {
        "entity": entity,
        "project": project,
        "title": f"attnlab: {group}",
        "description": "Length generalisation, attention statistics, cost and attention maps of one sweep, "
        "grouped by attention type and position encoding (means over seeds).",
        "blocks": [
            {"type": "H1", "text": "Length generalisation"},
            {
                "type": "P",
                "text": "Per-length test results against evaluation length; the alignment is the share of "
                "output positions whose cross-attention peaks on the source position the task "
                "names (copy, reverse, sort).",
            },
            {"type": "PanelGrid", "runset": runset, "panels": line},
            {"type": "H1", "text": "Training"},
            {
                "type": "PanelGrid",
                "runset": runset,
                "panels": [
                    {"type": "LinePlot", "title": "validation loss", "x": "trainer/global_step", "y": ["val/loss"]},
                    {"type": "LinePlot", "title": "training loss", "x": "trainer/global_step", "y": ["train/loss"]},
                ],
            },
            {"type": "H1", "text": "Cost"},
            {
                "type": "PanelGrid",
                "runset": {**runset, "visible_columns": [f"summary:{m}" for m in COST_METRICS]},
                "panels": [{"type": "BarPlot", "title": metric, "metrics": [metric]} for metric in COST_METRICS],
            },
            {"type": "H1", "text": "Attention maps"},
            {
                "type": "PanelGrid",
                "runset": {**runset, "groupby": []},
                "panels": [
                    {
                        "type": "MediaBrowser",
                        "title": "attention weights, head 0, one fixed example",
                        "media_keys": list(MAP_KEYS),
                        "num_columns": len(MAP_KEYS),
                    }
                ],
            },
        ],
    }


def build(spec: dict[str, Any]):
    """The ``wandb_workspaces`` report for a specification (nothing is sent until ``save()``)."""
    import wandb_workspaces.reports.v2 as wr

    def runset(r: dict[str, Any]):
        extra = {"visible_columns": r["visible_columns"]} if r.get("visible_columns") else {}
        return wr.Runset(
            entity=r["entity"],
            project=r["project"],
            name=r["name"],
            filters=r["filters"],
            groupby=r["groupby"],
            **extra,
        )

    def panel(p: dict[str, Any]):
        if p["type"] == "LinePlot":
            return wr.LinePlot(title=p["title"], x=p["x"], y=p["y"])
        if p["type"] == "BarPlot":
            return wr.BarPlot(title=p["title"], metrics=p["metrics"])
        if p["type"] == "MediaBrowser":
            return wr.MediaBrowser(title=p["title"], media_keys=p["media_keys"], num_columns=p["num_columns"])
        raise ValueError(f"panel type {p['type']!r} is not one this script builds")

    def block(b: dict[str, Any]):
        if b["type"] == "H1":
            return wr.H1(b["text"])
        if b["type"] == "P":
            return wr.P(b["text"])
        return wr.PanelGrid(runsets=[runset(b["runset"])], panels=[panel(p) for p in b["panels"]])

    return wr.Report(
        entity=spec["entity"],
        project=spec["project"],
        title=spec["title"],
        description=spec["description"],
        blocks=[block(b) for b in spec["blocks"]],
    )


def api_entity(entity: str | None) -> str | None:
    """The entity to write to when W&B can be reached with an API key; None otherwise."""
    if os.environ.get("WANDB_MODE") in ("offline", "disabled"):
        return None
    try:
        import wandb

        api = wandb.Api(timeout=15)
        if not api.api_key:
            return None
        return entity or api.default_entity
    except Exception:  # noqa: BLE001 - no key, no network, no server: all mean "print the spec"
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analysis.dashboards.wandb_dashboard", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--project", required=True, help="W&B project (logger.wandb.project; attnlab by default)")
    parser.add_argument("--group", required=True, help="run group: the sweep name (the `name` key of the config)")
    parser.add_argument("--entity", default=None, help="W&B entity (default: the API key's)")
    parser.add_argument("--dry-run", action="store_true", help="print the specification, create nothing")
    args = parser.parse_args(argv)
    entity = None if args.dry_run else api_entity(args.entity)
    if entity is None:
        spec = specification(args.project, args.group, args.entity)
        print(json.dumps(spec, indent=2))
        if not args.dry_run:
            print(
                "W&B is not reachable with an API key (wandb login, or WANDB_API_KEY); printed the report "
                "specification instead of creating it",
                file=sys.stderr,
            )
        return 0
    report = build(specification(args.project, args.group, entity))
    try:
        report.save()
    except Exception as err:  # noqa: BLE001 - a network failure halfway is reported, not raised
        print(json.dumps(specification(args.project, args.group, entity), indent=2))
        print(f"could not create the report ({type(err).__name__}: {err}); printed its specification", file=sys.stderr)
        return 0
    print(report.url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
