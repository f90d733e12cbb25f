"""N seeds of one cell as one LightningModule: the members' weights carry a leading member dimension.

The forward pass is ``vmap`` over that dimension of the template's own forward, each member's
tensors put in its modules' places for the call (``randomness="different"``: each member draws its
own dropout masks). Each member's loss is its separate run's loss; the
sum of the live members' losses is backpropagated, and since no parameter is shared, each
gradient is exactly that member's. Everything that would otherwise mix members is done per
member: gradient clipping by each member's own norm, divergence (a member whose loss is
not finite is marked at that step, leaves the summed loss and the token count, and is never
evaluated; the others go on) and early stopping (a member stopped by its own validation,
``experiments.ensemble.validation``, is frozen, as completed). AdamW and the schedule
act elementwise, so one optimiser over the stacked weights steps each member as its own would.

A step reads nothing from the device: divergence is marked on the device and read at the
logging steps (as a separate run reads its own, ``TransformerModule._watch_divergence``), where a
diverged member is reported and the fit stops once no member trains.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import lightning as L
import torch
from torch import Tensor, nn
from torch.func import stack_module_state, vmap

from experiments.training.module import TransformerModule
from experiments.training.optimiser import adamw_with_schedule
from experiments.training.step_logging import log_if_stopped, log_step_loss

log = logging.getLogger("attnlab")


class EnsembleModule(L.LightningModule):
    """Trains ``members`` (built exactly as their separate runs build them) as one batched model."""

    def __init__(
        self, members: list[TransformerModule], seeds: list[int], grad_clip: float | None, log_every: int = 50
    ) -> None:
        super().__init__()
        self.seeds, self.grad_clip, self.log_every = list(seeds), grad_clip or None, max(int(log_every), 1)
        # A copy: member 0's own module is validated and tested with its own backends
        # (experiments.ensemble.validation); the template lends only its code and structure, never
        # its weights, and is held in a plain list so that it is no submodule.
        template = copy.deepcopy(members[0])
        self._template = [template]
        # Inside the batched step every attention layer takes its reference path (``math``), which
        # each fast path is tested equal to: a fast path may read its shapes from the data (the
        # banded local kernel's key slices) or lack a batched gradient (SDPA's for a learned bias).
        for sub in template.model.modules():
            if "math" in getattr(sub, "backends", ()) and (
                getattr(sub, "backend", "math") != "math" or getattr(sub, "auto", False)
            ):
                sub.backend, sub.auto = "math", False  # `auto` would choose per call (AttentionLayer.call_backend)
        self.optim_spec, self.max_steps = template.optim_spec, template.max_steps
        params, buffers = stack_module_state([m.model for m in members])  # name -> (N, ...)
        # A non-persistent buffer equal in every member is a constant the model derives (rope's
        # frequencies): it stays the template's own, unbatched, so code that reads its value works.
        constant = _non_persistent(template.model)
        buffers = {n: b for n, b in buffers.items() if not (n in constant and bool((b == b[:1]).all()))}
        self.param_names, self.buffer_names = list(params), list(buffers)
        # Where each batched tensor goes: every name of a shared tensor (the embedding reached from
        # the model, each stack and the tied head) is a slot of its own, filled with its canonical
        # tensor before the call and given back its own tensor after it. Resolved once here: the
        # swap runs every step, and a generic per-call swap (``functional_call``) walks the module
        # tree by name each time (about 2 ms of a 70 ms step of the quick cell on CPU).
        by_tensor = {id(t): n for n, t in [*template.model.named_parameters(), *template.model.named_buffers()]}
        index = {name: i for i, name in enumerate([*self.param_names, *self.buffer_names])}
        self._slots: list[tuple[dict[str, Any], str, int]] = []  # (owner's table, attr, index into the stack)
        for name, t in [
            *template.model.named_parameters(remove_duplicate=False),
            *template.model.named_buffers(remove_duplicate=False),
        ]:
            canonical = by_tensor[id(t)]
            if canonical not in index:
                continue  # a constant the template keeps unbatched (see above)
            path, _, attr = name.rpartition(".")
            owner = template.model.get_submodule(path)
            table = owner._parameters if attr in owner._parameters else owner._buffers
            self._slots.append((table, attr, index[canonical]))
        self.stacked = nn.ParameterList([nn.Parameter(params[n].detach().clone()) for n in self.param_names])
        for i, name in enumerate(self.buffer_names):
            self.register_buffer(f"member_buffer_{i}", buffers[name].clone())
        n = len(members)
        self.register_buffer("alive", torch.ones(n, dtype=torch.bool))
        self.register_buffer("diverged_at", torch.full((n,), -1, dtype=torch.long))
        self.register_buffer("stopped_at", torch.full((n,), -1, dtype=torch.long))  # early stopping
        self.register_buffer("tokens_seen", torch.zeros(n, dtype=torch.long))
        #: each member's training loss every ``log_every`` steps: [(step, [loss or None per member])]
        self.loss_history: list[tuple[int, list[float | None]]] = []
        self._frozen: dict[int, list[Tensor]] = {}  # a member's weights when it was seen to stop training
        self._bad_loss: Tensor | None = None  # (N,) each member's first non-finite loss, kept on the device
        self._unlogged_loss: Tensor | None = None  # this step's mean loss when it was not logged
        self._reported: set[int] = set()  # diverged members already reported

    @property
    def template(self) -> TransformerModule:
        return self._template[0]

    @property
    def members(self) -> int:
        return len(self.seeds)

    @property
    def updating(self) -> Tensor:
        """(N,) bool: the members still training (neither diverged nor stopped early)."""
        return self.alive & (self.stopped_at < 0)

    def training_members(self) -> list[int]:
        return self.updating.nonzero().flatten().tolist()

    def stop_member(self, index: int, step: int) -> None:
        """Member ``index`` stopped early at ``step`` by its own validation: its weights stay as they are."""
        self.stopped_at[index] = step
        self._freeze_dead()

    def member_steps(self, index: int, final_step: int) -> int:
        """The training steps member ``index`` took: to its divergence, its early stop, or the end."""
        for marks in (self.diverged_at, self.stopped_at):
            if int(marks[index]) >= 0:
                return int(marks[index])
        return final_step

    def member_state(self, index: int) -> dict[str, Tensor]:
        """Member ``index``'s weights and buffers as a ``Transformer`` state dict."""
        state = {name: p[index].detach().clone() for name, p in zip(self.param_names, self.stacked)}
        for i, name in enumerate(self.buffer_names):
            state[name] = getattr(self, f"member_buffer_{i}")[index].clone()
        return state

    def load_member_into(self, model: nn.Module, index: int) -> None:
        """Load member ``index``'s weights into ``model`` (a ``Transformer`` of the members' build); the
        names ``stack_module_state`` left out must be tied aliases of loaded ones."""
        state = self.member_state(index)
        saved = set(model.state_dict())
        aliases = saved - {n for n, _ in model.named_parameters()} - {n for n, _ in model.named_buffers()}
        # a non-persistent buffer (rope's frequencies) is rebuilt by the model, never loaded
        missing, unexpected = model.load_state_dict({k: v for k, v in state.items() if k in saved}, strict=False)
        if unexpected or set(missing) - aliases:
            raise RuntimeError(f"member weights do not fit the model: missing {missing}, unexpected {unexpected}")

    def on_fit_start(self) -> None:
        self.template.to(self.device)
        self._freeze_dead()
        # a resumed fit reports again only the divergences it has not reported before
        self._reported = {i for i, step in enumerate(self.diverged_at.tolist()) if step >= 0}

    # -- the batched step -------------------------------------------------------------------------
    def member_losses(self, inputs: dict[str, Tensor], targets: Tensor) -> Tensor:
        """inputs {key: (N, B, T)}, targets (N, B, T) | (N, B) -> each member's mean loss (N,)."""
        model, smoothing = self.template.model, self.optim_spec.label_smoothing
        buffers = [getattr(self, f"member_buffer_{i}") for i in range(len(self.buffer_names))]

        def one(params: list[Tensor], bufs: list[Tensor], x: dict[str, Tensor], y: Tensor) -> Tensor:
            batched = [*params, *bufs]  # inside vmap: this member's view of each stacked tensor
            own = [table[attr] for table, attr, _ in self._slots]
            for table, attr, i in self._slots:
                table[attr] = batched[i]
            try:
                logits = model(**x)
            finally:
                for (table, attr, _), tensor in zip(self._slots, own):
                    table[attr] = tensor
            return self.template._loss(logits, y, smoothing)

        return vmap(one, randomness="different")(list(self.stacked), buffers, inputs, targets)

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> Tensor | None:
        losses = self.member_losses(batch["inputs"], batch["targets"])  # (N,)
        detached = losses.detach()
        # Marked on the device, exactly at this step; read at the logging steps (``_read_members``).
        newly = self.updating & ~torch.isfinite(detached)
        self.diverged_at.masked_fill_(newly, self.global_step)
        self.alive &= ~newly
        if self._bad_loss is None:
            self._bad_loss = torch.zeros_like(detached)
        self._bad_loss = torch.where(newly, detached, self._bad_loss)
        updating = self.updating
        self.tokens_seen += batch["tokens"].to(self.tokens_seen.device) * updating
        live = torch.where(updating, losses, torch.zeros_like(losses))
        # Not a progress-bar metric: Lightning turns those into numbers after every step (a GPU stall);
        # the progress line reads ``callback_metrics`` at the logging steps, the only steps it is logged at, as a
        # single run's (experiments/training/step_logging.py).
        self._unlogged_loss = log_step_loss(self, live.sum() / updating.sum().clamp(min=1))
        done = self.global_step + 1
        if done % self.log_every == 0 or done >= self.max_steps:
            self._read_members(detached, updating)
        return live.sum()

    def _read_members(self, losses: Tensor, updating: Tensor) -> None:
        """At a logging step: record each member's loss, report the members that diverged since the last
        read (at the step each did) and stop the fit when no member trains any more."""
        # the steps a separate run logs its training loss at (Lightning: every n-th batch, its index)
        if (self.global_step + 1) % self.log_every == 0:
            values = losses.tolist()
            self.loss_history.append(
                (int(self.global_step), [v if a else None for v, a in zip(values, updating.tolist())])
            )
        steps = self.diverged_at.tolist()
        newly = [i for i, step in enumerate(steps) if step >= 0 and i not in self._reported]
        if newly:
            bad = self._bad_loss.tolist()
            for i in newly:
                log.warning(
                    "member %d (seed=%d): loss became %s at step %d; it stops, the others go on",
                    i,
                    self.seeds[i],
                    bad[i],
                    steps[i],
                )
            self._reported.update(newly)
            self._freeze_dead()
        if not bool(updating.any()):
            self.trainer.should_stop = True

    # -- what would mix members, done per member ---------------------------------------------------
    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """Each member clipped by its own gradient norm (``clip_grad_norm_``'s formula per member)."""
        grads = [p.grad for p in self.stacked if p.grad is not None]
        if not grads:
            return
        # Members seen to stop (early stopping, or a divergence read at a logging step), by host indices:
        # no read here. A divergence not read yet keeps its NaN gradient in its own slices (clipping,
        # AdamW and the schedule act per member), and that member is never evaluated.
        dead = sorted(self._frozen)
        if dead:
            for g in grads:
                g[dead] = 0.0  # a diverged member's gradient may hold NaN; a frozen member takes no step anyway
        if self.grad_clip is None:
            return
        norms = torch.stack([g.reshape(g.shape[0], -1).norm(dim=1) for g in grads])  # (P, N)
        total = norms.norm(dim=0)  # (N,): each member's norm over all its parameters
        scale = (self.grad_clip / (total + 1e-6)).clamp(max=1.0)  # (N,)
        for g in grads:
            g.mul_(scale.view(-1, *([1] * (g.dim() - 1))))

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        log_if_stopped(self, self._unlogged_loss)
        # AdamW's momentum and weight decay would move a frozen member's weights: put them back.
        with torch.no_grad():
            for i, weights in self._frozen.items():
                for p, w in zip(self.stacked, weights):
                    p[i] = w

    def _freeze_dead(self) -> None:
        for i in (~self.updating).nonzero().flatten().tolist():
            if i not in self._frozen:
                self._frozen[i] = [p[i].detach().clone() for p in self.stacked]

    # -- optimiser: the separate runs' AdamW and schedule, over the stacked weights ---------------------
    def configure_optimizers(self):
        # a separate run decays matrices (dim >= 2); here each carries one more (member) dimension.
        # Fused, as a separate run's: the AdamW update in one kernel over all the stacked weights (0.6 against
        # 4.3 ms per step for the quick cell's 5 members on CPU, where torch's default loops over them).
        params = [p for p in self.stacked if p.requires_grad]
        return adamw_with_schedule(params, self.optim_spec, self.max_steps, member_dims=1, trainer=self._trainer)

    # -- exact resumption --------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["attnlab_ensemble"] = {
            "seeds": self.seeds,
            "loss_history": self.loss_history,
            "torch_rng": torch.get_rng_state(),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("attnlab_ensemble", {})
        if state.get("seeds") != self.seeds:
            raise ValueError(f"the checkpoint holds the ensemble of seeds {state.get('seeds')}, not {self.seeds}")
        self.loss_history = [tuple(entry) for entry in state.get("loss_history", [])]
        if "torch_rng" in state:
            torch.set_rng_state(state["torch_rng"])


def _non_persistent(model: nn.Module) -> set[str]:
    """Full names of the buffers ``model`` leaves out of its state dict."""
    return {
        f"{prefix}.{name}" if prefix else name
        for prefix, sub in model.named_modules()
        for name in getattr(sub, "_non_persistent_buffers_set", ())
    }
