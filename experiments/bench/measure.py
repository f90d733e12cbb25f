"""Time and peak memory of one step (a forward and a backward pass), on CPU or CUDA.

Time: the median of ``repeats`` runs after ``warmup`` runs, synchronising CUDA
around each. ``clock="wall"`` is elapsed time; ``clock="cpu"`` is the CPU time
of the process (all its threads), which other jobs on a shared machine disturb
far less; with one intra-op thread the two agree on an idle machine.

Peak memory, in MB above what was allocated before the step:
- CUDA: ``torch.cuda.max_memory_allocated``.
- CPU: PyTorch keeps no allocator statistics on CPU, so ``LiveTensorMemory`` (a
  ``TorchDispatchMode``) sees every tensor an operator returns, forward and
  backward alike, and counts the bytes of the storages still alive; its peak is
  the CPU counterpart of ``max_memory_allocated``. Views and in-place results
  share a storage that is already counted. Scratch buffers that a fused kernel
  frees before returning are not seen, so the number is what the step holds in
  tensors, not the process's resident memory.
The memory run is separate from the timed runs, because the mode slows every operator.
"""

from __future__ import annotations

import contextlib
import math
import resource
import statistics
import sys
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

Step = Callable[[], None]
MB = 2**20


@dataclass
class Measurement:
    status: str  # ok | oom | error
    ms: float | None = None
    peak_mb: float | None = None
    runs: int = 0  # timed runs behind ``ms``
    seconds: float = 0.0  # wall-clock time the whole measurement took
    error: str | None = None


class LiveTensorMemory(TorchDispatchMode):
    """Bytes of the tensor storages created under the mode that are still alive; keeps the peak."""

    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self._alive: dict[int, weakref.ref] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage()._cdata for t in tree_leaves((args, kwargs)) if _has_storage(t)}
        for tensor in tree_leaves(out):
            if _has_storage(tensor):
                self._track(tensor.untyped_storage(), inputs)
        return out

    def _track(self, storage: torch.UntypedStorage, inputs: set[int]) -> None:
        key = storage._cdata
        if key in inputs or key in self._alive:  # a view or an in-place result: already counted, or not ours
            return
        size = storage.nbytes()
        self.current += size
        self.peak = max(self.peak, self.current)

        def freed(_: Any, key: int = key, size: int = size) -> None:
            self.current -= size
            self._alive.pop(key, None)

        # PyTorch keeps a storage's Python object alive as long as the storage, so this fires on free.
        self._alive[key] = weakref.ref(storage, freed)


def _has_storage(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.layout == torch.strided and value.device.type != "meta"


def peak_memory_mb(step: Step, device: torch.device) -> float:
    """Peak memory of one run of ``step`` above what was allocated before it, in MB."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / MB
    with LiveTensorMemory() as tracker:
        step()
    return tracker.peak / MB


def is_out_of_memory(err: BaseException) -> bool:
    if isinstance(err, (MemoryError, torch.OutOfMemoryError)):
        return True
    message = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in message or "can't allocate memory" in message)


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def measure(
    step: Step, device: torch.device, *, warmup: int, repeats: int, max_seconds: float, clock: str = "wall"
) -> Measurement:
    """One memory run, ``warmup`` runs, then up to ``repeats`` timed runs within ``max_seconds`` (at least one)."""
    start = time.perf_counter()
    result = Measurement(status="ok")
    try:
        result.peak_mb = peak_memory_mb(step, device)
        for _ in range(warmup):
            if time.perf_counter() - start > max_seconds:
                break
            step()
        times = []
        while len(times) < max(repeats, 1):
            times.append(_timed(step, device, CLOCKS[clock]))
            if time.perf_counter() - start > max_seconds:
                break
        result.ms, result.runs = statistics.median(times), len(times)
    except Exception as err:  # noqa: BLE001  (a benchmark records a failure and moves on)
        result = Measurement(
            status="oom" if is_out_of_memory(err) else "error",
            error=f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
        )
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
    result.seconds = time.perf_counter() - start
    return result


def side_by_side(
    steps: dict[str, Step], device: torch.device, *, warmup: int, rounds: int, clock: str = "wall"
) -> dict[str, Measurement]:
    """Measure several steps in interleaved rounds, so a machine that speeds up or slows down
    meanwhile (other jobs, clock changes) moves all of them alike and their ratios stay put.

    The order rotates every round; each step's time is the median over the rounds.
    """
    results = {name: Measurement(status="ok") for name in steps}
    times: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for name in names:
        try:
            results[name].peak_mb = peak_memory_mb(steps[name], device)
            for _ in range(warmup):
                steps[name]()
        except Exception as err:  # noqa: BLE001
            results[name] = Measurement(
                status="oom" if is_out_of_memory(err) else "error", error=f"{type(err).__name__}: {err}"
            )
    live = [n for n in names if results[n].status == "ok"]
    for r in range(max(rounds, 1) if live else 0):
        shift = r % len(live)
        for name in live[shift:] + live[:shift]:
            times[name].append(_timed(steps[name], device, CLOCKS[clock]))
    for name in live:
        results[name].ms, results[name].runs = statistics.median(times[name]), len(times[name])
    return results


def _timed(step: Step, device: torch.device, clock: Callable[[], float]) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = clock()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (clock() - start) * 1000


@contextlib.contextmanager
def cpu_memory_limit(megabytes: float | None) -> Iterator[float | None]:
    """Within the block, allocations beyond ``megabytes`` more than now fail with an error
    (recorded as ``oom``) instead of waking the kernel's OOM killer; the old limit returns after.

    Linux only (RLIMIT_DATA covers anonymous mappings since 4.7); elsewhere it does
    nothing. ``None`` picks 80% of the memory the kernel reports available.
    Yields the budget applied, or None.
    """
    available = _field_kb("/proc/meminfo", "MemAvailable") if sys.platform.startswith("linux") else None
    if megabytes is None and available is not None:
        megabytes = 0.8 * available / 1024
    if megabytes is None or not sys.platform.startswith("linux"):
        yield None
        return
    before = resource.getrlimit(resource.RLIMIT_DATA)
    limit = int((_field_kb("/proc/self/status", "VmData") or 0) * 1024 + megabytes * MB)
    if before[1] != resource.RLIM_INFINITY:
        limit = min(limit, before[1])
    resource.setrlimit(resource.RLIMIT_DATA, (limit, before[1]))
    try:
        yield megabytes
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, before)


def _field_kb(path: str, key: str) -> int | None:
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def loglog_slope(lengths: list[float], times: list[float]) -> float:
    """Least-squares slope of log(time) against log(T)."""
    xs, ys = [math.log(t) for t in lengths], [math.log(v) for v in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
