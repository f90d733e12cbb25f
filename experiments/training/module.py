"""The LightningModule: loss, optimiser and schedule, evaluation by real generation.

Training is teacher-forced cross-entropy (with optional label smoothing) plus,
for REINFORCE hard attention, a score-function term (``experiments/model/reinforce.py``).
Validation is teacher-forced; testing of seq2seq tasks generates
greedily with the key/value cache and scores exact matches per evaluation length.
What differs between seq2seq, lm and classify (inputs and targets, the loss, the metrics)
lives in one adapter per kind (``experiments/training/task_adapters.py``), chosen once in ``__init__``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import lightning as L
import torch
from torch import Tensor
from torchmetrics import MeanMetric, SumMetric

from experiments.config.schema import OptimConf
from experiments.model import attention_stats
from experiments.model.reinforce import Baseline, mean_entropy, repeat_batch, returns, stack_log_probs, surrogate
from experiments.model.transformer import ModelSpec, Transformer
from experiments.tasks.batches import IGNORE, REPEATED
from experiments.training.task_adapters import TaskAdapter, adapter_for
from variants.attention.hard import reinforce_layers
from variants.flex import choose_kernel_options


class DivergedError(RuntimeError):
    """The training loss became NaN or infinite."""

    def __init__(self, step: int, value: float) -> None:
        super().__init__(f"loss became {value} at step {step}")
        self.step = step


def lr_factor(step: int, spec: OptimConf, max_steps: int) -> float:
    """Multiplier of the base learning rate at ``step`` (linear warm-up, then the schedule)."""
    warm = max(spec.warmup_steps, 1)
    if step < spec.warmup_steps:
        return (step + 1) / warm
    if spec.schedule == "inverse_sqrt":
        return math.sqrt(warm / (step + 1))
    if spec.schedule == "cosine":
        progress = min((step - spec.warmup_steps) / max(max_steps - spec.warmup_steps, 1), 1.0)
        return spec.min_lr_ratio + (1 - spec.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    return 1.0


def fused_adamw_available(params: list[Tensor], *, mixed_clipping: bool = False) -> bool | None:
    """True where torch has a fused AdamW kernel for every parameter (floating point, on CPU or CUDA), else
    None: torch's default. The fused kernel makes the same update element by element in one pass, where
    torch's default on CPU loops over the tensors in Python, a tenth of a small model's step
    (docs/benchmarks.md: the training loop). Not under ``mixed_clipping`` (a ``*-mixed`` precision with
    gradient clipping): Lightning clips mixed-precision gradients itself and refuses an optimiser that
    unscales them inside its step, as the fused one declares."""
    if mixed_clipping:
        return None
    return all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params) or None


def mixed_clipping(trainer: Any) -> bool:
    """Whether ``trainer`` clips gradients under a mixed precision (``16-mixed``, ``bf16-mixed``)."""
    return trainer is not None and str(trainer.precision).endswith("-mixed") and bool(trainer.gradient_clip_val)


def adamw_with_schedule(
    params: list[Tensor], spec: OptimConf, max_steps: int, member_dims: int = 0, trainer: Any = None
) -> dict[str, Any]:
    """AdamW that decays matrices only (weights of ``member_dims`` + 2 or more dimensions: an ensemble's carry
    a leading member dimension) and the learning-rate schedule per step, as Lightning's optimiser config;
    torch's fused kernel where it has one and ``trainer`` allows it (``fused_adamw_available``)."""
    decay = [p for p in params if p.dim() - member_dims >= 2]
    no_decay = [p for p in params if p.dim() - member_dims < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=spec.lr,
        betas=tuple(spec.betas),
        fused=fused_adamw_available(params, mixed_clipping=mixed_clipping(trainer)),
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, spec, max_steps))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


@dataclass(frozen=True)
class EvalOptions:
    """What a test measures besides the task's metrics, and the task's functions it needs for that.

    Not hyper-parameters: a checkpoint keeps none of them (two are the datamodule's functions), and a
    module loaded from one without them tests the task's metrics alone.
    """

    #: token ids -> text, for BLEU (translation)
    decode_text: Callable[[list[int]], str] | None = None
    #: attention statistics over the test set (``experiments.model.attention_stats``; eval.attention_stats)
    attention_stats: bool = False
    #: examples per evaluation length the statistics read (None: all); the first ones, so every
    #: variant is measured on the same examples (eval.attention_stats_examples)
    stats_examples: int | None = None
    #: the task's alignment, (src (B, S), tgt (B, T)) -> (B, T, S) bool | None, for cross-attention statistics
    alignment: Callable[[Tensor, Tensor], Tensor | None] | None = None


