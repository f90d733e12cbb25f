"""FlexAttention (``torch.nn.attention.flex_attention``): biases as functions of indices, masks as blocks.

Every mask the flex path needs lets each query see one contiguous interval of keys, [lo, hi)
(all keys, the causal prefix, a sliding window, or a window inside the prefix), minus padded
keys. So a mask is two (B|1, Tq) integer tensors, never a (Tq, Tk) one, and its block-sparse
form (``BlockMask``) follows from them: a block of keys is skipped when it lies outside every
interval of a block of queries, and marked full (no ``mask_mod`` call) when it lies inside all of
them. Padding enters through ``mask_mod`` (padded masks keep no full blocks), not as a tensor of
scores.

Block masks are cached by what they depend on (shape, offsets, window, causal), so the layers of a
model and the steps of a run share one. Eager ``flex_attention`` materialises the scores; the
compiled one does not, so CUDA runs compiled (and CPU can, see ``SETTINGS``). Flex has no
backward on CPU: there it serves inference only.
"""

from __future__ import annotations

import copy
import functools
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Hashable, cast

import torch
from torch import Tensor

from variants.checks import VariantConfigError
from variants.flex_options import (
    Options,
    failure,
    first_that_builds,
    out_of_resources,
    remember,
    smaller_than,
    store_key,
)

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import FlexKernelOptions

#: score_mod(score, b, h, q_idx, kv_idx) -> score, all 0-d tensors
ScoreMod = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]

#: query and key rows of one block; flex's default sparse block size
BLOCK = 128

#: Inductor's CUDA flex kernel refuses a narrower head: ``tl.dot`` needs 16 columns
#: (torch/_inductor/kernel/flex/flex_attention.py, "embedding dimension ... must be at least 16")
MIN_CUDA_HEAD_DIM = 16


@dataclass
class FlexSettings:
    #: run the compiled kernel on CPU as well (minutes of compilation per shape on a small machine;
    #: eager flex on CPU materialises the (Tq, Tk) scores, compiled does not)
    compile_on_cpu: bool = False


SETTINGS = FlexSettings()


def head_dim_problem(head_dim: int, *, cuda: bool) -> str | None:
    """Why flex cannot run heads of ``head_dim`` on the device (CUDA or CPU), or None when it can."""
    if cuda and head_dim < MIN_CUDA_HEAD_DIM:
        return f"head dim {head_dim} < {MIN_CUDA_HEAD_DIM}, the narrowest flex's CUDA kernel builds"
    return None


