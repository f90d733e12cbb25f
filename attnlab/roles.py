"""The model's attention roles and which architectures build each: one home for names that the config, the model,
the preflight, the sweep's grid keys and the paper's methods all spell.

A role is an attention layer of its own kind: the encoder's self attention, the decoder's, and the decoder's cross
attention over the encoder. ``model.<role>`` null uses the ``attention`` group; a variant there replaces it for that
role only (experiments/config/roles.py). Standard library only: experiments and analysis both import it.
"""

from __future__ import annotations

ENCODER, DECODER, CROSS = "encoder_attention", "decoder_attention", "cross_attention"
ROLES = (ENCODER, DECODER, CROSS)
# the architectures (``model.arch``) that build each role's layers
BUILT_BY = {ENCODER: ("seq2seq", "encoder"), DECODER: ("seq2seq", "decoder"), CROSS: ("seq2seq",)}
SELF_ROLES = (ENCODER, DECODER)  # the roles that take the position encoding's hooks (cross attention takes none)


def built(role: str, arch: str) -> bool:
    """Whether a model of architecture ``arch`` builds ``role``'s layers."""
    if role not in BUILT_BY:
        raise ValueError(f"role={role!r} is not allowed; choose one of {list(ROLES)}")
    return arch in BUILT_BY[role]
