"""Compiling once per sweep: per-pass flex kernel options remembered on disk, the sweep's shared compile
caches, compile workers per process, and no new batch shape at an epoch's end.

No GPU: probes are stand-ins that record what they are asked to build (a real probe compiles a kernel).
The option names are checked against torch's own ``FlexKernelOptions`` and its fwd_/bwd_ prefix rule.
"""

from __future__ import annotations

import os
import typing
from unittest import mock

import pytest
import torch
from torch.nn.attention.flex_attention import FlexKernelOptions

import variants.flex as flex
from variants.flex_options import BACKWARD_CANDIDATES, FORWARD_CANDIDATES, OPTIONS_FILE, store_key

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
