"""A Python that has imported the training stack once and forks a child per command (``tests.helpers.warm``).

Started as ``python -m tests.helpers.warm_server`` in the environment its commands will run in. It imports
``PRELOAD``, then reads one JSON request a line on stdin and answers on stdout, for each request: the child's
pid, then its exit code once it ends. The child takes the request's working folder, environment, argv and
output files, and runs the module as ``python -m`` does (``runpy._run_module_as_main``), so the command's
own code (its ``__main__``, Hydra's start, the run) is executed afresh in every child; only the imports
are shared. Imports that print anything, start a Python thread or make a temporary folder make the server
refuse to serve: a fresh process would have printed it, a fork inherits none of its Python threads, and the
first child to end would delete the folder under the others.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import runpy
import signal
import sys
import tempfile
import threading

# what ``python -m experiments.train`` imports on its way to a run's first step (``python -X importtime``):
# torch and its compiler, Lightning with torchmetrics, Hydra, pandas. Not W&B: its import makes a temporary
# folder for media that the first child to end would delete under every later one.
PRELOAD = ("torch", "lightning.pytorch", "hydra", "pandas", "experiments.app.train", "experiments.training.single_run")


class _Interrupted:
    """Whether this child's command ended by an uncaught KeyboardInterrupt."""

    value = False


@atexit.register  # registered before any preloaded library's, so it runs after all of theirs
def _end_as_interrupted() -> None:
    """A fresh ``python -m`` ends an uncaught KeyboardInterrupt by SIGINT at its default action, after its
    shutdown (a shell then stops a script that ran it): its flag for that is not set in a forked child, so the
    child does it here, its output flushed first."""
    if _Interrupted.value:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


def preload() -> str | None:
    """Import ``PRELOAD``; why this process cannot serve, or None."""
    for name in PRELOAD:
        importlib.import_module(name)
    # a temporary folder an import makes is deleted when the process ends: by the first child, under the others
    made = [o.name for o in gc.get_objects() if type(o) is tempfile.TemporaryDirectory]
    if made:
        return f"the preloaded imports made temporary folders {made}, which the first child to end would delete"
    # Python threads would be gone in a child with their locks held; the native ones the imports start (torch's,
    # pyarrow's allocator) are re-made after a fork by their libraries, as for a DataLoader's forked workers
    if threading.active_count() != 1:
        return f"the preloaded imports started {threading.active_count() - 1} Python thread(s)"
    return None


def child(request: dict, channel: int) -> None:
    """In the forked child: become the requested command, and end as it ends."""
    os.close(channel)
    # as a fresh Python starts: Ctrl-C raises KeyboardInterrupt, SIGTERM ends the process (SIGPIPE stays ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # found again from this environment, as a fresh process finds it
    streams = ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY), (2, request["stderr"], os.O_WRONLY))
    for fd, path, mode in streams:
        opened = os.open(path, mode)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["-m", *request["args"]]
    sys.path[0] = request["cwd"]  # `python -m` puts the working folder first on the import path
    # from here the child is `python -m module`, up to its end: an exception or SystemExit rises to the top and
    # the interpreter ends the process as it ends a fresh one (threads, atexit, streams flushed, modules torn down)
    try:
        runpy._run_module_as_main(request["module"])
    except KeyboardInterrupt:
        _Interrupted.value = True
        raise
    raise SystemExit(0)


def serve() -> None:
    problem = preload()
    gc.freeze()  # what the imports made stays out of the children's collections, and so uncopied
    answers = sys.stdout
    print(json.dumps({"ready": problem is None, "problem": problem}), file=answers, flush=True)
    if problem:
        return
    for line in sys.stdin:
        request = json.loads(line)
        sys.stderr.flush()  # nothing buffered is written twice, by the server and by its child
        pid = os.fork()
        if pid == 0:
            child(request, sys.stdin.fileno())
        print(json.dumps({"pid": pid}), file=answers, flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), file=answers, flush=True)


if __name__ == "__main__":
    serve()
