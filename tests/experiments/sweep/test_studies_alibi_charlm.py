"""study/alibi_charlm, Press et al. 2022's Figure 1 at CPU scale: a character LM trained at one context and evaluated
at 1x, 2x, 4x and 8x it, every position encoding of the registry that can be evaluated past its training length; its
claims parse, name cells of its grid and lengths it evaluates; the text is the file the user names."""

from __future__ import annotations

from omegaconf import OmegaConf

from attnlab.claims import parse_claims, split_metric
from experiments.config.spec import grid_spec
from experiments.sweep.grid import grid_values
from tests.experiments.config.test_studies import study_config
from variants.registries import POSITION

STUDY = "study/alibi_charlm"


def test_it_trains_at_one_context_and_evaluates_up_to_eight_times_it() -> None:
    cfg = study_config(STUDY)
    context = cfg.task.context
    assert cfg.task.name == "charlm" and cfg.model.arch == "decoder"
    assert list(cfg.task.eval_contexts) == [context * k for k in (1, 2, 4, 8)]
    # the text is given by path, relative to the repo (../shared) unless TINYSHAKESPEARE names the folder
    assert str(cfg.task.path).endswith("tinyshakespeare/input.txt")


def test_every_encoding_that_can_be_read_past_its_training_length_is_swept() -> None:
    cfg = study_config(STUDY)
    grid = dict(grid_values(grid_spec(cfg)))
    swept = set(grid["position"])
    assert {"none", "sinusoidal", "learned", "rope", "alibi", "t5"} <= swept <= set(POSITION)
    assert len(grid["seed"]) >= 3
    # learned: its table covers the longest evaluation (the rows past the training context are never trained)
    learned = study_config(STUDY, ["position=learned"])
    assert learned.position.max_len >= max(learned.task.eval_contexts)


def test_its_claims_name_cells_of_its_grid_and_lengths_it_evaluates() -> None:
    cfg = study_config(STUDY)
    grid = dict(grid_values(grid_spec(cfg)))
    claims = parse_claims(OmegaConf.to_container(cfg.claims, resolve=True))
    lengths = set(cfg.task.eval_contexts)
    assert claims and all(c.source and c.paper for c in claims)
    for claim in claims:
        name, length = split_metric(claim.metric)
        assert name in ("loss", "bpc") and length in lengths and length > cfg.task.context, claim.name
        assert claim.over is None or claim.over == cfg.task.context, claim.name
        for key, value in (*claim.a, *(claim.b or ())):
            assert str(value) in grid[key], f"{claim.name}: {key}={value} is not in the grid {grid[key]}"
    alibi = [c for c in claims if dict(c.a) == {"position": "alibi"}]
    assert {c.expect for c in alibi} == {"less", "ratio"}  # better than sinusoidal at 4x; flat from 1x to 4x
    assert any(c.b and dict(c.b) == {"position": "sinusoidal"} for c in alibi)


def test_the_length_generalisation_study_no_longer_carries_the_alibi_claims() -> None:
    claims = parse_claims(OmegaConf.to_container(study_config("study/length_generalization").claims, resolve=True))
    assert not [c for c in claims if dict(c.a) == {"position": "alibi"}]
