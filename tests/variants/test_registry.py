"""The registries: lookup, loud errors, construction checks and registration from outside the package."""

from __future__ import annotations

import inspect

import pytest
import torch

from tests.helpers.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)
from variants import ATTENTION, POSITION, AttentionLayer, PositionEncoding, Registry, RegistryError, VariantConfigError
from variants.attention.hard import ESTIMATORS
from variants.attention.local import MODES
from variants.attention.scores import SCORES
from variants.kernels import BACKENDS, xformers_available
from variants.masking import masked_softmax


def raises_one_line(error: type[Exception], call, *fragments: str) -> str:
    """Run ``call``, expect ``error`` with a one-line message containing every fragment."""
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from {message!r}"
    return message


# -- the Registry class ------------------------------------------------------------------------------
def test_duplicate_name_is_rejected_and_the_first_entry_kept():
    things: Registry[object] = Registry("thing")
    things.register("alpha")(dict)
    raises_one_line(RegistryError, lambda: things.register("alpha")(list), "thing='alpha'", "already registered")
    assert things.get("alpha") is dict


def test_duplicate_of_a_builtin_variant_is_rejected():
    raises_one_line(RegistryError, lambda: ATTENTION.register("soft")(AttentionLayer), "attention='soft'")
    raises_one_line(RegistryError, lambda: POSITION.register("rope")(PositionEncoding), "position='rope'")


@pytest.mark.parametrize("bad", ["", None, 3])
def test_registry_names_must_be_non_empty_strings(bad):
    raises_one_line(RegistryError, lambda: Registry("thing").register(bad), repr(bad))


def test_unknown_name_lists_sorted_choices_and_nearest_match():
    things: Registry[object] = Registry("thing")
    for name in ("zeta", "alpha", "gamma"):
        things.register(name)(dict)
    message = raises_one_line(
        RegistryError, lambda: things.get("gama"), "thing='gama'", "['alpha', 'gamma', 'zeta']", "did you mean 'gamma'"
    )
    assert message.count("'gamma'") == 2  # listed once, suggested once
    no_hint = raises_one_line(RegistryError, lambda: things.get("qqqqqq"), "['alpha', 'gamma', 'zeta']")
    assert "did you mean" not in no_hint


@pytest.mark.parametrize("registry, typo, nearest", [(ATTENTION, "sotf", "soft"), (POSITION, "alibii", "alibi")])
def test_unknown_variant_name(registry, typo, nearest):
    raises_one_line(
        RegistryError,
        lambda: registry.build(typo, d_model=16, num_heads=2),
        f"{registry.kind}={typo!r}",
        str(registry.names()),
        f"did you mean {nearest!r}",
    )


def test_unknown_parameter_is_named_with_the_accepted_ones():
    things: Registry[object] = Registry("thing")

    @things.register("box")
    def box(width: int, height: int = 1) -> tuple[int, int]:
        return width, height

    assert things.build("box", width=2) == (2, 1)
    raises_one_line(
        RegistryError, lambda: things.build("box", width=2, hieght=3), "['hieght']", "accepted: ['height', 'width']"
    )


@pytest.mark.parametrize("registry", [ATTENTION, POSITION], ids=lambda r: r.kind)
def test_every_variant_rejects_an_unknown_parameter(registry):
    for name in registry.names():
        accepted = registry.accepted_params(name)
        raises_one_line(
            RegistryError,
            lambda name=name: registry.build(name, d_model=16, num_heads=2, colour="red"),
            f"{registry.kind}={name!r}",
            "['colour']",
            str(sorted(accepted)),
        )


def test_variations_cover_each_declared_option_once():
    for registry in (ATTENTION, POSITION):
        for name in registry.names():
            cases = registry.variations(name)
            assert cases[0] == {}
            declared = getattr(registry.get(name), "options", {})
            for key, values in declared.items():
                seen = {case[key] for case in cases if key in case}
                default = inspect.signature(registry.get(name)).parameters[key].default
                assert seen | {default} == set(values), (name, key)


# -- construction errors: key, value and what is allowed ------------------------------------------------
def test_num_heads_must_divide_d_model():
    raises_one_line(
        VariantConfigError,
        lambda: ATTENTION.build("multihead", d_model=16, num_heads=3),
        "num_heads=3",
        "d_model=16",
        "[1, 2, 4, 8, 16]",
    )
    raises_one_line(
        VariantConfigError,
        lambda: POSITION.build("alibi", d_model=16, num_heads=5),
        "num_heads=5",
        "d_model=16",
        "[1, 2, 4, 8, 16]",
    )


@pytest.mark.parametrize(
    "name, params, fragments",
    [
        ("local", {"window": 0}, ["window=0", "positive integer"]),
        ("local", {"window": -3}, ["window=-3", "positive integer"]),
        ("local", {"window": 2.5}, ["window=2.5", "positive integer"]),
        ("local", {"mode": "sideways"}, ["mode='sideways'", str(list(MODES))]),
        ("local", {"ratio": 0}, ["ratio=0", "positive number"]),
        ("local", {"block_size": 0}, ["block_size=0", "positive integer"]),
        ("hard", {"temperature": 0.0}, ["temperature=0.0", "positive number"]),
        ("hard", {"temperature": -1}, ["temperature=-1", "positive number"]),
        ("hard", {"estimator": "greedy"}, ["estimator='greedy'", str(list(ESTIMATORS))]),
        ("soft", {"score": "cosine"}, ["score='cosine'", str(list(SCORES))]),
        ("hard", {"score": "cosine"}, ["score='cosine'", str(list(SCORES))]),
        ("soft", {"dropout": 1.0}, ["dropout=1.0", "[0, 1)"]),
        ("soft", {"backend": "cuda"}, ["backend='cuda'", str(list(BACKENDS))]),
    ],
)
def test_bad_attention_parameter(name, params, fragments):
    raises_one_line(VariantConfigError, lambda: ATTENTION.build(name, d_model=16, num_heads=2, **params), *fragments)


