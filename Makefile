# make test : set up .venv when missing, install attnlab, run the test suite without its slow tier
# make test-slow : the slow tier (end-to-end trainings, sweeps, compiles); make test-all : both
# make lint : ruff (lint and format check) and mypy (variants/ and the public entry points)
# make format : sort the imports and format the code the way make lint checks it
# make demo : the CPU demo grid (experiment=demo) and its ablation report
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# CPU machines take the local CPU wheel; with an NVIDIA GPU the open range in pyproject applies.
CPU_TORCH ?= torch==2.13.0
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
# worksteal: a worker that runs out of tests takes half of the other's queue, so the suite does not
# end on one worker's tail of long end-to-end tests; tests/conftest.py runs the files whose tests took
# longest first (tests/helpers/durations.py, from tests/durations.json), so what is left at the end is short
PYTEST_ARGS ?= -n 2 -q --dist worksteal
export WANDB_MODE ?= offline
export WANDB_SILENT ?= true
export HYDRA_FULL_ERROR ?= 0
# Python's bytecode cache on, whatever the shell says: a suite that starts hundreds of processes would
# otherwise recompile torch and Lightning from source in each one (python -m experiments.train --version:
# 12.3 s without the cache, 4.8 s with it). With pip's --no-compile below, only what is imported is compiled, once.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: test test-slow test-all lint format demo venv clean bench bench-loop test-cluster gpu-check device-check-dry

# --no-compile: pip would byte-compile every .py file of the environment, one core, most of them never
# imported (test suites, unused submodules); Python compiles what a process imports and keeps its .pyc.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
ifeq ($(HAS_GPU),1)
	$(PIP) install -q --no-compile -e '.[dev,gpu]'
else
	$(PIP) install -q --no-compile $(CPU_TORCH)
	$(PIP) install -q --no-compile -e '.[dev]'
endif
	touch $@

venv: $(VENV)/.installed

# Two tiers, both run by CI: `test` leaves out the end-to-end tests marked slow (trainings, sweeps,
# compiles and process starts of more than a few seconds), so it stays under 10 minutes on 2 cores;
# `test-slow` runs exactly those.
test: venv
	$(PY) -m pytest $(PYTEST_ARGS) -m "not slow"

# The slow tier runs longest files first (tests/durations.json) under worksteal, like the fast tier: dealt a
# whole file at a time (--dist loadfile) it took 1,106 s on 2 quiet cores against 816 s before, as a long
# file (test_every_key's four parts, test_compiled's compiles) then runs on one worker alone.
test-slow: venv
	$(PY) -m pytest $(PYTEST_ARGS) -m slow

test-all: test test-slow

# Every check runs, so one pass shows all that is wrong; the configuration is in pyproject.toml.
lint: venv
	@status=0; \
	$(PY) -m ruff check . || status=1; \
	$(PY) -m ruff format --check . || status=1; \
	$(PY) -m mypy || status=1; \
	exit $$status

format: venv
	$(PY) -m ruff check --select I --fix .
	$(PY) -m ruff format .

# The demo grid (3 position encodings x 3 seeds on `copy`, each cell's seeds as one ensemble), then its report.
# A failed cell does not stop the report: it shows there as failed.
DEMO_TRAINER := $(if $(HAS_GPU),trainer=gpu,trainer=cpu)
DEMO_JOBS ?= 3  # one process per cell; each trains its 3 seeds as one batched model
demo: venv
	-$(PY) -m experiments.train -m experiment=demo $(DEMO_TRAINER) hydra/launcher=joblib hydra.launcher.n_jobs=$(DEMO_JOBS)
	$(PY) -m analysis.report multirun/demo --out report
	@echo "report: $(CURDIR)/report/report.html"

bench: venv
	$(PY) -m experiments.bench targets

# The training loop kept as fast as a hand-written one: shakespeare_char (a generated text without
# ../shared) through attnlab's whole stack and through a plain torch loop, in one process, in turns of
# 20 steps, one thread, the process's CPU clock; fails when attnlab's median step is more than 10%
# above the plain loop's in 3 attempts in a row (a run's ratio moves by about 5% on a loaded machine:
# docs/benchmarks.md, the training loop).
# 128 held-out windows instead of the preset's 512: the evaluations' cost, not the step's, shrinks.
bench-loop: venv
	OMP_NUM_THREADS=1 $(PY) -m experiments.bench loop --steps 300 --block 20 --val-every 150 --clock cpu \
		--max-step-ratio 1.10 --attempts 3 task.val_windows=128

# Sweeps on a real one-node SLURM cluster started on this machine (root on Debian; the tests
# skip, saying why, elsewhere). tests/cluster/slurm-local starts it and stops it afterwards.
test-cluster: venv
	$(PY) -m pytest tests/cluster -q -n 0

# On a CUDA machine: fused kernels vs the math path, bf16 and compiled training, DDP on every
# GPU, MFU and the quick grid; a table and gpu_check.json (without CUDA every check skips: exit 1).
gpu-check: venv
	$(PY) -m experiments.gpu_check --out gpu_check.json --work gpu_check

# On CPU: compose and preflight every command of the device check's two runs (docs/gpu.md); exit 1 names a refused one.
device-check-dry: venv
	$(PY) -m experiments.device_check A --dry-run --out device-check-dry/A
	$(PY) -m experiments.device_check B --dry-run --out device-check-dry/B

clean:
	rm -rf $(VENV) outputs multirun report
