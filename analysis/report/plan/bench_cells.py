"""``--bench`` without a file: each cell's attention and position configuration measured at long T, cached.

The report's cells were trained at short lengths; what a variant costs at long T is
what the benchmark measures. For every distinct (attention type and its parameters,
position encoding and its parameters, d_model, heads, causal, backend) among the cells,
this times one attention layer's forward + backward at ``BENCH_LENGTHS`` by running
``python -m experiments.bench scaling`` for it, a child process per configuration, and
reading back the JSON it writes: the analysis reads files and never imports
``experiments``, and a layer that crashes or exhausts memory takes only its child down.

Measurements are cached in ``<out>/bench_cells.json``, keyed by the configuration,
the lengths, the device, torch and the thread count: a second report into the same
folder measures only configurations it has not seen. What is measured:

- the layer the cell's ``attention`` names (a role's own type, e.g. a different cross
  attention, is not measured separately), self attention of batch 1, causal for a
  decoder-only model, full otherwise, in float32;
- a learned table gets ``max_len = T`` (the runs' table is too short for long T).

The result is a benchmark dict in the format of ``experiments.bench`` JSON (records of
attention, position, backend, T, status, ms, tokens_per_second, peak_mb), so the
report's benchmark section reads it as it reads a file, plus each cell's records for
the quality–cost figure.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from analysis.data.cells import is_missing, normalise

BENCH_LENGTHS = (256, 1024, 2048)
MAX_SECONDS = 30.0  # per point: a longer T predicted to exceed it is recorded as skipped
WARMUP, REPEATS = 1, 3
# On CPU: one intra-op thread and the process's CPU clock, so that other jobs on a shared machine
# (and threads spinning against them) disturb the times least; the numbers compare cells, not machines.
CPU_THREADS, CPU_CLOCK = 1, "cpu"
CACHE_FILE = "bench_cells.json"
CACHE_VERSION = 1


@dataclass(frozen=True)
class Configuration:
    """What the benchmark needs to build one cell's attention layer and position encoding."""

    attention: str
    attention_params: tuple[tuple[str, Any], ...]
    position: str
    position_params: tuple[tuple[str, Any], ...]
    d_model: int
    heads: int | None
    causal: bool
    backend: str

    def key(self) -> str:
        return json.dumps(
            [
                self.attention,
                self.attention_params,
                self.position,
                self.position_params,
                self.d_model,
                self.heads,
                self.causal,
                self.backend,
            ],
            default=str,
        )

    def named(self, what: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
        return (self.attention, self.attention_params) if what == "attention" else (self.position, self.position_params)


def labels(configs: list[Configuration], what: str) -> dict[Configuration, str]:
    """``local(window=4)``: each configuration's attention (or position) name with the parameters that differ
    among the configurations of that name, as the report's tables name a level."""
    values: dict[str, dict[str, set]] = {}
    for config in configs:
        name, params = config.named(what)
        for key, value in params:
            values.setdefault(name, {}).setdefault(key, set()).add(repr(value))
    out = {}
    for config in configs:
        name, params = config.named(what)
        varying = [
            f"{k}={v}"
            for k, v in params
            if len(values[name][k]) > 1
            or sum(1 for c in configs if c.named(what)[0] == name and k not in dict(c.named(what)[1]))
        ]
        out[config] = f"{name}({','.join(varying)})" if varying else name
    return out


def _value(value: Any) -> Any:
    """A config value as the constructor takes it: integral floats from a NaN-padded column back to ints."""
    if isinstance(value, (list, tuple, dict)):
        return value
    return normalise(value)


def _params(row: pd.Series, group: str, drop: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    prefix = f"config.{group}."
    out = []
    for column, value in row.items():
        if isinstance(column, str) and column.startswith(prefix):
            key = column[len(prefix) :]
            if key != "name" and key not in drop and "." not in key and not is_missing(value):
                out.append((key, _value(value)))
    return tuple(sorted(out))


def cell_configurations(frame: pd.DataFrame) -> dict[str, Configuration]:
    """cell -> the configuration its first run names (every run of a cell shares it)."""
    found = {}
    for _, row in frame.drop_duplicates("cell").iterrows():
        heads = row.get("config.attention.num_heads")
        d_model = row.get("config.model.d_model")
        found[row["cell"]] = Configuration(
            attention=str(row["attention"]),
            attention_params=_params(row, "attention", ("num_heads",)),
            position=str(row["position"]),
            position_params=_params(row, "position", ("max_len",)),
            d_model=int(d_model) if not is_missing(d_model) else 64,
            heads=None if is_missing(heads) else int(heads),
            causal=row.get("config.model.arch") == "decoder",
            backend=str(row.get("config.backend")) if not is_missing(row.get("config.backend")) else "auto",
        )
    return found


def _environment(lengths: tuple[int, ...]) -> dict[str, Any]:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return {
        "device": device,
        "torch": torch.__version__,
        "threads": CPU_THREADS if device == "cpu" else torch.get_num_threads(),
        "clock": CPU_CLOCK if device == "cpu" else "wall",
        "lengths": list(lengths),
        "warmup": WARMUP,
        "repeats": REPEATS,
        "max_seconds": MAX_SECONDS,
    }


def _cache_key(config: Configuration, environment: dict[str, Any]) -> str:
    text = json.dumps([CACHE_VERSION, config.key(), environment], sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def _read_cache(path: Path) -> dict[str, list[dict[str, Any]]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) else None
    return entries if isinstance(entries, dict) else {}


def _write_cache(path: Path, entries: dict[str, list[dict[str, Any]]]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1) + "\n")
    os.replace(tmp, path)


ROOT = Path(__file__).resolve().parents[1]  # the child imports this checkout's experiments and variants


def bench_command(config: Configuration, environment: dict[str, Any], out: Path) -> list[str]:
    """The ``python -m experiments.bench scaling`` command line that measures ``config``."""
    command = [
        sys.executable,
        "-m",
        "experiments.bench",
        "scaling",
        "--attention",
        config.attention,
        "--position",
        config.position,
        "--backend",
        config.backend,
        "--lengths",
        *[str(t) for t in environment["lengths"]],
        "--d-model",
        str(config.d_model),
        "--batch",
        "1",
        "--dtype",
        "float32",
        "--repeats",
        str(REPEATS),
        "--warmup",
        str(WARMUP),
        "--max-seconds",
        str(MAX_SECONDS),
        "--device",
        environment["device"],
        "--out",
        str(out),
    ]
    if environment["device"] == "cpu":
        command += ["--threads", str(environment["threads"]), "--clock", environment["clock"]]
    if config.heads is not None:
        command += ["--heads", str(config.heads)]
    if config.causal:
        command.append("--causal")
    for flag, params in (("--attention-param", config.attention_params), ("--position-param", config.position_params)):
        if params:  # repr: the benchmark reads each value back with ast.literal_eval
            command += [flag, *[f"{k}={v!r}" for k, v in params]]
    return command


def _measure(config: Configuration, environment: dict[str, Any]) -> list[dict[str, Any]]:
    """Records of one configuration at every length, from ``python -m experiments.bench scaling`` in a child."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        proc = subprocess.run(
            bench_command(config, environment, out), capture_output=True, text=True, env=env, cwd=ROOT, check=False
        )
        if proc.returncode == 0 and out.is_file():
            return list(json.loads(out.read_text())["records"])
    lines = (proc.stderr or proc.stdout or "").strip().splitlines()
    error = lines[-1] if lines else f"exit code {proc.returncode}"
    return [
        {
            "attention": config.attention,
            "position": config.position,
            "backend": config.backend,
            "T": t,
            "status": "error",
            "ms": None,
            "tokens_per_second": None,
            "peak_mb": None,
            "error": error,
        }
        for t in environment["lengths"]
    ]


@dataclass
class CellBench:
    """The measured benchmark (``bench``, in experiments.bench's JSON format) and each cell's records."""

    bench: dict[str, Any]
    by_cell: dict[str, list[dict[str, Any]]]
    measured: int  # configurations measured now (the rest came from the cache)


def measure_cells(
    frame: pd.DataFrame,
    out: Path,
    lengths: tuple[int, ...] = BENCH_LENGTHS,
    measure: Callable[[Configuration, dict[str, Any]], list[dict[str, Any]]] | None = None,
) -> CellBench:
    """Benchmark every cell's configuration at ``lengths`` (cached in ``out/bench_cells.json``).

    ``measure`` replaces the timing (tests); by default ``python -m experiments.bench scaling`` runs it. A
    configuration whose benchmark did not run at all (every record an error) is not cached, so the next
    report tries it again.
    """
    measure = measure or _measure
    environment = _environment(tuple(lengths))
    cache_path = Path(out) / CACHE_FILE
    entries = _read_cache(cache_path)
    configs = cell_configurations(frame)
    by_key: dict[str, list[dict[str, Any]]] = {}
    measured = 0
    for config in dict.fromkeys(configs.values()):
        key = _cache_key(config, environment)
        if key not in entries:
            records = [dict(r) for r in measure(config, environment)]
            measured += 1
            by_key[config.key()] = records
            if any(r.get("status") != "error" for r in records):
                entries[key] = records
                _write_cache(cache_path, entries)  # a long measurement interrupted keeps what it finished
            continue
        by_key[config.key()] = entries[key]
    distinct = list(dict.fromkeys(configs.values()))
    attention, position = labels(distinct, "attention"), labels(distinct, "position")
    labelled = [
        {**r, "attention": attention[config], "position": position[config]}
        for config in distinct
        for r in by_key[config.key()]
    ]
    bench = {
        "device": f"{environment['device']} ({environment['threads']} threads), measured by the report",
        "torch": environment["torch"],
        "records": labelled,
        "exponents": [],
        "settings": {
            **environment,
            "what": "one attention layer, forward + backward, batch 1, float32; "
            "median ms (the process's CPU time on CPU); peak MB of live "
            "tensors (CPU) or allocated (CUDA)",
        },
    }
    by_cell = {cell: by_key[config.key()] for cell, config in configs.items()}
    return CellBench(bench, by_cell, measured)
