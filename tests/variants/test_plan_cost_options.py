"""Compiling once per sweep: per-pass flex kernel options remembered on disk, the sweep's shared compile
caches, compile workers per process, and no new batch shape at an epoch's end.

No GPU: probes are stand-ins that record what they are asked to build (a real probe compiles a kernel).
The option names are checked against torch's own ``FlexKernelOptions`` and its fwd_/bwd_ prefix rule.
"""

from __future__ import annotations

import os
import typing
import warnings
from unittest import mock

import pytest
import torch
from torch.nn.attention.flex_attention import FlexKernelOptions

import variants.flex as flex
import variants.flex_options as flex_options
from variants.flex_options import BACKWARD_CANDIDATES, FORWARD_CANDIDATES, OPTIONS_FILE, smaller_than, store_key

DEVICE = torch.device("cuda", 5)  # a key no real run uses; the stand-in probes never touch a device


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    with mock.patch.dict(flex._OPTIONS, clear=True):
        yield tmp_path


def test_each_pass_names_only_its_own_options_and_torch_knows_every_one():
    known = set(typing.get_type_hints(FlexKernelOptions))
    for prefix, candidates in (("fwd_", FORWARD_CANDIDATES), ("bwd_", BACKWARD_CANDIDATES)):
        for options in candidates:
            assert all(key.startswith(prefix) and key[len(prefix) :] in known for key in options), options
    assert FORWARD_CANDIDATES[0] == {}  # the forward tries flex's own tiles first


def probe_failing(fails):
    tried = []

    def probe(options, device, dtype, head_dim, backward):
        tried.append((backward, dict(options)))
        if fails(options, backward):
            raise RuntimeError("out of resource: shared memory, Required: 245760 Hardware limit: 232448")

    return probe, tried


def test_a_training_call_keeps_the_forwards_default_tiles_and_changes_the_backward(cache):
    probe, tried = probe_failing(lambda options, backward: backward and "bwd_num_stages" not in options)
    got = flex.kernel_options(DEVICE, torch.bfloat16, 64, True, probe=probe)
    assert got == {"bwd_num_stages": 2}  # no unprefixed key: nothing reaches the forward kernel
    assert tried == [(False, {}), (True, {"bwd_num_stages": 2})]  # the Hopper-safe backward first: one probe
    assert flex.kernel_options(DEVICE, torch.bfloat16, 64, False, probe=probe) is None


def test_a_forward_that_needs_smaller_tiles_carries_them_into_the_training_call(cache):
    probe, _ = probe_failing(lambda options, backward: not options.get("fwd_BLOCK_M"))
    got = flex.kernel_options(DEVICE, torch.bfloat16, 128, True, probe=probe)
    assert got == {**FORWARD_CANDIDATES[1], **BACKWARD_CANDIDATES[0]}


def test_a_probes_choice_is_remembered_on_disk_per_torch_version(cache):
    probe, tried = probe_failing(lambda options, backward: False)
    flex.kernel_options(DEVICE, torch.float16, 32, True, probe=probe)
    assert (cache / OPTIONS_FILE).is_file() and len(tried) == 2
    flex._OPTIONS.clear()  # another cell of the sweep: a new process, the same cache folder

    def no_probe(*args):
        raise AssertionError("a remembered choice was probed again")

    assert flex.kernel_options(DEVICE, torch.float16, 32, True, probe=no_probe) == BACKWARD_CANDIDATES[0]
    flex._OPTIONS.clear()
    with mock.patch.object(torch, "__version__", "9.9.9"):  # other kernels, other default tiles
        assert "torch 9.9.9" in store_key(DEVICE, torch.float16, 32, True)
        flex.kernel_options(DEVICE, torch.float16, 32, True, probe=probe)
    assert len(tried) == 4


# -- a call whose kernel overflows where its probe built ------------------------------------------------------
# what Inductor raised on one H200 (torch 2.11) for the ALiBi layer's bf16 training call at T 4096
OVERFLOW = (
    "No valid triton configs. OutOfMemoryError: out of resource: triton_tem_fused_flex_attention_0 "
    "Required: 245760 Hardware limit:232448 Reducing block sizes or `num_stages` may help."
)


def test_smaller_candidates_shrink_one_pass_at_a_time_and_never_grow():
    ranks = {
        str({**f, **b}): (i, j) for i, f in enumerate(FORWARD_CANDIDATES) for j, b in enumerate(BACKWARD_CANDIDATES)
    }
    after = smaller_than(BACKWARD_CANDIDATES[0], backward=True)
    # the least shrunk first, the forward's tiles before the backward's at equal shrinking
    assert after[:2] == [{**FORWARD_CANDIDATES[1], **BACKWARD_CANDIDATES[0]}, BACKWARD_CANDIDATES[1]]
    assert len(after) == len(ranks) - 1  # every other candidate, each once
    levels = [sum(ranks[str(c)]) for c in after]
    assert levels == sorted(levels) and min(levels) == 1
    middle = {**FORWARD_CANDIDATES[1], **BACKWARD_CANDIDATES[1]}  # neither pass grows back past its tiles
    assert [ranks[str(c)] for c in smaller_than(middle, backward=True)] == [(2, 1), (1, 2), (2, 2)]
    assert smaller_than(None, backward=False) == list(FORWARD_CANDIDATES[1:])
    assert smaller_than(FORWARD_CANDIDATES[-1], backward=False) == []
    assert smaller_than({"fwd_BLOCK_M": 16}, backward=False) == list(FORWARD_CANDIDATES)  # set by hand: all


