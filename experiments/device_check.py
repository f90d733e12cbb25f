"""``python -m experiments.device_check A|B``: the command; its code is ``experiments.diagnostics.device_check``."""

if __name__ == "__main__":
    from experiments.diagnostics.device_check.cli import main

    raise SystemExit(main())
