"""``python -m experiments.flex_check``: the command; its code is ``experiments.diagnostics.flex_check``."""

if __name__ == "__main__":
    from experiments.diagnostics.flex_check import main

    raise SystemExit(main())
