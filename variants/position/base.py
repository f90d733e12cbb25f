"""The position-encoding interface: three hooks, each a no-op by default.

An attention layer calls every hook of whatever encoding it is given; it never
asks which encoding that is. Positions are absolute integer indices, so the same
hooks serve full sequences, chunks of a sequence (banded kernels) and one step
of incremental decoding (``q_pos = [t]``, ``k_pos = [0..t]``).
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Iterator

from torch import Tensor, nn

from variants.checks import heads_divide
from variants.flex import ScoreMod


class PositionEncoding(nn.Module):
    #: True when ``value_term`` contributes; fused kernels that never expose the
    #: weights then fall back to the reference path.
    needs_weights_for_values: bool = False
    #: True when ``score_bias`` returns a term; lets kernels skip building a mask.
    has_score_bias: bool = False
    #: True when ``score_mod`` offers the score bias as a function of (head, query index, key index),
    #: so a FlexAttention kernel adds it without a (Tq, Tk) tensor; ``score_bias`` stays the reference
    has_score_mod: bool = False
    #: False when flex's backward cannot compile ``score_mod`` while its captured tensors need
    #: gradients (a training call then runs the dense bias); True for an encoding whose score_mod
    #: indexes each captured tensor with a gradient once, the form Inductor's backward takes
    flex_trains: bool = True
    #: discrete constructor choices, for sweeps and tests (see ``Registry.variations``)
    options: dict[str, tuple] = {}
    #: True when ``embed`` adds a term to the token embeddings (an absolute encoding)
    adds_to_embeddings: bool = False
    #: True when the attention logits the hooks produce depend on positions only through j - i
    #: (the contract tests shift every position and expect the same layer output); False for an
    #: encoding that also reads an absolute position or the sequence length (FIRE's normaliser).
    translation_invariant: bool = True

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        heads_divide(d_model, num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        #: the length of the whole sequence, when a caller declares it (see ``sequence_length``)
        self.declared_length: int | None = None

    @contextmanager
    def sequence_length(self, length: int) -> Iterator[None]:
        """Declare the length of the sequence every call inside the block belongs to.

        An encoding whose terms depend on the length (rope ``scaling``), or that checks it (a
        learned table, xPos's range), otherwise takes it from each call: its last position + 1,
        read from the device (on a GPU a stall per call). Incremental decoding calls the hooks with one new
        position at a time and keeps keys as they were rotated then, so a generation loop
        declares its final length (prompt + new tokens) once, and every step, cached or
        recomputed, sees the same length. Encodings that ignore the length ignore this.
        """
        before, self.declared_length = self.declared_length, int(length)
        try:
            yield
        finally:
            self.declared_length = before

    def known_length(self, length: int):
        """``sequence_length(length)`` unless a caller has declared a length already (a generation loop
        declares its final one): the owner of the positions declares what it knows from shapes, so no
        hook reads a position back from the device (on a GPU each read waits for every queued kernel)."""
        return nullcontext() if self.declared_length is not None else self.sequence_length(length)

    def length_of(self, *positions: Tensor) -> int:
        """The declared sequence length, or the last of ``positions`` + 1 (a read from the device)."""
        if self.declared_length is not None:
            return self.declared_length
        return max((int(p.max()) + 1 for p in positions if p.numel()), default=0)

    def embed(self, x: Tensor, positions: Tensor, scale: float | None = None) -> Tensor:
        """Absolute encodings: ``x`` (B, T, d_model), ``positions`` (T,) -> (B, T, d_model).

        ``scale`` is the RMS of one element of the token term ``x`` at initialisation
        (the model passes it: 1 for sqrt(d)-scaled embeddings, 0.02 for GPT-2's). An
        absolute term starts at that scale, so neither term swamps the other whatever the
        embedding convention. ``None`` (an encoding used on its own) keeps the encoding's
        natural scale: the paper's sinusoid of amplitude 1, a learned table as initialised.
        """
        return x

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        """Rotary encodings: ``q`` (B, H, Tq, D), ``k`` (B, H, Tk, D)."""
        return q, k

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """Relative encodings: an additive term on the attention logits, (B|1, H, Tq, Tk).

        The term is on the same scale as the logits the attention type computes
        (for scaled dot-product scores, already divided by sqrt(D)).
        """
        return None

    @property
    def flex_ready(self) -> bool:
        """Whether a FlexAttention kernel carries every term this encoding adds to logits and values."""
        return (self.has_score_mod or not self.has_score_bias) and not self.needs_weights_for_values

    def score_mod(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> ScoreMod | None:
        """``score_bias`` as a FlexAttention score_mod(score, b, h, q_idx, kv_idx) -> score + bias, where
        q_idx and kv_idx index ``q_pos`` and ``k_pos``; ``q`` (B, H, Tq, D) as given to ``score_bias``, whose
        Tq may be shorter than ``q_pos``: the caller padded the call to a length bucket, and the padded
        queries see no key (what a score_mod reads for them only needs to be in bounds)."""
        return None

    def value_term(self, weights: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """Relative value term: ``weights`` (B, H, Tq, Tk) -> addition to the output (B, H, Tq, D)."""
        return None

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}"


def relative_distance(q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """j - i for every query i and key j: (Tq, Tk) long."""
    return k_pos[None, :] - q_pos[:, None]