# -- masks ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyIntervals:
    """Query i of batch element b may see keys lo[b, i] <= j < hi[b, i] (key indices, not positions)."""

    lo: Tensor  # (B|1, Tq) long
    hi: Tensor  # (B|1, Tq) long
    num_keys: int
    #: the same intervals as a formula of the indices, where they have one (``band_rule``): the kernel's
    #: partial blocks then evaluate it in registers instead of gathering lo and hi from memory per row
    rule: Callable[[Tensor, Tensor, Tensor, Tensor], Tensor] | None = None

    @property
    def mask_mod(self) -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]:
        """mask_mod(b, h, q_idx, kv_idx): a plain function, as flex tells a mask_mod by its arity."""
        if self.rule is not None:
            return self.rule
        lo, hi, per_row = self.lo, self.hi, self.lo.shape[0] > 1

        def in_interval(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            row = b if per_row else 0
            return (kv_idx >= lo[row, q_idx]) & (kv_idx < hi[row, q_idx])

        return in_interval


def band_rule(
    queries: int, keys: int, *, causal: bool, shift: int = 0, window: int | None = None, device: torch.device
) -> Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]:
    """mask_mod of the intervals a layer with consecutive positions gives its first ``queries`` queries over
    its first ``keys`` keys: every key, or with ``causal`` key j <= i + ``shift`` (query i sits at key index
    i + shift: self attention's keys end at its last query, shift = keys - queries), and with ``window`` also
    i + shift - j <= window. Padded queries (i >= queries) see nothing, padded keys (j >= keys) are never seen.

    The lengths are captured as 0-d tensors, each one load per kernel, not a gather per row: as Python ints
    they would be constants Dynamo guards on, and every length inside one bucket would compile again."""
    queries_t, keys_t, shift_t = (torch.tensor(n, device=device) for n in (queries, keys, shift))

    def in_band(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        seen = (q_idx < queries_t) & (kv_idx < keys_t)
        if causal:
            seen = seen & (kv_idx <= q_idx + shift_t)
        if window is not None:
            seen = seen & (q_idx + shift_t - kv_idx <= window)
        return seen

    return in_band


def prefix_intervals(q_pos: Tensor, k_pos: Tensor, *, causal: bool, batch: int = 1) -> KeyIntervals:
    """Every key, or with ``causal`` the keys at positions <= the query's."""
    Tq, Tk = q_pos.numel(), k_pos.numel()
    lo = torch.zeros(1, Tq, dtype=torch.long, device=q_pos.device)
    hi = (q_pos - k_pos[0] + 1).clamp(0, Tk)[None] if causal else torch.full_like(lo, Tk)
    return KeyIntervals(lo.expand(batch, Tq), hi.expand(batch, Tq), Tk)


def bucket_length(length: int) -> int:
    """The length a flex call is padded to: a power of two of blocks (BLOCK, 2 BLOCK, 4 BLOCK, ...).

    The compiled kernel is specialised to every tensor's shape, so each new length would compile
    again and, past Dynamo's recompile limit, run eager (the full T x T scores). Padded to these
    buckets, lengths up to 128 share one shape and up to 16384 eight; padded queries see no key and
    padded keys lie outside every query's interval, so no block of padding is computed."""
    blocks = max(-(-length // BLOCK), 1)
    return BLOCK * (1 << (blocks - 1).bit_length())


def pad_rows(x: Tensor, length: int) -> Tensor:
    """x (B, H, T, D) with zero rows appended up to ``length`` (a bucket length); ``x`` itself, not a copy,
    when it is that long already."""
    return x if x.shape[2] == length else torch.nn.functional.pad(x, (0, 0, 0, length - x.shape[2]))


def within(intervals: KeyIntervals, queries: int, keys: int) -> KeyIntervals:
    """``intervals`` of padded positions cut to the first ``queries`` queries and ``keys`` keys: padded
    keys are outside every interval and padded queries see nothing."""
    real = torch.arange(intervals.lo.shape[1], device=intervals.lo.device) < queries  # (Tq_padded,)
    hi = torch.where(real, intervals.hi.clamp(max=keys), intervals.lo)
    return KeyIntervals(intervals.lo, torch.maximum(hi, intervals.lo), intervals.num_keys, intervals.rule)


def padded_to(intervals: KeyIntervals, queries: int, keys: int) -> KeyIntervals:
    """``intervals`` extended to ``queries`` queries and ``keys`` keys: the added queries see no key and
    the added keys lie past every interval, so the padded call computes what the unpadded one does."""
    lo, hi = intervals.lo, intervals.hi
    extra = queries - lo.shape[1]
    lo, hi = (torch.nn.functional.pad(x, (0, extra)) for x in (lo, hi))  # (B|1, queries): empty rows [0, 0)
    return KeyIntervals(lo, hi, keys, intervals.rule)


def window_intervals(centre: Tensor, k_pos: Tensor, window: int, *, causal_q_pos: Tensor | None) -> KeyIntervals:
    """Keys at positions |j - c_i| <= ``window`` around integer centres ``centre`` (B, Tq), inside the
    causal prefix of ``causal_q_pos`` (Tq,) when given."""
    first, Tk = k_pos[0], k_pos.numel()
    c = centre.round().long() - first  # (B, Tq) centre as a key index
    lo = (c - window).clamp(0, Tk)
    hi = (c + window + 1).clamp(0, Tk)
    if causal_q_pos is not None:
        hi = torch.minimum(hi, (causal_q_pos - first + 1).clamp(0, Tk)[None])
    return KeyIntervals(lo, torch.maximum(hi, lo), Tk)


def block_mask_from_intervals(intervals: KeyIntervals, *, full_blocks: bool = True):
    """The BlockMask of ``intervals``: O(Tq + blocks) work, nothing of size Tq x Tk."""
    from torch.nn.attention.flex_attention import BlockMask

    lo, hi, Tk = intervals.lo, intervals.hi, intervals.num_keys
    B, Tq = lo.shape
    nq, nk = -(-Tq // BLOCK), -(-Tk // BLOCK)
    pad = nq * BLOCK - Tq
    # Rows past Tq repeat the last query, so they widen no block's range.
    lo_rows = torch.cat((lo, lo[:, -1:].expand(B, pad)), 1).view(B, nq, BLOCK)
    hi_rows = torch.cat((hi, hi[:, -1:].expand(B, pad)), 1).view(B, nq, BLOCK)
    empty = hi_rows <= lo_rows  # a query that sees no key widens nothing
    big = torch.iinfo(torch.long).max
    any_lo = lo_rows.masked_fill(empty, big).amin(-1)  # (B, nq): the union of the block's intervals
    any_hi = hi_rows.masked_fill(empty, 0).amax(-1)
    all_lo = lo_rows.amax(-1)  # the intersection (empty when any query sees nothing)
    all_hi = torch.where(empty.any(-1), 0, hi_rows.amin(-1))
    start = torch.arange(nk, device=lo.device) * BLOCK  # (nk,) first key of each block
    end = (start + BLOCK).clamp(max=Tk)
    touched = (start < any_hi[..., None]) & (end > any_lo[..., None])  # (B, nq, nk)
    full = (start >= all_lo[..., None]) & (end <= all_hi[..., None]) if full_blocks else torch.zeros_like(touched)
    partial = touched & ~full

    def ordered(dense: Tensor) -> tuple[Tensor, Tensor]:
        # (B, nq, nk) bool -> block counts (B, 1, nq) and indices (B, 1, nq, nk), allowed ones first
        counts = dense.sum(-1, dtype=torch.int32)
        order = torch.argsort((~dense).to(torch.int8), dim=-1, stable=True).to(torch.int32)
        return counts[:, None], order[:, None]

    kv_num, kv_idx = ordered(partial)
    full_num, full_idx = ordered(full) if full_blocks else (None, None)
    return BlockMask.from_kv_blocks(
        kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=BLOCK, mask_mod=intervals.mask_mod, seq_lengths=(Tq, Tk)
    )


def with_padding(block_mask, key_padding_mask: Tensor):
    """``block_mask`` (built without full blocks) that also hides padded keys: (B, Tk) True at padding."""
    base = block_mask.mask_mod
    keep = ~key_padding_mask

    def mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return base(b, h, q_idx, kv_idx) & keep[b, kv_idx]

    padded = copy.copy(block_mask)
    padded.mask_mod = mask_mod
    return padded


class BlockMaskCache:
    """Block masks by key, least recently used dropped past ``size`` (decoding makes one per step)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self.entries: OrderedDict[Hashable, object] = OrderedDict()
        self.builds = 0

    def get(self, key: Hashable, build: Callable[[], KeyIntervals], *, full_blocks: bool):
        # A mask built under inference mode (Lightning validates there) holds inference tensors, which a
        # training call cannot save for backward: each mode keeps its own masks.
        key = (key, full_blocks, torch.is_inference_mode_enabled())
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        self.builds += 1
        mask = block_mask_from_intervals(build(), full_blocks=full_blocks)
        self.entries[key] = mask
        if len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return mask

    def clear(self) -> None:
        self.entries.clear()


BLOCK_MASKS = BlockMaskCache()


@torch.compiler.disable  # built eagerly and cached; a compiled model takes the mask as an input
def cached_block_mask(key: Hashable, build: Callable[[], KeyIntervals], key_padding_mask: Tensor | None):
    """The cached mask of ``key`` (built by ``build`` on a miss), with padding applied through mask_mod."""
    if key_padding_mask is None:
        return BLOCK_MASKS.get(key, build, full_blocks=True)
    return with_padding(BLOCK_MASKS.get(key, build, full_blocks=False), key_padding_mask)


# -- the kernel ----------------------------------------------------------------------------------------
#: Dynamo guards the global grad mode: training (grad on) and validation / generation (grad off) are
#: separate compiles of every call signature
GRAD_MODES = 2
#: (mask_mod, score_mod) pairs one model calls flex with: self, causal self and cross attention, each
#: with or without a key padding mask_mod, plus local's causal and centred windows with and without
#: padding (one position encoding per model, so one score_mod form)
CALL_KINDS = 10
#: (query, key) length-bucket pairs one run meets (``bucket_length``: every length up to 128 is one
#: bucket, up to 1024 four); self attention's pairs are equal, cross attention's follow source lengths
BUCKET_PAIRS = 8
#: Dynamo's recompile limit for the one flex code object, from the bound above: every compiled
#: ``flex_attention`` shares one code object and so one limit, which the default (8) makes the thing
#: that decides within a plain Lightning fit. Past this bound a call raises instead of running eager.
RECOMPILE_BUDGET = GRAD_MODES * CALL_KINDS * BUCKET_PAIRS

_COMPILED: dict[str, Callable] = {}
#: (device, dtype, head_dim, backward) -> the first kernel options that built there
_OPTIONS: dict[tuple, Options | None] = {}


def _compiled_flex() -> Callable:
    if "flex" not in _COMPILED:
        from torch.nn.attention.flex_attention import flex_attention

        _COMPILED["flex"] = torch.compile(flex_attention, dynamic=False)
    return _COMPILED["flex"]


def _probe(options: FlexKernelOptions, device: torch.device, dtype: torch.dtype, head_dim: int, backward: bool) -> None:
    """Build and run the compiled kernel once on a small causal problem with these options."""
    T = 2 * BLOCK
    q, k, v = (torch.randn(1, 1, T, head_dim, device=device, dtype=dtype, requires_grad=backward) for _ in range(3))
    mask = block_mask_from_intervals(
        prefix_intervals(torch.arange(T, device=device), torch.arange(T, device=device), causal=True)
    )
    # Under flex's own limit, like every compiled call: past Dynamo's default a probe would run eager
    # and "build" with options the compiled kernel cannot use.
    with _flex_limits():
        out = _compiled_flex()(q, k, v, block_mask=mask, kernel_options=options or None)
    if backward:
        out.sum().backward()


def _options_key(device: torch.device, dtype: torch.dtype, head_dim: int, backward: bool) -> tuple:
    """``_OPTIONS``'s key: one pass's options in this process."""
    return (str(device), dtype, head_dim, backward)


def kernel_options(
    device: torch.device, dtype: torch.dtype, head_dim: int, backward: bool, probe: Callable[..., None] = _probe
) -> FlexKernelOptions | None:
    """The options a call of this pass builds with on ``device`` (``variants.flex_options``: per pass, the
    backward's added to the forward's, remembered in this process and on disk); None (flex's defaults) off
    CUDA. Raises naming every failure when none builds."""
    if device.type != "cuda":
        return None
    key = _options_key(device, dtype, head_dim, backward)
    if key not in _OPTIONS:
        forward = kernel_options(device, dtype, head_dim, False, probe=probe) if backward else None
        _OPTIONS[key] = first_that_builds(device, dtype, head_dim, backward, probe, cast("Options | None", forward))
    # the prefixed names torch's kernels read, which its TypedDict does not declare (variants.flex_options.Options)
    return cast("FlexKernelOptions | None", _OPTIONS[key])


def shared_memory(device: torch.device) -> int | None:
    """The shared memory one block may opt in to on ``device`` (bytes), what flex's kernels must fit in."""
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "shared_memory_per_block_optin", 0) or props.shared_memory_per_block)


def choose_kernel_options(
    device: torch.device, dtype: torch.dtype, head_dims: set[int], probe: Callable[..., None] = _probe
) -> dict[str, object]:
    """Choose the kernel options of every head width a model runs on flex, forward and backward, when the
    model is built on ``device``, before anything traces it: a compiled model (``model.compile=true``)
    takes its options from here, as it never makes the eager call that would probe them. Returns what
    to record: the device's shared memory per block and the options of each (head dim, backward)."""
    chosen: dict[str, object] = {"shared_memory_per_block_optin": shared_memory(device)}
    for head_dim in sorted(head_dims):
        for backward in (True, False):
            options = kernel_options(device, dtype, head_dim, backward, probe=probe)
            chosen[f"{dtype} head dim {head_dim} {'backward' if backward else 'forward'}"] = options or "defaults"
    return chosen


def flex_attend(
    q: Tensor, k: Tensor, v: Tensor, *, block_mask, score_mod: ScoreMod | None, scale: float, enable_gqa: bool = False
) -> Tensor:
    """q (B, H, Tq, D), k/v (B, H|H_kv, Tk, D) -> (B, H, Tq, D): softmax(score_mod(scale q.k)) v over
    the blocks and ``mask_mod`` of ``block_mask``. A query that sees no key gets zeros."""
    from torch.nn.attention.flex_attention import flex_attention

    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if q.device.type == "cpu" and needs_grad:
        raise VariantConfigError(
            f"backend='flex' has no backward on CPU (torch {torch.__version__}); train on CPU with "
            "backend='auto', 'sdpa' or 'banded', or run under torch.no_grad()"
        )
    if torch.compiler.is_compiling():
        # Inside a compiled model the outer compile builds the kernel: no probe runs while tracing, so
        # the options are those chosen when the model was built on the device (choose_kernel_options).
        chosen = _OPTIONS.get(_options_key(q.device, q.dtype, q.shape[-1], needs_grad))
        return flex_attention(
            q,
            k,
            v,
            score_mod=score_mod,
            block_mask=block_mask,
            scale=scale,
            enable_gqa=enable_gqa,
            kernel_options=cast("FlexKernelOptions | None", chosen),
        )
    compiled = q.device.type != "cpu" or SETTINGS.compile_on_cpu
    if not compiled:
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=enable_gqa)
    options = kernel_options(q.device, q.dtype, q.shape[-1], needs_grad)

    run = functools.partial(
        _run_compiled, q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=enable_gqa
    )

    try:
        return run(options)
    except torch._dynamo.exc.FailOnRecompileLimitHit as error:
        # Past Dynamo's recompile limit the call would run eager, materialising the T x T scores: an
        # error instead, naming the cause (bucketed lengths keep the number of compiles small).
        raise RuntimeError(
            f"flex_attention compiled {RECOMPILE_BUDGET} times (variants.flex.RECOMPILE_BUDGET = GRAD_MODES "
            f"{GRAD_MODES} x CALL_KINDS {CALL_KINDS} x BUCKET_PAIRS {BUCKET_PAIRS}, Dynamo's recompile_limit for "
            f"flex) and would now run eager, building the full scores; this call: q {tuple(q.shape)}, k "
            f"{tuple(k.shape)}, {q.dtype}, grad={needs_grad}, score_mod={getattr(score_mod, '__name__', None)}. "
            "Pad lengths with variants.flex.bucket_length, or raise the bound if a model calls flex in more ways"
        ) from error
    except Exception as error:  # noqa: BLE001 - Inductor wraps a kernel that overflows the device
        if not out_of_resources(error):
            raise
        return _on_smaller_tiles(run, q, needs_grad, cast("Options | None", options), error)


def _run_compiled(q: Tensor, k: Tensor, v: Tensor, kernel_options: FlexKernelOptions | None, **call) -> Tensor:
    """The compiled flex call with ``kernel_options``, under flex's Dynamo limits (``_flex_limits``)."""
    with _flex_limits():
        return _compiled_flex()(q, k, v, kernel_options=kernel_options, **call)


def _on_smaller_tiles(
    run: Callable[..., Tensor], q: Tensor, backward: bool, failed: Options | None, error: Exception
) -> Tensor:
    """``run`` (a flex call whose kernel overflowed the device with ``failed``) on the next smaller
    candidates (``variants.flex_options.smaller_than``); the first that builds becomes the pass's options,
    in this process and on disk, so later calls and cells build it at once. Raises naming every failure."""
    failures = [failure(failed, error)]
    for candidate in smaller_than(failed, backward):
        try:
            out = run(candidate)
        except Exception as again:  # noqa: BLE001 - the same overflow, on the way down
            if not out_of_resources(again):
                raise
            failures.append(failure(candidate, again))
            continue
        _OPTIONS[_options_key(q.device, q.dtype, q.shape[-1], backward)] = candidate
        remember(store_key(q.device, q.dtype, q.shape[-1], backward), candidate)
        return out
    raise RuntimeError(
        f"no FlexAttention kernel builds for this call on {q.device} ({q.dtype}, head dim {q.shape[-1]}, "
        f"{'backward' if backward else 'forward'}): " + "; ".join(failures)
    ) from error


def _flex_limits():
    """Dynamo's limits for flex's one code object, read by Dynamo at call time: RECOMPILE_BUDGET, and a
    hit limit an error instead of an eager call."""
    accumulated = max(RECOMPILE_BUDGET, torch._dynamo.config.accumulated_recompile_limit)
    return torch._dynamo.config.patch(
        **{_FAIL_ON_LIMIT: True}, recompile_limit=RECOMPILE_BUDGET, accumulated_recompile_limit=accumulated
    )


#: the Dynamo setting that turns a hit recompile limit into an error (renamed across torch versions)
_FAIL_ON_LIMIT = next(
    (n for n in ("fail_on_recompile_limit_hit", "fail_on_cache_limit_hit") if hasattr(torch._dynamo.config, n)),
    "fail_on_recompile_limit_hit",
)
