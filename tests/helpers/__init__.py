"""What test files share, each in one home (tests/project/test_layout.py refuses a second copy):

- ``paths``: the checkout, its conf/, tests/ and the shared corpora; ``config``: the tiny overrides and the
  composed config; ``env``: a child process's environment;
- ``cli``: the training command (and an installed library's Python) as a process; ``warm``/``warm_server``: a
  ``python -m`` command run in a child forked from a Python that imported the stack once; ``runs``: a run in this
  process; ``sweeps``: a multirun as a process or, refused before its first job, in this one, and its results;
- ``results``, ``cell_fixtures``: result.json files and logs as a run writes them; ``grid_effects``: main
  effects and baseline comparisons over a task; ``cases``, ``registries``: the variant cases and the registries
  by kind;
- ``gpu_check_plants``, ``preset_settings`` (with ``fixtures/``), ``durations``: planted GPU checks, the presets'
  recorded settings, and the run order from tests/durations.json."""
