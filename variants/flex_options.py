"""The kernel options a compiled flex call builds with on a device, chosen per pass and remembered on disk.

Flex's defaults overflow shared memory in places: on Hopper (232,448 bytes per block) the bf16 head dim 64
backward's default configuration, ``FlexBwDConfig(64, 128, 128, 64, 3 stages, 8 warps)``, needs 245,760
bytes (one H200, torch 2.11: ../shared/gpu/README.md). Only the backward overflows there, so the options
are chosen per pass with flex's ``fwd_`` / ``bwd_`` prefixes (torch's ``FlexKernelOptions``: an unprefixed
key applies to both passes, a prefixed one to its pass alone): a training call keeps the forward's
default tiles and changes only what its backward needs.

A probe compiles and runs the kernel once; a candidate that does not build costs a whole compile that
fails. So the backward's candidates start with the one that fits Hopper (two stages), and the first
candidate that builds is remembered per (device name, torch version, head dim, dtype, pass) in
``OPTIONS_FILE`` under Inductor's cache folder: the cells of a sweep that share that folder
(``experiments.sweep.gpu_share``) probe once between them, not once each.

A probe's small causal problem can build where a real call's kernel does not (a score_mod or a fused
prologue changes the kernel Inductor writes; on one H200 the ALiBi layer's bf16 training call at T 4096
overflowed with the options its probe chose): such a call runs again on the next smaller candidates
(``smaller_than``), and the first that builds replaces the pass's choice, here and on disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Callable

import torch

#: flex's ``kernel_options`` with pass prefixes: torch's ``FlexKernelOptions`` TypedDict documents the ``fwd_`` and
#: ``bwd_`` prefixes its kernels read but declares only the bare names, so the prefixed ones are a plain dict here
Options = dict[str, int]

#: the forward's candidates, in order: flex's defaults, then smaller tiles and fewer stages
FORWARD_CANDIDATES: tuple[Options, ...] = (
    {},
    {"fwd_BLOCK_M": 64, "fwd_BLOCK_N": 64, "fwd_num_stages": 2},
    {"fwd_BLOCK_M": 32, "fwd_BLOCK_N": 32, "fwd_num_stages": 1},
)
#: the backward's candidates, added to the forward's choice: the default tiles in two stages first (what
#: built on Hopper, where three overflow: a failed probe costs a compile, two stages at most some
#: pipelining), then smaller tiles. The backward's tiles divide flex's 128-row sparse blocks, and each
#: pass's N block divides its M block as flex's backward asks.
BACKWARD_CANDIDATES: tuple[Options, ...] = (
    {"bwd_num_stages": 2},
    {"bwd_BLOCK_M1": 32, "bwd_BLOCK_N1": 64, "bwd_BLOCK_M2": 64, "bwd_BLOCK_N2": 32, "bwd_num_stages": 2},
    {"bwd_BLOCK_M1": 16, "bwd_BLOCK_N1": 32, "bwd_BLOCK_M2": 32, "bwd_BLOCK_N2": 16, "bwd_num_stages": 1},
)
#: the file, under Inductor's cache folder, that keeps every probe's choice
OPTIONS_FILE = "attnlab-flex-options.json"

#: probe(options, device, dtype, head_dim, backward): compile and run the kernel once, raise if it does not build
Probe = Callable[..., None]


def options_file() -> Path:
    """``OPTIONS_FILE`` in Inductor's cache folder (``TORCHINDUCTOR_CACHE_DIR``, or torch's default)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir()) / OPTIONS_FILE


def store_key(device: torch.device, dtype: torch.dtype, head_dim: int, backward: bool) -> str:
    """What a probe's result depends on: the GPU model, torch (its kernels and default tiles), the head, the pass."""
    try:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    except (AssertionError, RuntimeError):  # a torch without CUDA asked about a CUDA device: its index names it
        name = str(device)
    direction = "backward" if backward else "forward"
    return f"{name} | torch {torch.__version__} | head dim {head_dim} | {dtype} | {direction}"


@contextlib.contextmanager
def _locked(path: Path):
    """The options file's lock for a read-modify-write: cells starting together write one after another."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read(path: Path) -> dict[str, object]:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet, or a file another version wrote: probed again
        return {}
    return found if isinstance(found, dict) else {}


def remembered(key: str) -> tuple[bool, Options | None]:
    """(whether a probe's choice for ``key`` is on disk, the choice: None for flex's defaults)."""
    found = _read(options_file())
    options = found.get(key)
    return key in found, dict(options) if isinstance(options, dict) else None


def remember(key: str, options: Options | None) -> None:
    path = options_file()
    with _locked(path):
        found = _read(path)
        found[key] = options
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(found, indent=1, sort_keys=True))
        os.replace(tmp, path)


def failure(options: Options | None, error: BaseException) -> str:
    """One line for a list of failed builds: the options tried and the error's first line."""
    reason = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
    return f"{options or 'defaults'}: {reason}"


def first_that_builds(
    device: torch.device,
    dtype: torch.dtype,
    head_dim: int,
    backward: bool,
    probe: Probe,
    forward: Options | None = None,
) -> Options | None:
    """The options of the pass (``forward``'s choice plus a backward candidate, for a backward), remembered on
    disk or else probed in order; None for flex's defaults. Raises naming every failure when none builds."""
    key = store_key(device, dtype, head_dim, backward)
    known, options = remembered(key)
    if known:
        return options
    candidates = [{**(forward or {}), **b} for b in BACKWARD_CANDIDATES] if backward else list(FORWARD_CANDIDATES)
    failures = []
    for candidate in candidates:
        try:
            probe(candidate, device, dtype, head_dim, backward)
        except Exception as error:  # noqa: BLE001 - inductor raises when a build overflows shared memory
            failures.append(failure(candidate, error))
            continue
        chosen: Options | None = candidate or None
        remember(key, chosen)
        return chosen
    raise RuntimeError(
        f"no FlexAttention kernel builds on {device} for {dtype}, head dim {head_dim}, "
        f"{'backward' if backward else 'forward'}: " + "; ".join(failures)
    )


def out_of_resources(error: BaseException) -> bool:
    """Whether a kernel build failed for want of the device's resources (Triton's "out of resource": shared
    memory, registers), which smaller tiles or fewer stages can cure; any other failure is not retried."""
    return "out of resource" in str(error)


def _grid(backward: bool) -> list[tuple[int, int, Options]]:
    """(forward rank, backward rank, options) of every candidate of the pass; rank 0 is the largest."""
    if not backward:
        return [(i, 0, dict(f)) for i, f in enumerate(FORWARD_CANDIDATES)]
    return [(i, j, {**f, **b}) for i, f in enumerate(FORWARD_CANDIDATES) for j, b in enumerate(BACKWARD_CANDIDATES)]


def smaller_than(options: Options | None, backward: bool) -> list[Options]:
    """The pass's candidates no larger than ``options`` in either pass and smaller in one, the least shrunk
    first (and, at equal shrinking, the forward's tiles first): the order to try after ``options`` overflowed.
    Options that are no candidate (set by hand) are followed by every candidate."""
    grid = _grid(backward)
    at = next(((i, j) for i, j, c in grid if c == (options or {})), None)
    if at is None:
        return [c for _, _, c in grid if c != (options or {})]
    later = [(i + j, -i, c) for i, j, c in grid if i >= at[0] and j >= at[1] and (i, j) != at]
    return [c for _, _, c in sorted(later, key=lambda item: item[:2])]
