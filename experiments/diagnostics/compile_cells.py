"""``python -m experiments.diagnostics.compile_cells``: what compiling costs the first and the later cells of
one sweep, each cell a process of its own as a joblib worker's job is.

A cell here is what a quick-grid cell compiles of flex on CPU: ``experiment=quick``'s local + relative
model (seq2seq, width 64, window 8) on ``backend=flex`` with the compiled kernel
(``variants.flex.SETTINGS.compile_on_cpu``), validated under no_grad at the quick grid's evaluation
lengths and at one length past the first bucket (flex has no backward on CPU, so no training step).
Each cell reports Dynamo's compile seconds and graphs (``torch._dynamo`` counters) and its wall time.

``--cache``: ``sweep`` (the cells share ``<sweep>/.compile_cache``, ``experiments.sweep.gpu_share``),
``default`` (torch's own per-user folder, in a temporary folder of its own so nothing earlier is warm),
``off`` (``TORCHINDUCTOR_FORCE_DISABLE_CACHES``: every cell compiles everything itself).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: the quick grid's evaluation lengths, and one past the first flex length bucket (128)
LENGTHS = (12, 16, 24, 150)
CACHES = ("sweep", "default", "off")


def one_cell(sweep_dir: Path, cache: str) -> dict[str, Any]:
    """Compile and run the cell in this process; its compile seconds, graphs and wall time."""
    import contextlib

    began = time.perf_counter()
    import torch
    from torch._dynamo.utils import counters

    from experiments.diagnostics.flex_check import _batch, _tiny_model
    from experiments.model.compiling import compile_seconds_so_far
    from experiments.sweep.gpu_share import share_compile_cache
    from variants import flex

    torch.set_num_threads(1)
    flex.SETTINGS.compile_on_cpu = True
    shared = share_compile_cache(sweep_dir) if cache == "sweep" else contextlib.nullcontext()
    with shared:
        spec, model = _tiny_model("local", "relative", torch.device("cpu"), backend="flex", window=8)
        before = compile_seconds_so_far() or 0.0
        model.eval()
        with torch.no_grad():
            for T in LENGTHS:
                model(*_batch(spec, 4, T, torch.device("cpu")))
        compiled = (compile_seconds_so_far() or 0.0) - before
    return {
        "compile_seconds": round(compiled, 2),
        "graphs": int(counters["stats"]["unique_graphs"]),
        "fx_graph_cache_hits": int(counters["inductor"]["fxgraph_cache_hit"]),
        "wall_seconds": round(time.perf_counter() - began, 2),
    }


def run_cells(sweep_dir: Path, cache: str, cells: int) -> list[dict[str, Any]]:
    """``cells`` cells one after another, each in a fresh process, sharing what ``cache`` shares."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if cache == "default":
        env["TMPDIR"] = tempfile.mkdtemp(prefix="compile-cells-", dir=sweep_dir)  # torch's default under it
    if cache == "off":
        env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    rows = []
    for _ in range(cells):
        command = [sys.executable, "-m", "experiments.diagnostics.compile_cells", "--cell", "--cache", cache]
        proc = subprocess.run(
            [*command, "--sweep-dir", str(sweep_dir)], env=env, capture_output=True, text=True, check=False
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        rows.append(json.loads(lines[-1]) if proc.returncode == 0 and lines else {"error": proc.stderr[-500:]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.diagnostics.compile_cells", description=__doc__)
    parser.add_argument("--sweep-dir", type=Path, required=True, help="the sweep's folder (made if missing)")
    parser.add_argument("--cache", choices=CACHES, default="sweep")
    parser.add_argument("--cells", type=int, default=2)
    parser.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sweep_dir.mkdir(parents=True, exist_ok=True)
    if args.cell:
        print(json.dumps(one_cell(args.sweep_dir, args.cache)))
        return 0
    rows = run_cells(args.sweep_dir, args.cache, args.cells)
    first = rows[0].get("compile_seconds")
    for i, row in enumerate(rows, 1):
        share = f", {row['compile_seconds'] / first:.0%} of the first" if first and "compile_seconds" in row else ""
        print(f"cell {i} ({args.cache} cache): {json.dumps(row)}{share}")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
