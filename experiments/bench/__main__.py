"""``python -m experiments.bench <command>``; see ``experiments.bench`` for the commands."""

from experiments.bench import main

raise SystemExit(main())