class TransformerModule(L.LightningModule):
    """Trains the Transformer of any ``arch`` on any compatible task ``kind`` (seq2seq, lm, classify)."""

    #: flex's kernel options chosen on the device at fit start (``choose_kernel_options``), or None
    flex_options: dict[str, object] | None = None

    def __init__(
        self,
        model: ModelSpec,
        optim: OptimConf,
        task_kind: str,
        max_steps: int,
        eval_lengths: list[int] | None = None,
        sep_id: int = 3,
        generate: bool = True,
        bleu: bool = False,
        evaluation: EvalOptions | None = None,
        divergence_every: int = 1,
        cudagraph_steps: bool = False,
    ) -> None:
        """``divergence_every``: steps between reads of the divergence flag (the training app: every logging and
        checkpoint step); ``cudagraph_steps``: each step begins a new CUDA-graph step (model.compile_mode=
        reduce-overhead)."""
        super().__init__()
        # plain dicts: a checkpoint's hyperparameters (load_from_checkpoint), a notebook, an older script
        model = ModelSpec.from_dict(model) if isinstance(model, Mapping) else model
        optim = OptimConf(**optim) if isinstance(optim, Mapping) else optim
        # In the checkpoint as plain data (a checkpoint loads with torch.load(weights_only=True));
        # the loggers already have the whole resolved config (result.flatten). The evaluation and
        # runtime options stay out: they are how this process runs, not what the weights are.
        self.save_hyperparameters(
            ignore=["model", "optim", "evaluation", "divergence_every", "cudagraph_steps"], logger=False
        )
        self.hparams.update(model=asdict(model), optim=asdict(optim))
        self.spec = model
        self.optim_spec = optim
        self.optim_spec.validate()
        self.model = Transformer(self.spec)
        self.task_kind, self.max_steps, self.sep_id = task_kind, max_steps, sep_id
        # what differs between seq2seq, lm and classify, chosen once (experiments/training/task_adapters.py)
        self.adapter: TaskAdapter = adapter_for(
            task_kind, self.spec.arch, pad_id=self.spec.pad_id, bos_id=self.spec.bos_id, sep_id=sep_id
        )
        self.generate_at_test, self.bleu = generate, bleu
        self.eval_lengths = [int(n) for n in (eval_lengths or [])]
        self.tokens_seen = 0
        self.divergence_every, self.cudagraph_steps = divergence_every, cudagraph_steps
        self.evaluation = evaluation or EvalOptions()
        self._bad_loss: Tensor | None = None
        self.reinforce_spec = self.optim_spec.reinforce()
        # One baseline per stack whose hard layers train by REINFORCE (none for other models).
        self.baselines = torch.nn.ModuleDict(
            {
                name: Baseline(
                    self.reinforce_spec.baseline,
                    self.reinforce_spec.baseline_decay,
                    self.reinforce_spec.samples,
                    features=self.spec.d_model,
                )
                for name in ("encoder", "decoder")
                if _reinforcing(getattr(self.model, name))
            }
        )
        self.val_loss, self.val_acc = MeanMetric(), MeanMetric()
        self.test_loss, self.test_acc, self.test_seq = MeanMetric(), MeanMetric(), MeanMetric()
        # per evaluation length: correct tokens, tokens, correct sequences, sequences
        self.by_length = torch.nn.ModuleDict(
            {
                str(n): torch.nn.ModuleDict({k: SumMetric() for k in ("tok", "ntok", "seq", "nseq", "nll")})
                for n in self.eval_lengths
            }
        )
        self.hypotheses: list[str] = []
        self.references: list[str] = []
        self._stats_seen: dict[str, int] = {}
        self.stats_sums: dict[tuple[str, str], dict[str, Tensor]] = {}
        self.stats_seconds = self.test_seconds = 0.0

    # -- loss -----------------------------------------------------------------------------------
    def _io(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor | None]:
        """(logits, targets, src) for the batch, whatever the task and arch."""
        inputs, targets, src = self.adapter.io(batch)
        # Always through forward(), so that model.compile=true compiles every architecture.
        return self.model(**inputs), targets, src

    def _losses(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
        """Mean loss and the per-example loss (B,)."""
        return self.adapter.losses(logits, targets, smoothing)

    def on_fit_start(self) -> None:
        # Flex's kernel options are chosen here, on the device and before a compiled model traces flex
        # (which never makes the eager probe that would choose them); result.json records them.
        self.choose_flex_options(self.device, str(self.trainer.precision))

    def choose_flex_options(self, device: torch.device, precision: str) -> None:
        """Choose flex's kernel options for the layers that run on flex on ``device`` (CUDA only) at the
        Trainer's ``precision``: at fit start, and for an ensemble's member before its evaluation."""
        if device.type == "cuda":
            data = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
            longest = data.longest_sequence() if hasattr(data, "longest_sequence") else None
            dims = self.model.flex_head_dims(cuda=True, keys=longest)  # none where every call is too short
            if dims:
                dtype = torch.bfloat16 if "bf16" in precision else torch.float16 if "16" in precision else torch.float32
                self.flex_options = choose_kernel_options(device, dtype, dims)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        if self.cudagraph_steps:
            # model.compile_mode=reduce-overhead: a new step may reuse the CUDA graphs' output memory
            torch.compiler.cudagraph_mark_step_begin()
        if self.baselines:
            batch = repeat_batch(batch, self.reinforce_spec.samples)
        logits, targets, src = self._io(batch)
        loss, _ = self._losses(logits, targets, self.optim_spec.label_smoothing)
        if self.baselines:
            costs = self._token_losses(logits, targets, self.optim_spec.label_smoothing).detach()
            loss = loss + self._reinforce(costs, targets, src)
        self._watch_divergence(loss)
        # Counted on the device and read once at the end: int() here would sync a GPU every step.
        self.tokens_seen = self.tokens_seen + self.adapter.seen(targets, src).detach()
        # Not a progress-bar metric: Lightning turns those into numbers (.item()) after every step,
        # which would stall the GPU each step. The bar and the log lines read ``callback_metrics``
        # at ``log_every_n_steps``.
        self.log("train/loss", loss)
        return loss

    def _watch_divergence(self, loss: Tensor) -> None:
        """Remember the first non-finite loss on the device; read it every ``divergence_every`` steps.

        ``bool(isfinite(loss))`` on every step would make the host wait for the GPU each step.
        The step and value of the first bad loss stay exact however late they are read; the
        training app reads them at every logging and checkpointing step, so no checkpoint is
        written after a divergence it has not seen.
        """
        loss = loss.detach().float()
        if self._bad_loss is None:
            self._bad_loss = loss.new_tensor([-1.0, 0.0])  # (first bad step, its loss); once per run
        first = torch.isfinite(loss).logical_not() & self._bad_loss[0].lt(0)
        self._bad_loss = torch.where(
            first, torch.stack((loss.new_full((), float(self.global_step)), loss)), self._bad_loss
        )
        done = self.global_step + 1
        if done % max(self.divergence_every, 1) == 0 or done >= self.max_steps:
            step, value = self._bad_loss.tolist()
            if step >= 0:
                raise DivergedError(int(step), value)

    def _token_losses(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
        """Per-position losses c (B, T), 0 where nothing is scored; a classifier's (B,) becomes (B, 1)."""
        return self.adapter.token_losses(logits, targets, smoothing)

    def _reinforce(self, costs: Tensor, targets: Tensor, src: Tensor | None) -> Tensor:
        """The score-function term of every REINFORCE stack, for a loss of sum(costs) / N.

        costs (B, T): per-position losses (the training loss is their sum over the N scored positions).
        """
        spec = self.reinforce_spec
        scored = self.adapter.scored(targets)  # (B, T), like costs
        norm = scored.sum().clamp(min=1)
        total = costs.new_zeros(())
        for name, baseline in self.baselines.items():
            layers = reinforce_layers(getattr(self.model, name))
            if not layers:
                continue
            log_probs = [layer.log_probs for layer in layers]
            features = layers[0].query_features  # the first REINFORCE layer's queries: no choice changes them
            if name == "decoder":
                # A decoder query matters while a scored position lies at or after it.
                valid = scored.flip(1).cummax(1).values.flip(1)  # (B, T)
                G = returns(costs, spec.reward, spec.discount)
                tokens = returns(scored.to(costs.dtype), spec.reward, spec.discount)  # what each G sums
            else:
                valid = self._encoder_queries(src, log_probs[0].shape[-1])  # (B, S)
                G = costs.sum(1, keepdim=True).expand(-1, valid.shape[1])  # every source query: the sequence
                tokens = scored.to(costs.dtype).sum(1, keepdim=True).expand_as(G)
            valid = valid.to(costs.dtype)
            beta = baseline(G, features, tokens)
            total = total + spec.weight * surrogate(G, beta, stack_log_probs(log_probs), valid, norm)
            baseline.update(G, valid, features, tokens)  # after beta was read: beta never saw this step
            if spec.entropy > 0:
                total = total - spec.entropy * mean_entropy([layer.entropy for layer in layers], valid)
        return total

    def _encoder_queries(self, src: Tensor, length: int) -> Tensor:
        """(B, S') True at real source positions (and a [CLS] prefix); padding reaches nothing."""
        real = src.ne(self.spec.pad_id)
        if length == real.shape[1] + 1:
            real = torch.cat((real.new_ones(real.shape[0], 1), real), dim=1)
        return real

    # -- validation ------------------------------------------------------------------------------
    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        if batch.get(REPEATED):
            return
        logits, targets, _ = self._io(batch)
        loss, _ = self._losses(logits, targets)
        mask = targets.ne(IGNORE)
        correct = (logits.argmax(-1).eq(targets) & mask).sum() / mask.sum().clamp(min=1)
        self.val_loss.update(loss, weight=int(mask.sum()))
        self.val_acc.update(correct, weight=int(mask.sum()))

    def on_validation_epoch_end(self) -> None:
        loss = self.val_loss.compute()
        self.log("val/loss", loss, prog_bar=True, sync_dist=True)
        for name, value in self.adapter.epoch_metrics("val", loss, self.val_acc.compute()).items():
            self.log(name, value, sync_dist=True)
        self.val_loss.reset()
        self.val_acc.reset()

    # -- test ------------------------------------------------------------------------------------
    def on_test_epoch_start(self) -> None:
        self.hypotheses, self.references = [], []
        self.stats_sums, self.stats_seconds, self._stats_seen = {}, 0.0, {}
        self._test_began = time.perf_counter()
        for group in self.by_length.values():
            for metric in group.values():
                metric.reset()
                # A zero update: a rank whose shard holds no example of this length still
                # takes part in the sum across ranks, without torchmetrics' warning.
                metric.update(0.0)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        if batch.get(REPEATED):
            return
        logits, targets, _ = self._io(batch)
        loss, per_example = self._losses(logits, targets)
        mask = targets.ne(IGNORE)
        self.test_loss.update(loss, weight=int(mask.sum()))
        length = str(int(batch["length"][0])) if "length" in batch else None
        # seq2seq generates greedily (when eval.generate); the others score the teacher-forced logits
        greedy = self.greedy if self.generate_at_test else None
        tok, real, seq, generated = self.adapter.test_scores(batch, logits, targets, greedy)
        decode = self.evaluation.decode_text
        if generated is not None and self.bleu and decode is not None:
            self.hypotheses += [decode(row.tolist()) for row in generated]
            self.references += [decode(row.tolist()) for row in batch["tgt"]]
        self.test_acc.update(tok / real.sum().clamp(min=1), weight=int(real.sum()))
        self.test_seq.update(seq.float().mean(), weight=seq.numel())
        if length in self.by_length:
            m = self.by_length[length]
            m["tok"].update(tok.float())
            m["ntok"].update(real.sum().float())
            m["seq"].update(seq.sum().float())
            m["nseq"].update(float(seq.numel()))
            m["nll"].update(self.adapter.example_nll(per_example, targets).sum())
        if self.evaluation.attention_stats:
            self._sync()
            began = time.perf_counter()
            self._attention_stats(batch, length or "all")
            self._sync()
            self.stats_seconds += time.perf_counter() - began

    def _stats_share(self, batch: dict[str, Tensor], length: str) -> dict[str, Tensor] | None:
        """The rows of this batch the statistics still need for ``length`` (None: none)."""
        size = len(next(v for v in batch.values() if isinstance(v, Tensor)))
        seen = self._stats_seen.get(length, 0)
        cap = self.evaluation.stats_examples
        take = size if cap is None else min(size, cap - seen)
        if take <= 0:
            return None
        self._stats_seen[length] = seen + take
        return batch if take == size else {k: v[:take] if isinstance(v, Tensor) else v for k, v in batch.items()}

    def _sync(self) -> None:
        """Wait for the GPU, so the statistics' timer measures their work and nothing queued before."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _attention_stats(self, batch: dict[str, Tensor], length: str) -> None:
        """Add one batch to the per-(layer, length) sums; a separate teacher-forced forward pass with
        weights, so the outputs scored above come from the model's usual (fused) path."""
        batch = self._stats_share(batch, length)
        if batch is None:
            return
        inputs, _, _ = self.adapter.io(batch)
        layers = self.model.attention_weights(**inputs)
        aligned = self.adapter.aligned(batch, self.evaluation.alignment)  # (B, T, S) | None
        for name, (weights, visible, queries) in layers.items():
            sums = attention_stats.layer_sums(weights, visible, queries, aligned if name.startswith("cross") else None)
            key = (name, length)
            self.stats_sums[key] = attention_stats.add(self.stats_sums.get(key), sums)

    def on_test_epoch_end(self) -> None:
        loss = self.test_loss.compute()
        self.log("test/loss", loss, sync_dist=True)
        metrics = self.adapter.epoch_metrics("test", loss, self.test_acc.compute(), self.test_seq.compute())
        for name, value in metrics.items():
            self.log(name, value, sync_dist=True)
        for metric in (self.test_loss, self.test_acc, self.test_seq):
            metric.reset()
        if self.bleu:
            self.hypotheses, self.references = gather_texts(self.hypotheses, self.references)
        if self.evaluation.attention_stats:
            self.stats_sums = gather_sums(self.stats_sums)
        self.test_seconds = time.perf_counter() - self._test_began

    def attention_statistics(self) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, Any]]:
        """From the last test run: {"<layer>": {"<length>": {stat: mean}}} and the per-head arrays
        {"<layer>/<length>/<stat>": (H,)} (see ``experiments.model.attention_stats``)."""
        summary: dict[str, dict[str, dict[str, float]]] = {}
        heads: dict[str, Any] = {}

        def order(key: tuple[str, str]) -> tuple:
            layer, length = key
            return (layer, not length.isdigit(), int(length) if length.isdigit() else 0, length)

        for (layer, length), sums in sorted(self.stats_sums.items(), key=lambda kv: order(kv[0])):
            summary.setdefault(layer, {})[length] = attention_stats.summarise(sums)
            for stat, value in attention_stats.per_head(sums).items():
                heads[f"{layer}/{length}/{stat}"] = value.cpu().numpy()
        return summary, heads

    def length_metrics(self) -> dict[str, dict[str, float]]:
        """Per evaluation length, from the last test run: {"<n>": {"token_acc", "seq_acc"} | {"acc"} | ...}."""
        out: dict[str, dict[str, float]] = {}
        for n, m in self.by_length.items():
            if float(m["nseq"].compute()) == 0:
                continue
            out[n] = self.adapter.length_metrics({k: float(metric.compute()) for k, metric in m.items()})
        return out

    def bleu_scores(self) -> dict[str, float]:
        if not self.hypotheses:
            return {}
        import sacrebleu

        bleu = sacrebleu.corpus_bleu(self.hypotheses, [self.references])
        chrf = sacrebleu.corpus_chrf(self.hypotheses, [self.references])
        return {"test/bleu": float(bleu.score), "test/chrf": float(chrf.score)}

    # -- generation -----------------------------------------------------------------------------
    @torch.no_grad()
    def greedy(self, batch: dict[str, Tensor], use_cache: bool = True) -> Tensor:
        """Greedy outputs aligned with ``batch["tgt"]``: (B, T) (seq2seq tasks only)."""
        return self.adapter.generate(self.model, batch, use_cache)

    # -- prediction -----------------------------------------------------------------------------
    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        """The logits of a task batch: (B, T, V) teacher-forced for seq2seq and lm, (B, C) for classify."""
        inputs, _, _ = self.adapter.io(batch)
        return self.model(**inputs)

    @torch.no_grad()
    def predict_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> dict[str, Tensor]:
        """What the test scores, per example (``trainer.predict(module, dataloaders=data.test_dataloader())``):
        ``predicted`` and ``target`` aligned, ``scored`` where they count, and the ``length`` tag (B,).

        seq2seq: the greedy generation (B, T) against ``tgt``, as the test generates it (key/value cache);
        lm: the most likely next token at each position given the true prefix (B, C); classify: the label (B,).
        ``experiments.training.predictions`` turns them into tokens or text.
        """
        if self.task_kind == "seq2seq":
            predicted, target = self.greedy(batch), batch["tgt"]  # (B, T) each
            scored = target.ne(self.spec.pad_id)
        else:
            logits, target, _ = self._io(batch)
            predicted = logits.argmax(-1)  # (B, C) | (B,)
            scored = self.adapter.scored(target).reshape(predicted.shape)
        return {"predicted": predicted, "target": target, "scored": scored, "length": batch["length"]}

    # -- optimiser ------------------------------------------------------------------------------
    def configure_optimizers(self):
        # A learned REINFORCE baseline trains with an optimiser of its own.
        own = {id(p) for p in self.baselines.parameters()}
        params = [p for p in self.parameters() if p.requires_grad and id(p) not in own]
        return adamw_with_schedule(params, self.optim_spec, self.max_steps, trainer=self._trainer)

    # -- exact resumption ------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Dropout, Gumbel noise and REINFORCE samples draw from torch's generator: a resumed
        # run must continue its stream, not restart it, to match an uninterrupted run.
        checkpoint["attnlab"] = {"torch_rng": torch.get_rng_state()}
        learned = {name: b.optimizer.state_dict() for name, b in self.baselines.items() if b.head is not None}
        if learned:
            checkpoint["attnlab"]["baseline_optimizers"] = learned
        if torch.cuda.is_available():
            checkpoint["attnlab"]["cuda_rng"] = torch.cuda.get_rng_state_all()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("attnlab", {})
        if "torch_rng" in state:
            torch.set_rng_state(state["torch_rng"])
        for name, opt_state in state.get("baseline_optimizers", {}).items():
            self.baselines[name].optimizer.load_state_dict(opt_state)
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])

    @torch.no_grad()
    def attention_maps(self, example: dict[str, Tensor]) -> dict[str, Tensor]:
        """Weights of every layer for one fixed example (eval mode)."""
        was_training = self.training
        self.eval()
        example = {k: v.to(self.device) for k, v in example.items()}
        try:
            inputs, _, _ = self.adapter.io(example)
            return self.model.attention_maps(**inputs)
        finally:
            self.train(was_training)


