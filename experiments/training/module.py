"""The LightningModule: loss, the training and validation steps, generation, exact resumption.

Training is teacher-forced cross-entropy (with optional label smoothing) plus,
for REINFORCE hard attention, a score-function term (``experiments/model/reinforce.py``).
Validation is teacher-forced; testing of seq2seq tasks generates
greedily with the key/value cache and scores exact matches per evaluation length (the test phase:
``experiments/training/testing.py``; the optimiser and its schedule: ``experiments/training/optimiser.py``).
What differs between seq2seq, lm and classify (inputs and targets, the loss, the metrics)
lives in one adapter per kind (``experiments/training/task_adapters.py``), chosen once in ``__init__``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor
from torchmetrics import MeanMetric

from experiments.config.reinforce_options import ReinforceSpec
from experiments.config.schema import OptimConf
from experiments.model.reinforce import Baseline, mean_entropy, repeat_batch, returns, stack_log_probs, surrogate
from experiments.model.transformer import ModelSpec, Transformer
from experiments.tasks.batches import IGNORE, REPEATED
from experiments.training.optimiser import adamw_with_schedule
from experiments.training.step_logging import log_if_stopped, log_step_loss
from experiments.training.task_adapters import TaskAdapter, adapter_for
from experiments.training.testing import EvalOptions, TestingPhase
from variants.attention.hard import reinforce_layers
from variants.flex import choose_kernel_options


class DivergedError(RuntimeError):
    """The training loss became NaN or infinite."""

    def __init__(self, step: int, value: float) -> None:
        super().__init__(f"loss became {value} at step {step}")
        self.step = step


class TransformerModule(TestingPhase):
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
        # (step, loss) of the steps since divergence was last read (_watch_divergence)
        self._unread_losses: list[tuple[int, Tensor]] = []
        self._unlogged_loss: Tensor | None = None  # this step's loss when it was not logged
        self.reinforce_spec = self.optim_spec.reinforce()
        self.baselines = reinforce_baselines(self.model, self.reinforce_spec, self.spec.d_model)
        self.val_loss, self.val_acc = MeanMetric(), MeanMetric()
        self._init_testing()

    # -- loss -----------------------------------------------------------------------------------
    def _io(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor | None]:
        """(logits, targets, src) for the batch, whatever the task and arch."""
        inputs, targets, src = self.adapter.io(batch)
        # Always through forward(), so that model.compile=true compiles every architecture.
        return self.model(**inputs), targets, src

    def _losses(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
        """Mean loss and the per-example loss (B,)."""
        return self.adapter.losses(logits, targets, smoothing)

    def _loss(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
        """The mean loss alone (a training step's): ``_losses(...)[0]``, computed without the per-example part."""
        return self.adapter.loss(logits, targets, smoothing)

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
        loss = self._loss(logits, targets, self.optim_spec.label_smoothing)
        if self.baselines:
            costs = self._token_losses(logits, targets, self.optim_spec.label_smoothing).detach()
            loss = loss + self._reinforce(costs, targets, src)
        self._watch_divergence(loss)
        # Counted on the device and read once at the end: int() here would sync a GPU every step.
        self.tokens_seen = self.tokens_seen + self.adapter.seen(targets, src).detach()
        # Not a progress-bar metric: Lightning turns those into numbers (.item()) after every step,
        # which would stall the GPU each step. The bar and the log lines read ``callback_metrics``
        # at ``log_every_n_steps``; logged only at the steps Lightning writes (step_logging).
        self._unlogged_loss = log_step_loss(self, loss)
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        log_if_stopped(self, self._unlogged_loss)

    def on_validation_start(self) -> None:
        # A validation during the fit judges the weights (early stopping, a pruner, the best checkpoint):
        # never weights made by a divergence not read yet. (Outside a fit nothing is left unread.)
        self._read_losses()

    def on_train_end(self) -> None:
        # a fit stopped between two reads (a callback's stop, max_time) that diverged first is a divergence
        self._read_losses()

    def _watch_divergence(self, loss: Tensor) -> None:
        """Keep each step's loss on the device; every ``divergence_every`` steps, read them and raise at the first
        non-finite one.

        ``bool(isfinite(loss))`` on every step would make the host wait for the GPU each step. The step
        and value of the first bad loss stay exact however late they are read; the training app reads them
        at every logging and checkpointing step, so no checkpoint is written after a divergence it has not
        seen, and also before every validation and at the end of training, however the fit stopped. Between
        reads a step only keeps a reference to its loss: no operator, no kernel.
        """
        kept = loss.detach()
        # CUDA graphs may reuse their outputs' memory at the next step: keep a copy of anything they made
        self._unread_losses.append((self.global_step, kept.clone() if self.cudagraph_steps else kept))
        done = self.global_step + 1
        if done % max(self.divergence_every, 1) == 0 or done >= self.max_steps:
            self._read_losses()

    def _read_losses(self) -> None:
        """Read the losses kept since the last read (one host read) and raise at the first non-finite one."""
        if not self._unread_losses:
            return
        steps = [step for step, _ in self._unread_losses]
        values = torch.stack([value for _, value in self._unread_losses]).float().tolist()  # one read
        self._unread_losses = []
        for step, value in zip(steps, values):
            if not math.isfinite(value):
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


def reinforce_baselines(model: Transformer, spec: ReinforceSpec, features: int) -> torch.nn.ModuleDict:
    """One baseline per stack whose hard layers train by REINFORCE (none for other models)."""
    return torch.nn.ModuleDict(
        {
            name: Baseline(spec.baseline, spec.baseline_decay, spec.samples, features=features)
            for name in ("encoder", "decoder")
            if _reinforcing(getattr(model, name))
        }
    )
