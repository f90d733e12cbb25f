"""``python -m experiments.diagnostics.gpu_check``: the same command as ``python -m experiments.gpu_check``."""

from experiments.diagnostics.gpu_check.cli import main

raise SystemExit(main())
