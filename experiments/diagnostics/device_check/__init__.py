"""``python -m experiments.device_check A|B``: a time-boxed pass of attnlab on one CUDA machine, in two runs.

- run A (kernels): the bench targets (``experiments.bench targets --device cuda``: local w256 against flash,
  ALiBi at 4096, T5 / relative against the dense bias), ``experiments.flex_check``, MFU eager and compiled,
  then the targeted flex probes (``experiments.diagnostics.device_check.probes``: the fit-start options, FIRE in
  eval() with a backward, masks across grad modes, a compiled model at varying lengths, and the flex
  crossover lengths behind ``variants.flex_cost.FLEX_PAYS``);
- run B (training): every ``experiment=quick`` cell with ``trainer=gpu`` at 100 and then 1000 steps, K at a
  time on the GPU (``jobs_per_gpu``), then 8 seeds as one ensemble (``hydra/launcher=ensemble``) against
  the same seeds as 8 runs.

Each section runs in a process group of its own under its own cap and is stopped whole at it; a cut
section keeps what it wrote. ``$OUT`` (``--out``) gets at most ``MAX_FILES`` files: ``summary.json``
(rewritten after every section, so it exists whatever is cut), ``summary.txt`` (one screen, also printed
last) and ``logs.tgz`` (every log, the sections' JSON and the cells' result.json). ``--dry-run`` composes
every command the run would start and preflights it with the project's own checks (the training
commands through ``experiments.app.preflight``, the bench and flex_check ones through their parsers), so
a renamed key fails on CPU before a device pass measures nothing. How to carry the wheels to an offline
machine: ../shared/gpu/README.md.
"""

#: files a run leaves under ``--out``: what comes back from a lent device
MAX_FILES = 8
