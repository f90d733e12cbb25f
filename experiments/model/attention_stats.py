"""How a layer attends, measured over a test set: pure functions on attention weights.

For every real query i of one layer, with weights w_ij over the keys j it can see
(``allowed``: padding and causality, not the variant's own window), the read-out
distribution is p_ij = w_ij / sum_j w_ij, and:

- ``entropy``        H_i = -sum_j p_ij log p_ij (nats);
- ``entropy_ratio``  H_i / log(n_i), n_i the number of keys query i can see (queries with n_i >= 2;
                     1 = uniform over what it sees, 0 = one key);
- ``distance``       E_p |i - j|;  ``offset``  E_p (j - i) (negative = reads to its left);
- ``first``          p_i0, the share on the first key (an attention sink);
- ``self``           p_ii, the share on the key at its own index;
- ``cut``            1 - sum_j w_ij, the weight the variant removed (local predictive's Gaussian window;
                     0 wherever the weights are a softmax over the visible keys).

Where the task names the source positions a target position should read (``aligned``
(B, Tq, Tk) bool; copy: the same index, reverse: the mirrored one, sort: where the sorted
symbol sits), for the queries that have one:

- ``align_share``    sum over the aligned keys of p_ij;
- ``align_acc``      whether argmax_j p_ij is an aligned key (for ``hard`` attention: whether
                     the chosen key is the aligned one).

Alignment is measured per head and, for the layer, on the head-averaged weights (what the
layer reads as a whole; one head that aligns while others do other work still counts).

``layer_sums`` turns one batch into per-head sums and counts; ``add`` accumulates them over
batches; ``summarise`` divides. Everything is a sum until the end, so batches of any size
(and DDP ranks) combine exactly.
"""

from __future__ import annotations

import torch
from torch import Tensor

#: statistics averaged over every real query
QUERY_STATS = ("entropy", "distance", "offset", "first", "self", "cut")
#: averaged over queries that see at least two keys
RATIO_STATS = ("entropy_ratio",)
#: averaged over queries with an aligned key
ALIGN_STATS = ("align_share", "align_acc")
STATS = QUERY_STATS + RATIO_STATS + ALIGN_STATS


def entropy(p: Tensor) -> Tensor:
    """-sum p log p over the last axis, with 0 log 0 = 0: (..., K) -> (...)."""
    return -torch.special.xlogy(p, p).sum(-1)


def layer_sums(
    weights: Tensor, allowed: Tensor | None, queries: Tensor | None, aligned: Tensor | None = None
) -> dict[str, Tensor]:
    """Per-head sums of one batch.

    weights (B, H, Tq, Tk); allowed (B|1, 1, Tq|1, Tk) bool or None (every key visible);
    queries (B, Tq) bool, the real queries (None: all); aligned (B, Tq, Tk) bool or None.
    Returns {"n": (H,), "<stat>": (H,), "n_ratio": (H,), "n_align": (H,), "layer_align_*": ()}.
    """
    B, H, Tq, Tk = weights.shape
    w = weights.detach().float()
    visible = torch.ones(1, 1, Tq, Tk, dtype=torch.bool, device=w.device) if allowed is None else allowed
    visible = visible.expand(B, 1, Tq, Tk)[:, 0]  # (B, Tq, Tk)
    n_keys = visible.sum(-1)  # (B, Tq)
    real = torch.ones(B, Tq, dtype=torch.bool, device=w.device) if queries is None else queries.bool()
    mass = w.sum(-1)  # (B, H, Tq)
    real = real & (n_keys > 0)
    keep = real[:, None, :] & (mass > 0)  # (B, H, Tq): queries that read something
    p = w / mass.clamp(min=torch.finfo(w.dtype).tiny)[..., None]  # (B, H, Tq, Tk)

    i = torch.arange(Tq, device=w.device)[:, None]  # (Tq, 1)
    j = torch.arange(Tk, device=w.device)[None, :]  # (1, Tk)
    # |j - i|, j - i, [j == i] and [j == 0] as one (4, Tq, Tk) table: one contraction gives four means
    table = torch.stack(((j - i).abs(), j - i, (j == i).long(), (j == 0).long().expand(Tq, Tk))).to(w.dtype)
    ent = entropy(p)  # (B, H, Tq)
    # (6, B, H, Tq) in QUERY_STATS order: entropy, distance, offset, first, self, cut
    distance, offset, self_share, first = torch.einsum("bhqk,sqk->sbhq", p, table)
    values = torch.stack((ent, distance, offset, first, self_share, 1.0 - mass))
    kf = keep.to(w.dtype)
    totals = torch.einsum("sbhq,bhq->sh", values, kf)  # (6, H): one reduction for all six
    sums: dict[str, Tensor] = {"n": kf.sum((0, 2))}
    sums.update(zip(QUERY_STATS, totals.unbind(0)))
    ratio_ok = keep & (n_keys >= 2)[:, None, :]
    log_n = n_keys.clamp(min=2).to(w.dtype).log()[:, None, :]  # (B, 1, Tq)
    rf = ratio_ok.to(w.dtype)
    sums["n_ratio"] = rf.sum((0, 2))
    sums["entropy_ratio"] = (ent / log_n * rf).sum((0, 2))
    if aligned is not None:
        target = aligned.bool() & visible  # (B, Tq, Tk)
        has = keep & target.any(-1)[:, None, :]  # (B, H, Tq)
        af = has.to(w.dtype)
        share = (p * target[:, None].to(w.dtype)).sum(-1)  # (B, H, Tq)
        hit = target[:, None].expand(B, H, Tq, Tk).gather(-1, p.argmax(-1, keepdim=True))[..., 0]  # (B, H, Tq)
        sums["n_align"] = af.sum((0, 2))
        sums["align_share"] = (share * af).sum((0, 2))
        sums["align_acc"] = (hit.to(w.dtype) * af).sum((0, 2))
        # the layer as a whole: the head-averaged read-out
        mean_p = p.mean(1)  # (B, Tq, Tk)
        layer_has = has.any(1).to(w.dtype)  # (B, Tq)
        sums["layer_n_align"] = layer_has.sum()
        sums["layer_align_share"] = ((mean_p * target.to(w.dtype)).sum(-1) * layer_has).sum()
        sums["layer_align_acc"] = (
            target.gather(-1, mean_p.argmax(-1, keepdim=True))[..., 0].to(w.dtype) * layer_has
        ).sum()
    return sums