def _reinforcing(stack: torch.nn.Module | None) -> bool:
    from variants.attention.hard import HardAttention

    return stack is not None and any(
        isinstance(m, HardAttention) and m.estimator == "reinforce" for m in stack.modules()
    )


def gather_sums(sums: dict[Any, dict[str, Tensor]]) -> dict[Any, dict[str, Tensor]]:
    """Every rank's statistic sums added together (a rank may lack a length: its share is absent)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return sums
    world = torch.distributed.get_world_size()
    if world == 1:
        return sums
    shares: list[Any] = [None] * world
    local = {key: {k: v.cpu() for k, v in part.items()} for key, part in sums.items()}
    torch.distributed.all_gather_object(shares, local)
    total: dict[Any, dict[str, Tensor]] = {}
    for share in shares:
        for key, part in share.items():
            total[key] = attention_stats.add(total.get(key), part)
    return total


def gather_texts(hypotheses: list[str], references: list[str]) -> tuple[list[str], list[str]]:
    """Every rank's (hypothesis, reference) pairs on every rank, so corpus BLEU covers the whole test set.

    Corpus BLEU and chrF sum statistics over sentences, so the order of the ranks' shares does not matter.
    """
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return hypotheses, references
    world = torch.distributed.get_world_size()
    if world == 1:
        return hypotheses, references
    shares: list[Any] = [None] * world
    torch.distributed.all_gather_object(shares, (hypotheses, references))
    return [h for hyp, _ in shares for h in hyp], [r for _, ref in shares for r in ref]
