"""``peers``: the suite's training speed against other implementations, in one run.

    python -m experiments.bench peers --out peers.json
    python -m experiments.bench peers --threads 1 --clock cpu    # steadier on a shared CPU machine
    python -m experiments.bench peers --device cuda --bf16

``peers`` runs every comparison in one process on the same shapes and the same
batches. The cases of a comparison take turns (A, B, B, A, A, B, ...: alternating,
and each case leads every other round, so a slow drift of a shared machine hits all
cases alike) after untimed warm-up steps, which also absorb ``torch.compile``'s
compilation; each reports the median over its rounds.

1. ``seq2seq``: a training step (forward, cross-entropy, backward, AdamW step) of the
   suite's seq2seq multihead + sinusoidal Transformer against ``torch.nn.Transformer``
   wrapped in the same embedding, sinusoidal encoding and tied output projection;
   also the suite's model compiled exactly as ``model.compile=true`` compiles it
   (``experiments.model.compiling.compile_model``).
   Targets: eager <= 1.15x torch.nn.Transformer; compiled faster than it (< 1x).
2. ``decoder``: the suite's decoder-only multihead + learned model against
   x-transformers' ``TransformerWrapper(Decoder)`` of the same width, depth and heads
   (the optional ``bench`` extra; skipped with a message when it is missing).
3. ``generation``: greedy decoding with the key/value cache against recomputing the
   prefix at every step. Target: the cache >= 5x faster.
"""

from experiments.bench.peers import cli  # noqa: F401 (registers the command)
