"""The registry-parametrised tests cover a new entry with no edit: a throwaway attention type, position encoding
and task, registered by a pytest plugin module before collection, are picked up by the unedited parametrised
tests of tests/variants/test_attention.py, tests/variants/test_position.py and tests/experiments/tasks/test_tasks.py,
and pass them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

PLUGIN = """
    import torch

    from experiments.tasks import TASKS
    from tests.experiments.tasks.test_plugin_tasks import Mirror
    from variants import ATTENTION, POSITION, AttentionLayer, PositionEncoding
    from variants.masking import masked_softmax


    @ATTENTION.register("throwaway_uniform")
    class ThrowawayUniform(AttentionLayer):
        # every visible key gets the same weight: the mean of the visible values

        kind = "throwaway_uniform"

        def attend(self, q, k, v, *, masking, position, need_weights):
            scores = q.new_zeros(q.shape[0], q.shape[1], q.shape[2], k.shape[2])  # (B, H, Tq, Tk)
            weights = masked_softmax(scores, masking.dense())
            return weights @ v, weights


    @POSITION.register("throwaway_distance")
    class ThrowawayDistance(PositionEncoding):
        # a score bias falling linearly with the distance between query and key

        def score_bias(self, q, q_pos, k_pos):
            distance = (q_pos[:, None] - k_pos[None, :]).abs().to(q.dtype)  # (Tq, Tk)
            return (-0.1 * distance)[None, None]  # (1, 1, Tq, Tk)


    TASKS.register("throwaway_mirror")(Mirror)
"""


def collected_and_passed(output: str, name: str) -> int:
    """How many test ids naming ``name`` passed, from pytest's -rA summary lines."""
    return len(re.findall(rf"^PASSED \S*{name}\S*", output, flags=re.MULTILINE))


@pytest.mark.slow  # a pytest subprocess that imports torch and Lightning and runs about 60 cases (about 40 s)
def test_throwaway_entries_are_covered_by_the_unedited_parametrised_tests(tmp_path: Path):
    (tmp_path / "throwaway_plugins.py").write_text(textwrap.dedent(PLUGIN))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "OMP_NUM_THREADS": "1"}
    tests = [
        "tests/variants/test_attention.py::test_causal_future_does_not_change_the_past",
        "tests/variants/test_attention.py::test_padded_keys_have_no_influence",
        "tests/variants/test_position.py::test_hooks_depend_on_relative_position_only",
        "tests/variants/test_position.py::test_layer_is_translation_invariant",
        "tests/experiments/tasks/test_tasks.py::test_batches_follow_the_contract_of_their_kind",
        "tests/experiments/tasks/test_tasks.py::test_same_seed_same_batches_other_seed_other_batches",
    ]
    command = [sys.executable, "-m", "pytest", "-q", "-rA", "-n", "0", "-p", "no:randomly", "-p", "throwaway_plugins"]
    select = [
        "-k",
        "throwaway_uniform and sinusoidal or throwaway_distance and (soft or relative_position) or throwaway_mirror",
    ]
    done = subprocess.run([*command, *tests, *select], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("throwaway_uniform", "throwaway_distance", "throwaway_mirror"):
        assert collected_and_passed(done.stdout, name) >= 2, f"{name} was not covered:\n{done.stdout[-3000:]}"
