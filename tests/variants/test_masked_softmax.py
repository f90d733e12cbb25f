"""``masked_softmax``, the math path's softmax, against torch's own softmax on every row length.

On CPU, rows shorter than a vector register are written out (exp / sum) and longer ones go to
torch's kernel; both must equal ``torch.softmax`` over the allowed keys, forward and backward,
and a query with no allowed key gets zero weights and a zero, finite gradient.
"""

from __future__ import annotations

import pytest
import torch

from variants.masking import masked_softmax


def reference(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Each row's softmax over its allowed keys, zeros elsewhere, computed row by row (float64)."""
    out = torch.zeros_like(scores, dtype=torch.float64)
    keys = scores.shape[-1]
    flat_s, flat_a = scores.double().reshape(-1, keys), allowed.expand_as(scores).reshape(-1, keys)
    flat_o = out.view(-1, keys)
    for i in range(flat_s.shape[0]):
        keep = flat_a[i]
        if keep.any():
            flat_o[i, keep] = torch.softmax(flat_s[i, keep], 0)
    return out


@pytest.mark.parametrize("length", [1, 2, 7, 8, 13, 15, 16, 17, 31, 40])
def test_equals_torch_softmax_forward_and_backward(length: int) -> None:
    g = torch.Generator().manual_seed(length)
    scores = (3 * torch.randn(2, 3, 5, length, generator=g)).requires_grad_()
    allowed = torch.rand(2, 1, 5, length, generator=g) < 0.7
    allowed[0, 0, 0] = False  # a query with no allowed key
    allowed[1, 0, 1] = True
    upstream = torch.randn(2, 3, 5, length, generator=g)

    weights = masked_softmax(scores, allowed)
    (grad,) = torch.autograd.grad(weights, scores, upstream)

    expected_scores = scores.detach().double().requires_grad_()
    expected = reference(expected_scores, allowed)
    (expected_grad,) = torch.autograd.grad(expected, expected_scores, upstream.double())
    torch.testing.assert_close(weights.double(), expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(grad.double(), expected_grad, atol=1e-6, rtol=1e-5)
    assert torch.isfinite(grad).all()
    assert weights[0, :, 0].abs().sum() == 0 and grad[0, :, 0].abs().sum() == 0


@pytest.mark.parametrize("length", [3, 13, 24])
def test_no_mask_is_plain_softmax(length: int) -> None:
    scores = torch.randn(4, 2, length, length) * 10
    torch.testing.assert_close(masked_softmax(scores, None), torch.softmax(scores.double(), -1).float())
