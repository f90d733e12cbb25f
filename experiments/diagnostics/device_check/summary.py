"""``summary.json`` and the one-screen ``summary.txt`` from what the sections left; never raises on a missing part
(a cut section leaves some out), so both exist whatever ended the run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from experiments.diagnostics.device_check.plan import Knobs

#: log signatures of the failures a pass looks for, counted over every log
SIGNATURES = {
    "dynamo recompiles": r"Recompiling function",
    "recompile limit hit": r"hit config\.(recompile_limit|accumulated_recompile_limit|cache_size_limit)",
    "flex compile bound (attnlab)": r"flex_attention compiled \d+ times",
    "eager flex (materialises T^2)": r"flex_attention called without torch\.compile",
    "smem overflow": r"out of resource|OutOfResources",
    "no flex kernel builds (attnlab)": r"no FlexAttention kernel builds",
    "multi-index captured grad": r"multiple indexing operations",
    "CUDA error": r"CUDA error|illegal memory access",
    "OOM": r"CUDA out of memory|OutOfMemoryError",
    "config refused": r"is not allowed|is not a keyword of lightning",
    "traceback": r"Traceback \(most recent call last\)",
}


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cells(folder: Path) -> list[dict[str, Any]]:
    """One row per cell's result.json under ``folder``: wall, fit overhead, compile, step ms, tokens/s."""
    rows = []
    for path in sorted(folder.rglob("result.json")) if folder.exists() else []:
        result = _load(path) or {}
        cost = result.get("cost") or {}
        steps, step_ms, train_s = cost.get("steps"), cost.get("step_ms"), cost.get("train_seconds")
        rows.append(
            {
                "cell": f"{result.get('attention')}+{result.get('position')}",
                "seed": result.get("seed"),
                "status": result.get("status"),
                "wall_s": cost.get("wall_seconds"),
                "train_s": train_s,
                # the fit beyond its steady steps: compiles, probes, validation, the first steps
                "fit_overhead_s": train_s - steps * step_ms / 1000 if train_s and steps and step_ms else None,
                "compile_s": cost.get("compile_seconds"),
                "step_ms": step_ms,
                "tokens_per_s": cost.get("tokens_per_second"),
                "kernels": sorted(set((result.get("kernels") or {}).values())),
            }
        )
    return rows


def signatures(work: Path) -> dict[str, int]:
    texts = [p.read_text(errors="replace") for p in work.rglob("*.log")]
    counts = {label: sum(len(re.findall(pattern, t)) for t in texts) for label, pattern in SIGNATURES.items()}
    return {label: n for label, n in counts.items() if n}


def ensemble(rows: list[dict[str, Any]], work: Path) -> dict[str, Any]:
    """8 seeds as one process against 8 runs: each section's whole process time and their ratio."""
    by_name = {r["name"]: r for r in rows}
    batched, separate = by_name.get("ensemble_batched"), by_name.get("ensemble_separate")
    found: dict[str, Any] = {"batched_members": len(cells(work / "ens_batched"))}
    done = [c for c in cells(work / "ens_sep") if c["status"] == "completed"]
    found["separate_completed"] = len(done)
    if batched and separate and batched["status"] == "ok" and separate["status"] == "ok" and batched["seconds"]:
        found["speedup_whole_process"] = separate["seconds"] / batched["seconds"]
    return found


def _f(x: Any, spec: str = "{:.1f}") -> str:
    return "n/a" if x is None else spec.format(x)


def screen(summary: dict[str, Any]) -> str:
    env = summary.get("env") or {}
    lines = [
        f"attnlab device check, run {summary['run']}: {env.get('gpu', '?')} (torch {env.get('torch', '?')}), "
        f"{summary['elapsed_s']:.0f} s of {summary['deadline_s']}",
        "sections: " + " | ".join(f"{r['name']} {r['status']} {r['seconds']}s" for r in summary["sections"]),
    ]
    for kind in ("mfu_eager", "mfu_compiled"):
        m = summary.get(kind) or {}
        if m:
            lines.append(f"{kind}: MFU {_f((m.get('mfu') or 0) * 100)}%, step {_f(m.get('step_ms'))} ms")
    for probe in summary.get("probes") or []:
        lines.append(f"probe {probe['case']}: {probe['status']} {str(probe.get('detail', ''))[:150]}")
    for steps, rows in summary["grid"].items():
        if not rows:
            continue
        walls = [r["wall_s"] for r in rows if r["wall_s"]]
        done = sum(r["status"] == "completed" for r in rows)
        lines.append(
            f"grid {steps} steps: {done}/{len(rows)} completed, cell wall max {_f(max(walls, default=None))} s"
        )
        lines.append(f"  {'cell':24} {'wall s':>7} {'fit+ s':>7} {'comp s':>7} {'step ms':>8} {'tok/s':>9}")
        for r in rows:
            lines.append(
                f"  {r['cell']:24} {_f(r['wall_s'], '{:.0f}'):>7} {_f(r['fit_overhead_s'], '{:.0f}'):>7} "
                f"{_f(r['compile_s']):>7} {_f(r['step_ms']):>8} {_f(r['tokens_per_s'], '{:.0f}'):>9}"
            )
    e = summary.get("ensemble") or {}
    if e.get("batched_members") or e.get("separate_completed"):
        lines.append(
            f"ensemble: {e.get('batched_members')} members batched, {e.get('separate_completed')} separate runs; "
            f"speed-up {_f(e.get('speedup_whole_process'), '{:.2f}')}x whole process"
        )
    if summary["signatures"]:
        lines.append("signatures: " + "; ".join(f"{k} x{v}" for k, v in summary["signatures"].items()))
    return "\n".join(lines) + "\n"


def write_summary(run: str, rows: list[dict[str, Any]], knobs: Knobs, out: Path, elapsed: float) -> str:
    """Write summary.json and summary.txt under ``out`` (each whole: written, then renamed); the screen's text."""
    work = knobs.work
    summary: dict[str, Any] = {
        "schema": "attnlab-device-check/2",
        "run": run,
        "elapsed_s": round(elapsed, 1),
        "deadline_s": knobs.deadline_s,
        "complete": bool(rows) and all(r["status"] == "ok" for r in rows),
        "sections": rows,
        **{name: _load(work / "json" / f"{name}.json") for name in ("env", "targets", "flex_check", "mfu_eager")},
        "mfu_compiled": _load(work / "json" / "mfu_compiled.json"),
        "probes": _load(work / "json" / "probes.json"),
        "grid": {str(n): cells(work / f"grid{n}") for n in knobs.grid_steps},
        "signatures": signatures(work) if work.exists() else {},
    }
    summary["ensemble"] = ensemble(rows, work)
    text = screen(summary)
    for name, body in (("summary.json", json.dumps(summary, indent=1, default=str)), ("summary.txt", text)):
        tmp = out / f".{name}.{os.getpid()}"
        tmp.write_text(body)
        os.replace(tmp, out / name)
    return text
