"""``python -m experiments.gpu_check``: the command; its code is ``experiments.diagnostics.gpu_check``."""

if __name__ == "__main__":
    from experiments.diagnostics.gpu_check import main

    raise SystemExit(main())
