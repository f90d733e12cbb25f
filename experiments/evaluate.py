"""``python -m experiments.evaluate``: the command; its code is ``experiments.app.evaluate``."""

if __name__ == "__main__":
    from experiments.app.evaluate import command

    command()