@pytest.mark.parametrize(
    "name, params, fragments",
    [
        ("relative", {"max_distance": -1}, ["max_distance=-1", "integer >= 0"]),
        ("t5", {"max_distance": -1}, ["max_distance=-1", "positive integer"]),
        ("t5", {"num_buckets": 2}, ["num_buckets=2", ">= 4"]),
        ("learned", {"max_len": 0}, ["max_len=0", "positive integer"]),
        ("rope", {"base": 0}, ["base=0", "positive number"]),
    ],
)
def test_bad_position_parameter(name, params, fragments):
    raises_one_line(VariantConfigError, lambda: POSITION.build(name, d_model=16, num_heads=2, **params), *fragments)


def test_rope_needs_an_even_head_dimension():
    raises_one_line(
        VariantConfigError, lambda: POSITION.build("rope", d_model=6, num_heads=2), "d_model=6", "num_heads=2", "= 3"
    )


@pytest.mark.parametrize("name", [n for n in ATTENTION.names() if "sdpa" not in ATTENTION.get(n).backends])
def test_sdpa_backend_rejected_where_no_fused_kernel_exists(name):
    supported = list(ATTENTION.get(name).backends)
    raises_one_line(
        VariantConfigError,
        lambda: ATTENTION.build(name, d_model=16, backend="sdpa"),
        "backend='sdpa'",
        f"attention={name!r}",
        str(supported),
    )


@pytest.mark.skipif(xformers_available(), reason="xformers can run here")
@pytest.mark.parametrize("name", [n for n in ATTENTION.names() if "xformers" in ATTENTION.get(n).backends])
def test_xformers_backend_needs_cuda(name):
    raises_one_line(
        VariantConfigError,
        lambda: ATTENTION.build(name, d_model=16, backend="xformers"),
        "backend='xformers'",
        "CUDA",
        "['auto', 'math', 'sdpa', 'flex']",
    )


# -- registering from outside the package ------------------------------------------------------------
def test_register_and_use_an_outside_attention_type_and_position_encoding():
    """One decorator each; the layer call then uses them like built-ins."""

    @ATTENTION.register("test_uniform")
    class UniformAttention(AttentionLayer):
        """Every allowed key gets the same weight: the mean of the visible values."""

        kind = "test_uniform"

        def attend(self, q, k, v, *, masking, position, need_weights):
            scores = q.new_zeros(q.shape[0], q.shape[1], q.shape[2], k.shape[2])  # (B, H, Tq, Tk)
            weights = masked_softmax(scores, masking.dense())
            return weights @ v, weights

    @POSITION.register("test_self_only")
    class SelfOnly(PositionEncoding):
        """Each query sees only the key at its own position."""

        def score_bias(self, q, q_pos, k_pos):
            same = q_pos[:, None] == k_pos[None, :]  # (Tq, Tk)
            return torch.where(same, 0.0, -1e9).to(q.dtype)[None, None]  # (1, 1, Tq, Tk)

    try:
        torch.manual_seed(0)
        x = torch.randn(2, 5, 16)
        uniform = ATTENTION.build("test_uniform", d_model=16, num_heads=2)
        out, weights = uniform(x, causal=True, need_weights=True)
        values = uniform.w_v(x)  # (B, T, d)
        prefix_mean = values.cumsum(1) / torch.arange(1, 6)[None, :, None]
        torch.testing.assert_close(out, uniform.w_o(prefix_mean))
        assert torch.allclose(weights.sum(-1), torch.ones(2, 2, 5))

        self_only = POSITION.build("test_self_only", d_model=16, num_heads=2)
        soft = ATTENTION.build("soft", d_model=16, num_heads=2, backend="math")
        out, _ = soft(x, position=self_only)
        torch.testing.assert_close(out, soft.w_o(soft.w_v(x)))  # each token reads only itself
    finally:
        ATTENTION.unregister("test_uniform")
        POSITION.unregister("test_self_only")
    assert "test_uniform" not in ATTENTION and "test_self_only" not in POSITION
    raises_one_line(RegistryError, lambda: ATTENTION.unregister("test_uniform"), "attention='test_uniform'")


def test_a_subclass_passing_kwargs_on_accepts_its_bases_parameters():
    things = Registry("thing")

    class Base:
        def __init__(self, *, size: int = 1, colour: str = "red") -> None:
            self.size, self.colour = size, colour

    @things.register("tall")
    class Tall(Base):
        def __init__(self, *, height: int = 2, colour: str = "blue", **shared) -> None:
            super().__init__(colour=colour, **shared)
            self.height = height

    assert things.accepted_params("tall") == ["height", "colour", "size"]
    assert things.variations("tall") == [{}]
    built = things.build("tall", size=3)
    assert (built.height, built.colour, built.size) == (2, "blue", 3)
    raises_one_line(
        RegistryError, lambda: things.build("tall", sise=3), "['sise']", "accepted: ['colour', 'height', 'size']"
    )
