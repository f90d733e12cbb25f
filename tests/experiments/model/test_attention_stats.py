"""Attention statistics equal a direct computation, query by query, on crafted weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from experiments.model import attention_stats as A
from experiments.tasks import TASKS
from tests.helpers.cases import one_thread  # noqa: F401


def reference(weights: np.ndarray, visible: np.ndarray, aligned: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-head means by loops over queries: weights (B, H, Q, K), visible (B, Q, K), aligned (B, Q, K)."""
    B, H, Q, K = weights.shape
    out: dict[str, list] = {name: [[] for _ in range(H)] for name in A.STATS}
    for b in range(B):
        for h in range(H):
            for i in range(Q):
                keys = [j for j in range(K) if visible[b, i, j]]
                w = weights[b, h, i]
                if not keys or w.sum() == 0:
                    continue
                p = w / w.sum()
                ent = -sum(p[j] * math.log(p[j]) for j in range(K) if p[j] > 0)
                out["entropy"][h].append(ent)
                if len(keys) >= 2:
                    out["entropy_ratio"][h].append(ent / math.log(len(keys)))
                out["distance"][h].append(sum(p[j] * abs(j - i) for j in range(K)))
                out["offset"][h].append(sum(p[j] * (j - i) for j in range(K)))
                out["first"][h].append(p[0])
                out["self"][h].append(p[i] if i < K else 0.0)
                out["cut"][h].append(1 - w.sum())
                targets = [j for j in keys if aligned is not None and aligned[b, i, j]]  # only keys it can see
                if targets:
                    out["align_share"][h].append(sum(p[j] for j in targets))
                    out["align_acc"][h].append(float(int(np.argmax(p)) in targets))
    return {k: np.array([np.mean(v) if v else np.nan for v in per]) for k, per in out.items()}


def computed(weights: np.ndarray, visible: np.ndarray, aligned: np.ndarray | None = None) -> dict[str, np.ndarray]:
    sums = A.layer_sums(
        torch.tensor(weights), torch.tensor(visible)[:, None], None, None if aligned is None else torch.tensor(aligned)
    )
    return {k: v.numpy() for k, v in A.per_head(sums).items()}