@pytest.fixture
def flex_call(cache, monkeypatch):
    """flex_attend on CPU through a stand-in for the compiled kernel that overflows unless the forward's tiles
    are at most ``fits`` rows; the options come from ``flex._OPTIONS`` as on a GPU (a probe chose flex's
    defaults). Returns (call, tried options, the choice's key)."""
    from torch.nn.attention.flex_attention import flex_attention

    T, D = 128, 16
    q, k, v = (torch.randn(1, 2, T, D, generator=torch.Generator().manual_seed(i)) for i in range(3))
    key = (str(q.device), q.dtype, D, False)
    flex._OPTIONS[key] = None
    tried, fits = [], {"rows": 64}

    def compiled(*args, kernel_options=None, **kwargs):
        tried.append(dict(kernel_options or {}))
        if (kernel_options or {}).get("fwd_BLOCK_M", 128) > fits["rows"]:
            raise RuntimeError(OVERFLOW)
        with warnings.catch_warnings():  # eager flex on CPU says it is not compiled: the stand-in's point
            warnings.simplefilter("ignore", UserWarning)
            return flex_attention(*args, **kwargs)

    monkeypatch.setattr(flex.SETTINGS, "compile_on_cpu", True)
    monkeypatch.setattr(flex, "_compiled_flex", lambda: compiled)
    monkeypatch.setattr(flex, "kernel_options", lambda device, dtype, head_dim, backward: flex._OPTIONS[key])
    mask = flex.block_mask_from_intervals(flex.prefix_intervals(torch.arange(T), torch.arange(T), causal=True))

    def call():
        return flex.flex_attend(q, k, v, block_mask=mask, score_mod=None, scale=D**-0.5)

    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return call, tried, key, fits, reference


def test_a_call_that_overflows_runs_on_smaller_tiles_and_keeps_them(flex_call, cache):
    call, tried, key, _, reference = flex_call
    torch.testing.assert_close(call(), reference)  # the same attention, on the tiles that fit
    assert tried == [{}, FORWARD_CANDIDATES[1]]
    assert flex._OPTIONS[key] == FORWARD_CANDIDATES[1]  # later calls build it at once
    call()
    assert tried[2:] == [FORWARD_CANDIDATES[1]]
    flex._OPTIONS.clear()  # another cell of the sweep reads the choice from disk
    assert flex_options.remembered(store_key(torch.device("cpu"), torch.float32, 16, False)) == (
        True,
        FORWARD_CANDIDATES[1],
    )


def test_a_call_that_overflows_on_every_candidate_names_each_failure(flex_call):
    call, tried, _, fits, _ = flex_call
    fits["rows"] = 0
    with pytest.raises(RuntimeError, match="no FlexAttention kernel builds for this call") as info:
        call()
    assert tried == list(FORWARD_CANDIDATES) and str(info.value).count("out of resource") == len(FORWARD_CANDIDATES)


def test_a_failure_other_than_an_overflow_is_not_retried(flex_call, monkeypatch):
    call, tried, *_ = flex_call

    def broken(*args, **kwargs):
        tried.append(kwargs.get("kernel_options"))
        raise RuntimeError("a score_mod that does not trace")

    monkeypatch.setattr(flex, "_compiled_flex", lambda: broken)
    with pytest.raises(RuntimeError, match="a score_mod that does not trace"):
        call()
    assert len(tried) == 1


def test_the_sweeps_cells_share_its_compile_caches_for_the_job_only(tmp_path):
    import torch._inductor.config as inductor_config

    from experiments.sweep.gpu_share import COMPILE_CACHE, compile_workers, share_compile_cache

    assert compile_workers(4, cores=16) == 4 and compile_workers(4, cores=2) == 1 and compile_workers(1, 16) == 16
    before_env, before_threads = dict(os.environ), inductor_config.compile_threads
    with share_compile_cache(tmp_path, jobs_per_gpu=4) as env:
        root = tmp_path / COMPILE_CACHE
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor")
        assert os.environ["TRITON_CACHE_DIR"] == str(root / "triton")
        assert os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] == os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] == "1"
        workers = max(1, len(os.sched_getaffinity(0)) // 4)
        assert inductor_config.compile_threads == workers and env["TORCHINDUCTOR_COMPILE_THREADS"] == str(workers)
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        assert cache_dir() == str(root / "inductor")  # where Inductor writes, and the options file lives
    assert dict(os.environ) == before_env and inductor_config.compile_threads == before_threads


@pytest.mark.slow  # builds three data modules (about 20 s on a loaded core)
def test_no_short_batch_at_an_epochs_end_while_a_whole_batch_remains():
    """500 examples in batches of 32: 15 whole batches, the 20 left over dropped (experiment=quick's 5000 leave
    8); a run resumed 3 batches into its second epoch starts at that epoch's fourth batch."""
    from experiments.tasks import TASKS

    def loader(train_size: int):
        data = TASKS.build("reverse", seed=0, batch_size=32, train_lengths=[2, 12], train_size=train_size)
        data.setup("fit")
        return data.train_dataloader()

    served = [len(batch["src"]) for batch in loader(500)]
    assert served == [32] * 15 and len(loader(500)) == 15  # the epoch length Lightning reads is the one served
    assert [len(batch["src"]) for batch in loader(20)] == [20]  # fewer than a batch: the short one is kept
    order = loader(500).sampler
    order.position = lambda: (1, 15)  # the second epoch, nothing of it consumed
    epoch = list(order)
    order.position = lambda: (1, 15 + 3)
    assert list(order) == epoch[3 * 32 :]
