"""Which attention types and position encodings compose, decided by what each declares.

An encoding that biases the scores (``has_score_bias``) or mixes the weights into the values
(``needs_weights_for_values``) needs the (Tq, Tk) score matrix. A kernelised type never forms
it (``supports_score_bias = False``): its output is phi(q) (sum_j phi(k_j) v_j^T), and a term
added to one logit q_i . k_j has no place there. Rotary encodings act on q and k before the
feature map, and absolute ones on the embeddings, so those still compose. Nothing here names
a type or an encoding: a new one is placed by its declarations alone.
"""

from __future__ import annotations

from variants.attention.layer import AttentionLayer
from variants.checks import VariantConfigError
from variants.position.base import PositionEncoding
from variants.registries import ATTENTION, POSITION


def pair_problem(layer: AttentionLayer | type[AttentionLayer], position: PositionEncoding) -> str | None:
    """Why ``position`` cannot serve ``layer`` (a sentence), or None when the pair composes."""
    if getattr(layer, "supports_score_bias", True):
        return None
    if position.has_score_bias:
        return "it adds a bias to the score matrix, which kernelised attention never forms"
    if position.needs_weights_for_values:
        return "it adds a term weighted by the attention weights to the values, which kernelised attention never forms"
    return None


def encodings_for(layer: AttentionLayer | type[AttentionLayer]) -> list[str]:
    """Registered encodings whose class declares no score or value term: those ``layer`` can take at defaults."""
    if getattr(layer, "supports_score_bias", True):
        return POSITION.names()
    return [n for n in POSITION.names() if not getattr(POSITION.get(n), "has_score_bias", False)]


def check_pair(attention: str, layer: AttentionLayer, position: str, encoding: PositionEncoding) -> None:
    """Raise a one-line VariantConfigError naming both keys when the pair cannot compose."""
    problem = pair_problem(layer, encoding)
    if problem is not None:
        raise VariantConfigError(
            f"attention={attention!r} cannot take position={position!r}: {problem}; "
            f"choose one of {encodings_for(layer)} for it, or an attention type that forms scores "
            f"({[n for n in ATTENTION.names() if getattr(ATTENTION.get(n), 'supports_score_bias', True)]})"
        )