def add(total: dict[str, Tensor] | None, sums: dict[str, Tensor]) -> dict[str, Tensor]:
    """Sum two sets of sums key by key (a key missing on one side counts as zero)."""
    if total is None:
        return {k: v.clone() for k, v in sums.items()}
    for key, value in sums.items():
        total[key] = total[key] + value if key in total else value.clone()
    return total


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    return torch.where(den > 0, num / den.clamp(min=1), torch.full_like(num, float("nan")))


def per_head(sums: dict[str, Tensor]) -> dict[str, Tensor]:
    """Means per head: {"<stat>": (H,)}; NaN where no query qualified."""
    out = {name: _ratio(sums[name], sums["n"]) for name in QUERY_STATS}
    out["entropy_ratio"] = _ratio(sums["entropy_ratio"], sums["n_ratio"])
    if "n_align" in sums:
        for name in ALIGN_STATS:
            out[name] = _ratio(sums[name], sums["n_align"])
    return out


def summarise(sums: dict[str, Tensor]) -> dict[str, float]:
    """One layer at one length: the mean over heads of each statistic (every head weighs the same),
    alignment of the head-averaged weights, and the best head's alignment accuracy."""
    heads = per_head(sums)
    out = {name: _mean(value) for name, value in heads.items() if not name.startswith("align")}
    if "layer_n_align" in sums and float(sums["layer_n_align"]) > 0:
        n = float(sums["layer_n_align"])
        out["align_acc"] = float(sums["layer_align_acc"]) / n
        out["align_share"] = float(sums["layer_align_share"]) / n
        best = heads["align_acc"]
        out["align_acc_best_head"] = float(best[torch.isfinite(best)].max()) if torch.isfinite(best).any() else None
    out["queries"] = float(sums["n"][0]) if sums["n"].numel() else 0.0
    return out


def _mean(value: Tensor) -> float | None:
    finite = value[torch.isfinite(value)]
    return float(finite.mean()) if finite.numel() else None


def headline_layer(
    stats: dict[str, dict[str, dict[str, float]]], train_lengths: tuple[int, int] | list[int] | None
) -> str | None:
    """The layer a one-line summary quotes: the cross layer with the best mean alignment accuracy
    over the evaluation lengths inside the training range (all lengths when none is inside);
    without alignment, the last layer of the decoder (or the encoder)."""

    def inside(length: str) -> bool:
        return bool(train_lengths) and length.isdigit() and train_lengths[0] <= int(length) <= train_lengths[1]

    best, best_score = None, -1.0
    for layer, by_length in stats.items():
        values = [v["align_acc"] for v in by_length.values() if v.get("align_acc") is not None]
        kept = [v["align_acc"] for n, v in by_length.items() if v.get("align_acc") is not None and inside(n)]
        if values and (score := sum(kept or values) / len(kept or values)) > best_score:
            best, best_score = layer, score
    if best is None and stats:
        best = sorted(
            stats,
            key=lambda name: (
                name.startswith("decoder"),
                name.startswith("encoder"),
                int(name.rsplit("/", 1)[-1]) if name[-1].isdigit() else 0,
            ),
        )[-1]
    return best
