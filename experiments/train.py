"""``python -m experiments.train``: the command; its code is ``experiments.app.train``."""

if __name__ == "__main__":
    from experiments.app.train import command

    command()