def check(weights, visible, aligned=None, expected: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    ref = reference(weights, visible, aligned)
    got = computed(weights, visible, aligned)
    for name in ref:
        if name in got:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
    for name, value in (expected or {}).items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    return got


def diag(n: int) -> np.ndarray:
    return np.eye(n)[None, None]  # (1, 1, n, n)


def mirrored(n: int) -> np.ndarray:
    return np.eye(n)[::-1].copy()[None, None]


def alignment(task: str, n: int) -> np.ndarray:
    src = torch.arange(4, 4 + n)[None]  # n distinct symbols
    tgt = torch.cat((src if task == "copy" else src.flip(1), torch.tensor([[2]])), dim=1)  # + EOS
    return TASKS.build(task).alignment(src, tgt)[:, :n].numpy()  # (1, n, n), the EOS row dropped


N = 6
ALL = np.ones((1, N, N), dtype=bool)
CAUSAL = np.tril(np.ones((N, N), dtype=bool))[None]


def test_uniform_reads_every_key_evenly() -> None:
    weights = np.full((2, 3, N, N), 1 / N)
    d = np.mean([abs(j - i) for i in range(N) for j in range(N)])
    check(
        weights,
        np.repeat(ALL, 2, 0),
        expected={
            "entropy": math.log(N),
            "entropy_ratio": 1.0,
            "distance": d,
            "offset": 0.0,
            "first": 1 / N,
            "self": 1 / N,
            "cut": 0.0,
        },
    )


def test_causal_uniform_counts_only_the_keys_a_query_sees() -> None:
    weights = (CAUSAL / CAUSAL.sum(-1, keepdims=True))[:, None]  # (1, 1, N, N)
    got = check(
        weights,
        CAUSAL,
        expected={
            "entropy_ratio": 1.0,
            "entropy": np.mean([math.log(i + 1) for i in range(N)]),
            "distance": np.mean([i / 2 for i in range(N)]),
            "first": np.mean([1 / (i + 1) for i in range(N)]),
        },
    )
    assert got["offset"] == pytest.approx(-got["distance"][0])


def test_one_hot_diagonal_is_aligned_for_copy_and_not_for_reverse() -> None:
    check(
        diag(N),
        ALL,
        alignment("copy", N),
        expected={
            "entropy": 0.0,
            "entropy_ratio": 0.0,
            "distance": 0.0,
            "self": 1.0,
            "first": 1 / N,
            "align_acc": 1.0,
            "align_share": 1.0,
        },
    )
    check(diag(N), ALL, alignment("reverse", N), expected={"align_acc": 0.0, "align_share": 0.0})
    # odd length: the middle query is on the diagonal and the mirror alike
    check(
        diag(N + 1), np.ones((1, N + 1, N + 1), bool), alignment("reverse", N + 1), expected={"align_acc": 1 / (N + 1)}
    )


def test_one_hot_mirrored_is_aligned_for_reverse() -> None:
    check(
        mirrored(N),
        ALL,
        alignment("reverse", N),
        expected={
            "align_acc": 1.0,
            "align_share": 1.0,
            "entropy": 0.0,
            "self": 0.0,
            "distance": np.mean([abs(N - 1 - 2 * i) for i in range(N)]),
            "offset": 0.0,
        },
    )


def test_sink_on_the_first_key() -> None:
    weights = np.zeros((1, 2, N, N))
    weights[..., 0] = 1.0
    check(
        weights,
        ALL,
        expected={
            "first": 1.0,
            "entropy": 0.0,
            "distance": np.mean(range(N)),
            "offset": -np.mean(range(N)),
            "self": 1 / N,
        },
    )


def test_weights_that_do_not_sum_to_one_report_the_cut_and_are_read_normalised() -> None:
    rng = np.random.default_rng(0)
    weights = rng.random((2, 2, N, N)) * 0.9 / N  # a Gaussian-windowed read keeps under 1
    got = check(weights, np.repeat(ALL, 2, 0))
    assert np.all(got["cut"] > 0.0)
    check(
        weights / weights.sum(-1, keepdims=True), np.repeat(ALL, 2, 0), expected={"cut": 0.0, "entropy": got["entropy"]}
    )


def test_padding_and_unequal_rows_against_the_loop_reference() -> None:
    rng = np.random.default_rng(1)
    visible = np.ones((3, N, N), dtype=bool)
    visible[0, :, 4:] = False  # two padded keys in example 0
    visible[1] = CAUSAL[0]
    scores = rng.normal(size=(3, 4, N, N)) * 3
    scores = np.where(visible[:, None], scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    aligned = np.repeat(alignment("reverse", N), 3, 0)
    check(weights, visible, aligned)


def test_queries_mask_and_batch_sums_combine_exactly() -> None:
    rng = np.random.default_rng(2)
    weights = torch.tensor(rng.dirichlet(np.ones(N), size=(4, 2, N)))  # (4, 2, N, N)
    queries = torch.ones(4, N, dtype=torch.bool)
    queries[:, 3:] = False  # padded queries do not count
    whole = A.layer_sums(weights, None, queries)
    halves = A.add(A.layer_sums(weights[:2], None, queries[:2]), A.layer_sums(weights[2:], None, queries[2:]))
    for key in whole:
        torch.testing.assert_close(halves[key], whole[key])
    alone = A.per_head(A.layer_sums(weights[:, :, :3], None, None))
    for key, value in A.per_head(whole).items():
        if key != "self":  # a query's own index is the same in either form
            torch.testing.assert_close(value, alone[key])


def test_layer_alignment_reads_the_head_average() -> None:
    weights = np.concatenate([diag(N), np.full((1, 1, N, N), 1 / N)], axis=1)  # head 0 aligned, head 1 uniform
    aligned = torch.tensor(alignment("copy", N))
    sums = A.layer_sums(torch.tensor(weights), None, None, aligned)
    per = A.per_head(sums)
    # head 1 is uniform: its argmax is the first key, aligned only for query 0
    np.testing.assert_allclose(per["align_acc"].numpy(), [1.0, 1 / N])
    summary = A.summarise(sums)
    assert summary["align_acc"] == pytest.approx(1.0)  # (one-hot + uniform) / 2 peaks on the diagonal
    assert summary["align_share"] == pytest.approx(0.5 + 0.5 / N)
    assert summary["align_acc_best_head"] == pytest.approx(1.0)
    assert summary["entropy"] == pytest.approx(math.log(N) / 2)


def test_sort_aligns_every_position_holding_the_symbol() -> None:
    src = torch.tensor([[7, 5, 7, 4]])
    tgt = torch.tensor([[4, 5, 7, 7, 2]])
    got = TASKS.build("sort").alignment(src, tgt)[0].numpy()
    expected = np.array([[s == t for s in [7, 5, 7, 4]] for t in [4, 5, 7, 7]] + [[False] * 4])
    np.testing.assert_array_equal(got, expected)
